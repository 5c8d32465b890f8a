//! Throughput and latency of the rocksmq queue, side by side with raw RocksDB.
//!
//! Run: `cargo bench -p msgstream-rocksmq --bench queue` (`MSGSTREAM_BENCH_QUICK=1`: a few
//! minutes). Every figure is the median of several runs or rounds; every `ratio=` is the median
//! of the ratios of paired runs (ours and the reference back to back).
//!
//! - produce: msgs/s and MB/s through `Producer::send` (batches of one) or `send_batch`, and
//!   through raw `WriteBatch` puts of the same keys and payloads into the same column family
//!   with the same options (the physical reference), for 128 B and 1 KiB payloads and batches
//!   of 1, 64 and 1024; each side keeps one database per case and writes it in 30 rounds of a
//!   chunk each, the two chunks of a round back to back (see `throughput.rs`);
//! - consume: the queue is filled and closed, its files settled (WAL flushed, messages
//!   compacted) and copied twice; the queue reopened on one copy reads everything with one
//!   consumer group through `Consumer::recv_batch` (batches of 1024, acking each batch's last
//!   message, as the stream pumps do), the engine's batch API (`Subscription::consume`) reads
//!   the second, and raw RocksDB iterates the third's messages column family, copying each
//!   value into an owned `Bytes` (the least a reader must do to hand a message on: the
//!   physical reference). The three read in 30 rounds of a chunk each, ours next to raw (see
//!   `consume.rs`);
//! - latency: produce→receive p50/p99 for one producer at 10,000 msgs/s and one waiting
//!   consumer, against the same pacing through a raw RocksDB put with the queue's write
//!   options that wakes a reader blocked on a condition, which reads the key
//!   (`case=latency_floor`, the least an embedded durable queue can do, with our p50 and p99 as
//!   ratios to it), and through a plain `std::sync::mpsc` hand-off between two threads
//!   (`case=latency_baseline`, thread wake-ups alone, no database); the
//!   same hand-off with a receiver busy after each message for as long as our ack takes
//!   (`case=latency_baseline_busy`), ours acking every 64th message
//!   (`case=latency_acks_every`), and ours acking each message on a queue that groups acks
//!   (`case=latency_grouped_acks`, `AckWrite::Grouped` of 5 ms; see `latency.rs`);
//! - tt: a `TtMsgStream` over 16, 64 and 256 filled channels (the same inserts) against raw
//!   iteration of the same files, three passes of each side per filled database, with the
//!   peak resident memory of our passes, and at 16 channels passes that read every body
//!   (see `tt.rs`);
//! - durable: 1, 4 and 16 producers sending one message at a time under `SyncData`, against
//!   a perfect group commit of raw `fdatasync`-ed writes driven the same way (`N` tasks, one
//!   committer thread, `N` messages per synced write; see `durable.rs`);
//! - open: `Rocksmq::open` of 16 topics with 16 MiB open pages each, against RocksDB opening
//!   the same files alone and against that open plus a scan of the open pages, which the
//!   queue's open read before page marks (see `open.rs`); and `Rocksmq::open` of 5,000
//!   channels (500 quick) next to one 64 MiB message, against RocksDB's own open of the same
//!   files (`case=open_big_message`, see `open_big.rs`).
//!
//! The bench runs with glibc's malloc thresholds fixed (`GLIBC_TUNABLES`, see
//! [`ALLOCATOR_TUNABLES`]; it re-executes itself to set them) unless the caller set
//! `GLIBC_TUNABLES` (an empty value runs with glibc's defaults). With the defaults, what a
//! side's speed is depends on what ran before it: the raw reference of the tt case, which runs
//! on the main thread, read 2.7–3.2 M records/s when run alone, trimming and regrowing the
//! heap a thousand times, and 3.2–4.6 M after other cases, 3.6–4.5 M with these tunables,
//! while ours moved by a few percent. Fixed, a case reads the same alone as in a full run. A profiler
//! that does not follow child processes (`valgrind` without `--trace-children=yes`) needs
//! `GLIBC_TUNABLES` set by the caller (`GLIBC_TUNABLES= valgrind --tool=callgrind …`), so
//! that the bench runs in the process it watches.
//!
//! - seek_time: searching a channel of 10,000,000 messages by time, against reading one index
//!   block of 256 messages (`case=seek_time`, see `seek_time.rs`).
//!
//! `MSGSTREAM_BENCH_CASES=consume,latency` runs only the named kinds of case (`produce`,
//! `consume`, `latency`, `tt`, `durable`, `open`, `seek_time`), e.g. for profiling one; `MSGSTREAM_BENCH_PAYLOADS`
//! and `MSGSTREAM_BENCH_BATCHES` (comma-separated numbers) narrow the produce and consume cases,
//! `MSGSTREAM_BENCH_TT_CHANNELS` the tt case.

mod consume;
mod durable;
mod latency;
mod open;
mod open_big;
mod rss;
mod seek_time;
mod throughput;
mod tt;

use msgstream::mq::ProducerMessage;
use msgstream_rocksmq::{column_family_options, database_options, Durability, RocksmqOptions};
use rocksdb::{ColumnFamilyDescriptor, DB};

const RUNS: usize = 5;
const TOPIC_ID: u64 = 1;

struct Scale {
    produce_msgs: usize,
    produce_msgs_unbatched: usize,
    consume_msgs: usize,
    latency_msgs: usize,
    /// Data messages over all channels of the tt case.
    tt_msgs: usize,
    /// Messages per durable run (over all producers).
    durable_msgs: usize,
    /// MiB in each topic's open page in the open case.
    open_mib_per_topic: usize,
    /// Channels of the open case with one big message.
    open_big_channels: usize,
}

