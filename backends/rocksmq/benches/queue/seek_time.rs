//! Seeking one channel by time (`case=seek_time`): the p50 of 100 searches for random times
//! (`Rocksmq::position_at_time`: a binary search over the time index, then at most one block
//! of 256 messages read and decoded), beside the p50 of reading one block of 256 messages from
//! a random id (`page_read_us`, a `TopicReader` read with nothing decoded). A time search
//! costs that read plus its binary search and the decoding, however many messages the channel
//! holds.
//!
//! The channel holds `msgs` one-row inserts (10,000,000; 1,000,000 with `MSGSTREAM_BENCH_QUICK`,
//! or `MSGSTREAM_BENCH_SEEK_MSGS`), written in batches of 1,024 with a timetick after every
//! ten inserts, the inserts out of timestamp order between ticks; the files are settled
//! (flushed and compacted) and the queue reopened before measuring.

use std::time::Instant;

use msgstream::mq::ProducerMessage;
use msgstream::msg::TsMsg;
use msgstream::testkit::insert;
use msgstream_rocksmq::Rocksmq;

use crate::consume::settle;
use crate::{median, queue_options_at};

const SEARCHES: usize = 100;
const BLOCK: usize = 256;

/// The timestamp of message `i`: eleven messages per tick interval of 1,000, the tick last.
fn timestamp(i: u64) -> u64 {
    let (round, k) = (i / 11, i % 11);
    if k == 10 {
        round * 1000 + 999
    } else {
        round * 1000 + ((k * 7) % 10) * 10 + 1
    }
}

/// The index of the first message with timestamp ≥ `time` (every round ends with a tick at
/// its largest timestamp, so the answer is in the round of `time`).
fn first_at(time: u64) -> Option<u64> {
    let round = time / 1000;
    (round * 11..round * 11 + 11).find(|&i| timestamp(i) >= time)
}

fn message(i: u64) -> ProducerMessage {
    let ts = timestamp(i);
    let msg = if i % 11 == 10 {
        TsMsg::time_tick(ts)
    } else {
        insert(i as i64, ts, 0)
    };
    ProducerMessage::new(msg.encode()).with_timestamp(ts)
}

/// A small deterministic generator (xorshift), so runs search the same times.
struct Random(u64);

impl Random {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

fn messages() -> u64 {
    let quick = std::env::var("MSGSTREAM_BENCH_QUICK").is_ok_and(|v| v == "1");
    std::env::var("MSGSTREAM_BENCH_SEEK_MSGS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if quick { 1_000_000 } else { 10_000_000 })
}

/// Adds the `case=seek_time` line.
pub fn seek_time_case(runtime: &tokio::runtime::Runtime, summary: &mut Vec<String>) {
    let msgs = messages();
    let dir = tempfile::tempdir().expect("tempdir");
    runtime.block_on(async {
        let mq = Rocksmq::open(queue_options_at(dir.path())).expect("open");
        mq.create_topic("t").expect("topic");
        let mut i = 0;
        while i < msgs {
            let end = (i + 1024).min(msgs);
            mq.produce("t", (i..end).map(message).collect())
                .await
                .expect("produce");
            i = end;
        }
        mq.close();
    });
    settle(dir.path());
    let mq = Rocksmq::open(queue_options_at(dir.path())).expect("reopen");
    let mut random = Random(0x9e37_79b9_7f4a_7c15);
    let last = timestamp(msgs - 1);
    let mut seeks = Vec::with_capacity(SEARCHES);
    let mut reads = Vec::with_capacity(SEARCHES);
    for _ in 0..SEARCHES {
        let time = random.below(last + 1);
        let started = Instant::now();
        let found = mq.position_at_time("t", time).expect("search");
        seeks.push(started.elapsed().as_secs_f64() * 1e6);
        let expected = first_at(time).filter(|&i| i < msgs);
        assert!(
            expected.is_none_or(|i| i + 1 == found),
            "time {time}: found id {found}, expected message {expected:?}"
        );

        let from = random.below(msgs) + 1;
        let started = Instant::now();
        let block = mq
            .reader("t", from)
            .expect("reader")
            .read(BLOCK)
            .expect("read");
        reads.push(started.elapsed().as_secs_f64() * 1e6);
        assert!(!block.is_empty());
    }
    let (seek, read) = (median(seeks), median(reads));
    summary.push(format!(
        "case=seek_time channels=1 msgs={msgs} seek_us={seek:.0} page_read_us={read:.0} ratio={:.2}",
        seek / read
    ));
}
