//! Plain-stream vs tt-stream consumption throughput on the in-memory backend, 1/16/64 channels.
//!
//! The same pre-produced log (inserts spread over the channels, a timetick broadcast every
//! `TICK_EVERY` messages per channel) is consumed once by a plain `MsgStream` and once by a
//! `TtMsgStream`; both are timed until every data message has been delivered. A third run per
//! channel count produces channel 0 live while the others are already full, and reports the
//! tt stream's peak of buffered messages (aligner plus per-channel queues): it is bounded by the
//! queue capacity, not by the size of the log.
//!
//! `MSGSTREAM_BENCH_QUICK=1` shrinks the log so a run takes well under a minute.
#![allow(missing_docs, clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Instant;

use msgstream::mem::MemoryClient;
use msgstream::mq::{Client, InitialPosition};
use msgstream::msg::{InsertRequest, MsgBase, MsgBody, MsgPack, MsgType, TsMsg};
use msgstream::stream::{MsgStream, StreamOptions};
use msgstream::tt::TtMsgStream;

const TICK_EVERY: u64 = 64;

fn insert(row: i64, ts: u64, key: u32) -> TsMsg {
    TsMsg::new(MsgBody::Insert(InsertRequest {
        base: Some(MsgBase::new(MsgType::Insert as i32, row, ts)),
        timestamps: [ts].into(),
        row_ids: [row].into(),
        row_data: [msgstream::msg::Blob {
            value: vec![7; 64].into(),
        }]
        .into(),
        num_rows: 1,
        ..Default::default()
    }))
    .with_hash_keys(vec![key])
}

fn pack(msgs: Vec<TsMsg>) -> MsgPack {
    MsgPack {
        msgs,
        ..MsgPack::default()
    }
}

/// Produces `per_channel` inserts on each of `channels` with
/// a tick every `TICK_EVERY` rounds (only channel `only` when given); returns the number of data messages written.
async fn produce(
    client: &Arc<dyn Client>,
    channels: &[String],
    per_channel: u64,
    only: Option<usize>,
) -> u64 {
    let mut out = MsgStream::new(client.clone(), StreamOptions::default());
    let names: Vec<&str> = channels.iter().map(String::as_str).collect();
    out.as_producer(&names).await.unwrap();
    let n = channels.len() as u64;
    let mut written = 0;
    let mut ts = 1;
    let mut round = 0;
    while round < per_channel {
        let mut msgs = Vec::new();
        for _ in 0..TICK_EVERY.min(per_channel - round) {
            for c in 0..n {
                if only.is_none_or(|o| o as u64 == c) {
                    msgs.push(insert(ts as i64, ts, c as u32));
                    written += 1;
                }
                ts += 1;
            }
            round += 1;
        }
        out.produce(&pack(msgs)).await.unwrap();
        let ticks = (0..n)
            .filter(|c| only.is_none_or(|o| o as u64 == *c))
            .map(|c| TsMsg::time_tick(ts).with_hash_keys(vec![c as u32]))
            .collect();
        out.produce(&pack(ticks)).await.unwrap();
        ts += 1;
        tokio::task::yield_now().await;
    }
    written
}

fn names(prefix: &str, channels: usize) -> Vec<String> {
    (0..channels).map(|i| format!("{prefix}-{i}")).collect()
}

async fn plain_run(channels: usize, per_channel: u64) -> f64 {
    let client: Arc<dyn Client> = Arc::new(MemoryClient::new());
    let chans = names("plain", channels);
    let data = produce(&client, &chans, per_channel, None).await;
    let refs: Vec<&str> = chans.iter().map(String::as_str).collect();
    let start = Instant::now();
    let mut stream = MsgStream::new(client.clone(), StreamOptions::default());
    stream
        .as_consumer(&refs, "bench", InitialPosition::Earliest)
        .await
        .unwrap();
    let mut seen = 0;
    while seen < data {
        let pack = stream.next_pack().await.unwrap().unwrap();
        seen += pack.msgs.iter().filter(|m| !m.is_time_tick()).count() as u64;
    }
    let rate = data as f64 / start.elapsed().as_secs_f64();
    stream.close().await;
    rate
}

