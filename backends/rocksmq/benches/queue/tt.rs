//! The timetick-aligned stream end to end over rocksmq: a `TtMsgStream` consuming 16, 64 and
//! 256 filled channels (the same inserts in all, spread over more channels), against raw
//! RocksDB iterating the same files (every record of those channels, ticks included, each
//! value copied out). Both rates count the data messages delivered. Raw RocksDB reads each
//! database twice per pass, with default read options (`case=tt_rocksmq`, #13's reference)
//! and with the read options the queue gives its backlog reads, readahead and no block-cache
//! fill (`case=tt_rocksmq_same_readahead`), as the consume case does. `MSGSTREAM_BENCH_TT_CHANNELS=16` runs one channel count. At 16
//! channels a third pass per round reads every insert's row data as well
//! (`case=tt_rocksmq_read_bodies`): received inserts are decoded on first access, so this is
//! what an application that reads every body pays, on its own task.
//!
//! Each line also gives the most memory the process held while our stream read
//! (`peak_rss_mib`, the largest over the passes) and how far that peak rose above what was
//! resident when the pass began (`rss_growth_mib`): the stream's own buffers, bounded by its
//! settings (`buffer` messages per channel), whatever the backlog.
//!
//! The consuming loop runs as a task on the bench's two-worker runtime, beside the stream's
//! pumps, as an application's consumers run (and as the NSQ bench drives both of its sides).
//! Driven from the main thread with `block_on` instead, it is a third thread on two cores:
//! every hand-off between it and the pumps crosses threads, and it measured about a sixth
//! slower (each of the three threads busy a little over half the time; on the workers, both
//! busy nearly nine tenths of it). The README says so among what an application can tune.

use std::sync::Arc;
use std::time::Instant;

use msgstream::mq::{Client, InitialPosition};
use msgstream::msg::{Blob, InsertRequest, MsgBase, MsgBody, MsgPack, MsgType, TsMsg};
use msgstream::stream::{MsgStream, StreamOptions};
use msgstream::tt::TtMsgStream;
use msgstream_rocksmq::{backlog_scan_options, RocksmqClient};

use crate::consume::{open_raw_same_files, settle};
use crate::rss::{self, Peak};
use crate::{chosen, median, paired_ratio, queue_options, queue_options_at, Scale, RUNS};

/// Channel counts of the case: one line pair each, the same inserts over all channels.
const CHANNELS: [usize; 3] = [16, 64, 256];
/// Rounds (one insert per channel each) between two timeticks on every channel.
const TICK_EVERY: u64 = 64;

/// Read passes per side over each filled database: a pass takes about a sixth of a second,
/// short enough for one pass to swing by a fifth on this machine, so the figures are medians
/// over `RUNS × TT_PASSES` passes (pairs, for the ratio).
const TT_PASSES: usize = 3;

/// Adds the `case=tt_rocksmq` and `case=tt_rocksmq_same_readahead` lines of every channel
/// count.
pub fn tt_cases(runtime: &tokio::runtime::Runtime, scale: &Scale, summary: &mut Vec<String>) {
    for channels in chosen("MSGSTREAM_BENCH_TT_CHANNELS", &CHANNELS) {
        tt_case(runtime, scale, channels, summary);
    }
}

/// The two lines of one channel count: medians over `RUNS` filled databases, each read
/// `TT_PASSES` times by ours and both raw readers (whether ours or raw goes first alternates;
/// the raw readers follow each other, ours always next to the one with default options).
fn tt_case(
    runtime: &tokio::runtime::Runtime,
    scale: &Scale,
    channels: usize,
    summary: &mut Vec<String>,
) {
    let (mut ours, mut raw, mut raw_ahead) = (Vec::new(), Vec::new(), Vec::new());
    let mut ours_bodies = Vec::new();
    let mut memory = Vec::new();
    for run in 0..RUNS {
        let dir = tempfile::tempdir().expect("tempdir");
        let per_channel = (scale.tt_msgs / channels) as u64;
        let data = runtime.block_on(fill(&dir, channels, per_channel));
        settle(dir.path());
        for pass in 0..TT_PASSES {
            let raw_first = (run + pass) % 2 == 0;
            if raw_first {
                raw_ahead.push(raw_read(&dir, data, true));
                raw.push(raw_read(&dir, data, false));
            }
            let path = dir.path().to_path_buf();
            let peak = Peak::start();
            ours.push(
                runtime
                    .block_on(async move {
                        tokio::spawn(tt_read(path, channels, data, pass, false)).await
                    })
                    .expect("tt read task"),
            );
            memory.push(peak.end());
            if channels == CHANNELS[0] {
                let path = dir.path().to_path_buf();
                let subscription = pass + TT_PASSES;
                ours_bodies.push(
                    runtime
                        .block_on(async move {
                            tokio::spawn(tt_read(path, channels, data, subscription, true)).await
                        })
                        .expect("tt read task"),
                );
            }
            if !raw_first {
                raw.push(raw_read(&dir, data, false));
                raw_ahead.push(raw_read(&dir, data, true));
            }
        }
    }
    let (ratio, ahead_ratio) = (paired_ratio(&ours, &raw), paired_ratio(&ours, &raw_ahead));
    let bodies_ratio = (!ours_bodies.is_empty()).then(|| paired_ratio(&ours_bodies, &raw));
    let (ours, raw, raw_ahead) = (median(ours), median(raw), median(raw_ahead));
    let memory = rss::fields(&memory);
    summary.push(format!(
        "case=tt_rocksmq channels={channels} msgs_per_s={ours:.0} raw_consume_msgs_per_s={raw:.0} ratio={ratio:.2} {memory}"
    ));
    summary.push(format!(
        "case=tt_rocksmq_same_readahead channels={channels} msgs_per_s={ours:.0} raw_consume_msgs_per_s={raw_ahead:.0} ratio={ahead_ratio:.2}"
    ));
    if let Some(bodies_ratio) = bodies_ratio {
        summary.push(format!(
            "case=tt_rocksmq_read_bodies channels={channels} msgs_per_s={:.0} raw_consume_msgs_per_s={raw:.0} ratio={bodies_ratio:.2}",
            median(ours_bodies)
        ));
    }
}

