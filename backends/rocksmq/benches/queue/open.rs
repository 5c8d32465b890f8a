//! Opening a queue whose 16 topics each hold an open retention page of several MiB (a restart
//! before the first page closes: with the default 64 MiB pages, the normal case for a topic that
//! gets less than 64 MiB a day). Three figures of the same settled files:
//!
//! - `open_ms`: `Rocksmq::open` (RocksDB's open, the topics and groups loaded, every topic's
//!   tail recovered from its newest key, page record and page mark);
//! - `raw_open_ms`: RocksDB opening the same files with the same options and nothing else, the
//!   floor (`ratio=` is ours over this);
//! - `scan_open_pages_ms`: that raw open plus reading every value of the open pages, which is
//!   what the queue's open did before page marks (it counted each open page's bytes from the
//!   page's first message; with marks it counts at most the last MiB and one message).

use std::time::Instant;

use msgstream::mq::ProducerMessage;
use msgstream_rocksmq::Rocksmq;

use crate::consume::{open_raw_same_files, settle};
use crate::{median, paired_ratio, queue_options_at, Scale, RUNS};

const TOPICS: usize = 16;
const PAYLOAD: usize = 1024;
/// Opens per side of each filled database (sides alternating which goes first).
const OPEN_PASSES: usize = 3;

/// Adds the `case=open_rocksmq` line: medians over `RUNS` filled databases, each opened
/// `OPEN_PASSES` times by every side.
pub fn open_cases(runtime: &tokio::runtime::Runtime, scale: &Scale, summary: &mut Vec<String>) {
    let (mut ours, mut raw_open, mut scan) = (Vec::new(), Vec::new(), Vec::new());
    for run in 0..RUNS {
        let dir = tempfile::tempdir().expect("tempdir");
        runtime.block_on(fill(dir.path(), scale.open_mib_per_topic));
        settle(dir.path());
        for pass in 0..OPEN_PASSES {
            let ours_first = (run + pass) % 2 == 0;
            if ours_first {
                ours.push(open_ours(dir.path()));
            }
            raw_open.push(open_raw(dir.path(), None));
            let open_pages = (TOPICS * scale.open_mib_per_topic) as u64 * 1024 * 1024;
            scan.push(open_raw(dir.path(), Some(open_pages)));
            if !ours_first {
                ours.push(open_ours(dir.path()));
            }
        }
    }
    let ratio = paired_ratio(&ours, &raw_open);
    let (ours, raw_open, scan) = (median(ours), median(raw_open), median(scan));
    summary.push(format!(
        "case=open_rocksmq topics={TOPICS} open_page_mib={} open_ms={ours:.1} raw_open_ms={raw_open:.1} ratio={ratio:.2} scan_open_pages_ms={scan:.1}",
        scale.open_mib_per_topic
    ));
}

/// Creates the topics and writes `mib` MiB of 1 KiB messages to each, in batches of 1,024.
async fn fill(path: &std::path::Path, mib: usize) {
    let mq = Rocksmq::open(queue_options_at(path)).expect("open");
    for topic in 0..TOPICS {
        let name = format!("open-{topic}");
        mq.create_topic(&name).expect("topic");
        for _ in 0..mib {
            let batch = (0..1024)
                .map(|_| ProducerMessage::new(vec![topic as u8; PAYLOAD]))
                .collect();
            mq.produce(&name, batch).await.expect("produce");
        }
    }
    mq.close();
}

/// Milliseconds `Rocksmq::open` took; checks it found every topic.
fn open_ours(path: &std::path::Path) -> f64 {
    let start = Instant::now();
    let mq = Rocksmq::open(queue_options_at(path)).expect("open");
    let elapsed = start.elapsed().as_secs_f64() * 1e3;
    assert_eq!(mq.topics().expect("topics").len(), TOPICS);
    mq.close();
    elapsed
}

/// Milliseconds a raw RocksDB open took, and with `scan` also reading every stored message and
/// property value (without filling the block cache, as the queue's open scan did), checking
/// they add up to the bytes `scan` says the open pages hold.
fn open_raw(path: &std::path::Path, scan: Option<u64>) -> f64 {
    let start = Instant::now();
    let db = open_raw_same_files(path);
    let mut bytes = 0u64;
    if scan.is_some() {
        for cf in ["messages", "properties"] {
            let mut options = rocksdb::ReadOptions::default();
            options.fill_cache(false);
            let mut iter = db.raw_iterator_cf_opt(db.cf_handle(cf).expect("cf"), options);
            iter.seek_to_first();
            while let Some(value) = iter.value() {
                bytes += value.len() as u64;
                iter.next();
            }
        }
    }
    let elapsed = start.elapsed().as_secs_f64() * 1e3;
    if let Some(expected) = scan {
        assert_eq!(bytes, expected, "the open pages' bytes");
    }
    elapsed
}
