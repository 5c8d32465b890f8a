//! Opening a queue of many channels, one of which holds a single 64 MiB message (the shape of
//! issue 42: 5,000 channels took 17–20 s to open, every time, because recovering each channel's
//! tail decompressed the block of that one message again). Two figures of the same files:
//!
//! - `open_ms`: `Rocksmq::open`;
//! - `raw_open_ms`: RocksDB opening the same files with the same options and nothing else
//!   (`ratio=` is ours over this).
//!
//! The big message sits in the middle channel, so that channels on both sides of it have it
//! as their nearest neighbour in key order. The files are left as the queue's own reopen left
//! them (the WAL flushed into a level-0 table, no compaction), as a user finds them.

use std::time::Instant;

use msgstream::mq::ProducerMessage;
use msgstream_rocksmq::Rocksmq;

use crate::consume::open_raw_same_files;
use crate::{median, paired_ratio, queue_options_at, RUNS};

/// The big message: the largest payload the stream layer accepts.
const BIG: usize = 64 * 1024 * 1024;

/// Adds the `case=open_big_message` line for `channels` channels: medians over `RUNS` opens of
/// each side, alternating which goes first.
pub fn open_big_message_case(
    runtime: &tokio::runtime::Runtime,
    channels: usize,
    summary: &mut Vec<String>,
) {
    let dir = tempfile::tempdir().expect("tempdir");
    runtime.block_on(fill(dir.path(), channels));
    // The first reopen flushes the recovered WAL into a table, as a user's next command would.
    Rocksmq::open(queue_options_at(dir.path()))
        .expect("reopen")
        .close();
    let (mut ours, mut raw) = (Vec::new(), Vec::new());
    for run in 0..RUNS {
        if run % 2 == 0 {
            ours.push(open_ours(dir.path(), channels));
        }
        raw.push(open_raw(dir.path()));
        if run % 2 == 1 {
            ours.push(open_ours(dir.path(), channels));
        }
    }
    let ratio = paired_ratio(&ours, &raw);
    let (ours, raw) = (median(ours), median(raw));
    summary.push(format!(
        "case=open_big_message channels={channels} big_mib={} open_ms={ours:.1} raw_open_ms={raw:.1} ratio={ratio:.2}",
        BIG >> 20
    ));
}

/// Creates `channels` empty channels and writes one big, compressible message to the middle one.
async fn fill(path: &std::path::Path, channels: usize) {
    let mq = Rocksmq::open(queue_options_at(path)).expect("open");
    for channel in 0..channels {
        mq.create_topic(&name(channel)).expect("topic");
    }
    let payload: Vec<u8> = b"0123456789abcdef"
        .iter()
        .copied()
        .cycle()
        .take(BIG)
        .collect();
    mq.produce(&name(channels / 2), vec![ProducerMessage::new(payload)])
        .await
        .expect("produce");
    mq.close();
}

fn name(channel: usize) -> String {
    format!("ch-{channel:05}")
}

/// Milliseconds `Rocksmq::open` took; checks it found every channel.
fn open_ours(path: &std::path::Path, channels: usize) -> f64 {
    let start = Instant::now();
    let mq = Rocksmq::open(queue_options_at(path)).expect("open");
    let elapsed = start.elapsed().as_secs_f64() * 1e3;
    assert_eq!(mq.topics().expect("topics").len(), channels);
    mq.close();
    elapsed
}

/// Milliseconds a raw RocksDB open of the same files took.
fn open_raw(path: &std::path::Path) -> f64 {
    let start = Instant::now();
    drop(open_raw_same_files(path));
    start.elapsed().as_secs_f64() * 1e3
}