fn names(channels: usize) -> Vec<String> {
    (0..channels).map(|c| format!("tt-{c}")).collect()
}

fn insert(row: u64, key: u32) -> TsMsg {
    TsMsg::new(MsgBody::Insert(InsertRequest {
        base: Some(MsgBase::new(MsgType::Insert as i32, row as i64, row)),
        timestamps: [row].into(),
        row_ids: [row as i64].into(),
        row_data: [Blob {
            value: vec![7; 64].into(),
        }]
        .into(),
        num_rows: 1,
        ..Default::default()
    }))
    .with_hash_keys(vec![key])
}

/// Writes `per_channel` inserts to each of `channels` channels with a tick on every channel
/// each `TICK_EVERY` rounds, then closes the queue; returns the number of inserts.
async fn fill(dir: &tempfile::TempDir, channels: usize, per_channel: u64) -> u64 {
    let client: Arc<dyn Client> = Arc::new(RocksmqClient::open(queue_options(dir)).expect("open"));
    let mut stream = MsgStream::new(client.clone(), StreamOptions::default());
    let names = names(channels);
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    stream.as_producer(&refs).await.expect("producers");
    let (mut ts, mut written, mut round) = (1u64, 0u64, 0u64);
    while round < per_channel {
        let mut msgs = Vec::new();
        for _ in 0..TICK_EVERY.min(per_channel - round) {
            for c in 0..channels as u32 {
                msgs.push(insert(ts, c));
                ts += 1;
                written += 1;
            }
            round += 1;
        }
        let pack = MsgPack {
            msgs,
            ..MsgPack::default()
        };
        stream.produce(&pack).await.expect("produce");
        let tick = MsgPack {
            msgs: vec![TsMsg::time_tick(ts)],
            ..MsgPack::default()
        };
        stream.broadcast(&tick).await.expect("broadcast");
        ts += 1;
    }
    stream.close().await;
    client.close().await;
    written
}

/// The tt stream from the earliest message until every insert was delivered, with a
/// subscription of the pass's own (each pass reads everything). With `read_bodies` the
/// application also reads every insert's row data (which decodes each body, on its task).
async fn tt_read(
    path: std::path::PathBuf,
    channels: usize,
    data: u64,
    pass: usize,
    read_bodies: bool,
) -> f64 {
    let client: Arc<dyn Client> =
        Arc::new(RocksmqClient::open(queue_options_at(&path)).expect("open"));
    let names = names(channels);
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let start = Instant::now();
    let mut stream = TtMsgStream::new(client.clone(), StreamOptions::default());
    stream
        .as_consumer(&refs, &format!("tt-{pass}"), InitialPosition::Earliest)
        .await
        .expect("consumer");
    let (mut seen, mut row_bytes) = (0, 0);
    while seen < data {
        let pack = stream.next_pack().await.expect("open").expect("pack");
        seen += pack.msgs.len() as u64;
        if read_bodies {
            row_bytes += pack
                .msgs
                .iter()
                .flat_map(TsMsg::row_data)
                .map(<[u8]>::len)
                .sum::<usize>();
        }
    }
    assert!(
        !read_bodies || row_bytes == 64 * data as usize,
        "every row read"
    );
    let rate = data as f64 / start.elapsed().as_secs_f64();
    assert_eq!(seen, data);
    stream.close().await;
    client.close().await;
    rate
}

/// Raw RocksDB over the same (settled) files: every record of the messages column family, with
/// default read options or (`readahead`) the queue's backlog read options.
fn raw_read(dir: &tempfile::TempDir, data: u64, readahead: bool) -> f64 {
    let db = open_raw_same_files(dir.path());
    let cf = db.cf_handle("messages").expect("cf");
    let options = if readahead {
        backlog_scan_options()
    } else {
        rocksdb::ReadOptions::default()
    };
    let mut iter = db.raw_iterator_cf_opt(cf, options);
    iter.seek_to_first();
    let start = Instant::now();
    let mut records = 0u64;
    while let (Some(_), Some(value)) = (iter.key(), iter.value()) {
        let copy = bytes::Bytes::copy_from_slice(value);
        records += u64::from(!copy.is_empty());
        iter.next();
    }
    let rate = data as f64 / start.elapsed().as_secs_f64();
    assert!(records > data, "every insert and tick was read");
    rate
}