async fn tt_run(channels: usize, per_channel: u64) -> f64 {
    let client: Arc<dyn Client> = Arc::new(MemoryClient::new());
    let chans = names("tt", channels);
    let data = produce(&client, &chans, per_channel, None).await;
    let refs: Vec<&str> = chans.iter().map(String::as_str).collect();
    let start = Instant::now();
    let mut stream = TtMsgStream::new(client.clone(), StreamOptions::default());
    stream
        .as_consumer(&refs, "bench", InitialPosition::Earliest)
        .await
        .unwrap();
    let mut seen = 0;
    while seen < data {
        seen += stream.next_pack().await.unwrap().unwrap().msgs.len() as u64;
    }
    let rate = data as f64 / start.elapsed().as_secs_f64();
    stream.close().await;
    rate
}

/// Channel 0 is produced while the stream runs; every other channel is full from the start.
async fn lag_run(channels: usize, per_channel: u64) -> (usize, u64) {
    let client: Arc<dyn Client> = Arc::new(MemoryClient::new());
    let chans = names("lag", channels);
    let mut data = 0;
    for c in 1..channels {
        data += produce(&client, &chans, per_channel, Some(c)).await;
    }
    let refs: Vec<&str> = chans.iter().map(String::as_str).collect();
    let mut stream = TtMsgStream::new(client.clone(), StreamOptions::default());
    stream
        .as_consumer(&refs, "bench", InitialPosition::Earliest)
        .await
        .unwrap();
    let lagging = {
        let client = client.clone();
        let chans = chans.clone();
        tokio::spawn(async move { produce(&client, &chans, per_channel, Some(0)).await })
    };
    let mut seen = 0;
    let total = data + per_channel;
    while seen < total {
        seen += stream.next_pack().await.unwrap().unwrap().msgs.len() as u64;
    }
    lagging.await.unwrap();
    let peak = stream.stats().peak_buffered;
    stream.close().await;
    (peak, total)
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    xs[xs.len() / 2]
}

fn main() {
    let quick = std::env::var("MSGSTREAM_BENCH_QUICK").is_ok_and(|v| v != "0");
    let (total, repeats) = if quick {
        (64_000u64, 3)
    } else {
        (256_000u64, 5)
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let started = Instant::now();
    let mut lines = Vec::new();
    println!("msgstream streams bench: in-memory backend, {total} data msgs per run, median of {repeats} runs");
    println!(
        "{:>8} {:>16} {:>16} {:>7} {:>14} {:>12}",
        "channels", "plain msgs/s", "tt msgs/s", "ratio", "peak_buffered", "lag-run msgs"
    );
    for channels in [1usize, 16, 64] {
        let per_channel = (total / channels as u64).max(TICK_EVERY);
        let mut plain = Vec::new();
        let mut tt = Vec::new();
        for _ in 0..repeats {
            // Interleaved, so neither side always runs on a warmer machine.
            plain.push(runtime.block_on(plain_run(channels, per_channel)));
            tt.push(runtime.block_on(tt_run(channels, per_channel)));
        }
        let (plain, tt) = (median(plain), median(tt));
        let (peak, lag_total) = runtime.block_on(lag_run(channels, per_channel));
        println!(
            "{channels:>8} {plain:>16.0} {tt:>16.0} {:>7.3} {peak:>14} {lag_total:>12}",
            tt / plain
        );
        lines.push(format!(
            "channels={channels} plain_msgs_per_s={plain:.0} tt_msgs_per_s={tt:.0} ratio={:.3} peak_buffered={peak}",
            tt / plain
        ));
    }
    println!("elapsed {:.1?}", started.elapsed());
    for line in lines {
        println!("{line}");
    }
}