fn scale() -> Scale {
    if std::env::var("MSGSTREAM_BENCH_QUICK").is_ok_and(|v| v == "1") {
        Scale {
            produce_msgs: 100_000,
            produce_msgs_unbatched: 20_000,
            consume_msgs: 200_000,
            latency_msgs: 10_000,
            tt_msgs: 64_000,
            durable_msgs: 1_000,
            open_mib_per_topic: 4,
            open_big_channels: 500,
        }
    } else {
        Scale {
            produce_msgs: 500_000,
            produce_msgs_unbatched: 100_000,
            consume_msgs: 1_000_000,
            latency_msgs: 50_000,
            tt_msgs: 256_000,
            durable_msgs: 2_000,
            open_mib_per_topic: 16,
            open_big_channels: 5_000,
        }
    }
}

/// Whether the kind of case (`produce`, `consume`, `latency`, `tt`, `durable`, `open`) was
/// asked for.
fn wanted(kind: &str) -> bool {
    std::env::var("MSGSTREAM_BENCH_CASES").map_or(true, |cases| {
        cases.split(',').any(|case| case.trim() == kind)
    })
}

/// The values of a comma-separated list in environment variable `name`, or `all` if unset:
/// `MSGSTREAM_BENCH_PAYLOADS=128 MSGSTREAM_BENCH_BATCHES=1` runs one produce case, e.g. under
/// `valgrind --tool=callgrind` to count its instructions.
fn chosen(name: &str, all: &[usize]) -> Vec<usize> {
    match std::env::var(name) {
        Ok(list) => list
            .split(',')
            .map(|v| v.trim().parse().expect("a number"))
            .collect(),
        Err(_) => all.to_vec(),
    }
}

/// The median of the ratios of paired runs (`ours[i] / reference[i]`, each pair measured back
/// to back): steadier than the ratio of the two medians when the machine's speed drifts.
fn paired_ratio(ours: &[f64], reference: &[f64]) -> f64 {
    median(ours.iter().zip(reference).map(|(o, r)| o / r).collect())
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn queue_options(dir: &tempfile::TempDir) -> RocksmqOptions {
    queue_options_at(dir.path())
}

/// [`queue_options`] of a queue at `path`.
fn queue_options_at(path: &std::path::Path) -> RocksmqOptions {
    let mut options = RocksmqOptions::new(path);
    options.retention_interval = None;
    options.sync = Durability::Buffered;
    options
}

/// A raw database with the queue's options and its `messages` column family.
fn raw_db(dir: &tempfile::TempDir) -> DB {
    let families = [ColumnFamilyDescriptor::new(
        "messages",
        column_family_options(),
    )];
    DB::open_cf_descriptors(&database_options(), dir.path(), families).expect("raw open")
}

fn key(id: u64) -> [u8; 16] {
    let mut key = [0u8; 16];
    key[..8].copy_from_slice(&TOPIC_ID.to_be_bytes());
    key[8..].copy_from_slice(&id.to_be_bytes());
    key
}

fn batch_of(payload: &[u8], size: usize) -> Vec<ProducerMessage> {
    (0..size)
        .map(|_| ProducerMessage::new(payload.to_vec()))
        .collect()
}

/// glibc's malloc tunables the bench runs with: no heap trimming below 64 MiB of free top and
/// no `mmap` for blocks below 32 MiB, so that neither side pays for returning memory to the
/// kernel and faulting it back in (both thresholds otherwise adapt to what was freed before).
const ALLOCATOR_TUNABLES: &str =
    "glibc.malloc.trim_threshold=67108864:glibc.malloc.mmap_threshold=33554432";

/// Runs this bench again as a child with [`ALLOCATOR_TUNABLES`] set, unless `GLIBC_TUNABLES`
/// is already set; returns the child's exit code, or `None` to run the cases in this process.
fn rerun_with_fixed_allocator() -> Option<i32> {
    if std::env::var_os("GLIBC_TUNABLES").is_some() {
        return None;
    }
    let exe = std::env::current_exe().expect("the bench's own path");
    let status = std::process::Command::new(exe)
        .args(std::env::args_os().skip(1))
        .env("GLIBC_TUNABLES", ALLOCATOR_TUNABLES)
        .status()
        .expect("re-run the bench with fixed allocator tunables");
    Some(status.code().unwrap_or(1))
}

fn main() {
    if let Some(code) = rerun_with_fixed_allocator() {
        std::process::exit(code);
    }
    eprintln!(
        "allocator: GLIBC_TUNABLES={}",
        std::env::var("GLIBC_TUNABLES").unwrap_or_default()
    );
    let scale = scale();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let mut summary = Vec::new();
    if wanted("produce") {
        throughput::produce_cases(&runtime, &scale, &mut summary);
    }
    if wanted("consume") {
        consume::consume_cases(&runtime, &scale, &mut summary);
    }
    if wanted("latency") {
        latency::latency_cases(&runtime, &scale, &mut summary);
    }
    if wanted("tt") {
        tt::tt_cases(&runtime, &scale, &mut summary);
    }
    if wanted("durable") {
        durable::durable_cases(&runtime, &scale, &mut summary);
    }
    if wanted("seek_time") {
        seek_time::seek_time_case(&runtime, &mut summary);
    }
    if wanted("open") {
        open::open_cases(&runtime, &scale, &mut summary);
        open_big::open_big_message_case(&runtime, scale.open_big_channels, &mut summary);
    }
    for line in summary {
        println!("{line}");
    }
}
