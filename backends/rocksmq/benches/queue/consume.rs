//! Consume throughput, ours against raw RocksDB iterating the very same files.
//!
//! Each filled queue is settled, then copied, so that ours, the engine's batch API and raw
//! RocksDB each read identical files of their own, all open at once. Raw RocksDB reads twice
//! over: with default read options (the reference of `case=consume`), and with the read options
//! the queue gives its backlog reads, readahead and no block-cache fill
//! (`case=consume_same_readahead`), which tells what the queue's own code costs from what its
//! tuning wins. Each side then reads its copy in
//! `CONSUME_ROUNDS` chunks, the chunks of a round back to back (ours always between the two raw
//! readers, which one first alternating): a pair is measured within a few hundredths of a second,
//! while this machine's speed drifts by a fifth from one second to the next (whole passes
//! seconds apart made one invocation's median untrustworthy).

use std::path::Path;
use std::time::Instant;

use msgstream::mq::{Client, Consumer, ConsumerOptions, InitialPosition};
use msgstream_rocksmq::{
    backlog_scan_options, column_family_options, database_options, RocksmqClient, Subscription,
};
use rocksdb::{ColumnFamilyDescriptor, DBRawIterator, DB};

use crate::{batch_of, chosen, median, paired_ratio, queue_options, Scale};

/// Filled queues per consume case; each side reads each of them once, in rounds.
const CONSUME_RUNS: usize = 3;
/// Chunks per filled queue and side: the case's ratio is the median of the
/// `CONSUME_RUNS × CONSUME_ROUNDS` paired ratios.
const CONSUME_ROUNDS: usize = 30;
/// Messages per `recv_batch`, per engine batch, and the unit of a chunk: the consumer's default
/// buffer, so that every receive is one read.
const READ_BATCH: usize = 1024;

/// Every consume case: 128 B and 1 KiB payloads, one group reading everything.
pub fn consume_cases(runtime: &tokio::runtime::Runtime, scale: &Scale, summary: &mut Vec<String>) {
    for payload in chosen("MSGSTREAM_BENCH_PAYLOADS", &[128, 1024]) {
        let total = if payload == 128 {
            scale.consume_msgs
        } else {
            scale.consume_msgs / 4
        };
        let (mut ours, mut engine, mut raw, mut raw_ahead) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for _ in 0..CONSUME_RUNS {
            let rates = runtime.block_on(consume_run(payload, total));
            ours.extend(rates.ours);
            engine.extend(rates.engine);
            raw.extend(rates.raw);
            raw_ahead.extend(rates.raw_ahead);
        }
        let (ratio, engine_ratio) = (paired_ratio(&ours, &raw), paired_ratio(&engine, &raw));
        let ahead_ratio = paired_ratio(&ours, &raw_ahead);
        let (ours, engine, raw, raw_ahead) =
            (median(ours), median(engine), median(raw), median(raw_ahead));
        println!(
            "consume payload={payload}: ours {ours:.0} msgs/s (engine batches {engine:.0} msgs/s, ratio {engine_ratio:.2}), raw iterator over the same files {raw:.0} msgs/s, with the queue's readahead {raw_ahead:.0} msgs/s"
        );
        summary.push(format!(
            "case=consume payload={payload} ours_msgs_per_s={ours:.0} raw_msgs_per_s={raw:.0} ratio={ratio:.2}"
        ));
        summary.push(format!(
            "case=consume_same_readahead payload={payload} ours_msgs_per_s={ours:.0} raw_msgs_per_s={raw_ahead:.0} ratio={ahead_ratio:.2}"
        ));
    }
}

/// Each side's rate per round of one filled queue.
struct Rates {
    ours: Vec<f64>,
    engine: Vec<f64>,
    raw: Vec<f64>,
    /// Raw RocksDB reading ahead as the queue's backlog reads do.
    raw_ahead: Vec<f64>,
}

/// Fills a queue with `total` messages of `payload` bytes, settles and copies it, and reads the
/// four copies in rounds.
async fn consume_run(payload: usize, total: usize) -> Rates {
    let dirs = [(); 4].map(|()| tempfile::tempdir().expect("tempdir"));
    let [ours_dir, engine_dir, raw_dir, ahead_dir] = &dirs;
    let count = fill_queue(ours_dir, payload, total).await;
    settle(ours_dir.path());
    for copy in [engine_dir, raw_dir, ahead_dir] {
        copy_dir(ours_dir.path(), copy.path());
    }
    let per_round = count / READ_BATCH / CONSUME_ROUNDS * READ_BATCH;

    let ours_client = RocksmqClient::open(queue_options(ours_dir)).expect("open");
    let mut consumer = ours_client
        .subscribe(ConsumerOptions::new("bench", "all"))
        .await
        .expect("subscribe");
    let engine_client = RocksmqClient::open(queue_options(engine_dir)).expect("open");
    let engine = engine_client.engine();
    engine
        .create_consumer_group("bench", "engine", InitialPosition::Earliest)
        .expect("group");
    let mut subscription = engine.subscribe("bench", "engine").expect("subscribe");
    let raw_db = open_raw_same_files(raw_dir.path());
    // Opened before either iterator: a round takes both as one type, borrowing both databases alike.
    let ahead_db = open_raw_same_files(ahead_dir.path());
    let mut raw_iter = raw_db.raw_iterator_cf(raw_db.cf_handle("messages").expect("cf"));
    raw_iter.seek_to_first();
    let mut ahead_iter = ahead_db.raw_iterator_cf_opt(
        ahead_db.cf_handle("messages").expect("cf"),
        backlog_scan_options(),
    );
    ahead_iter.seek_to_first();

    let mut rates = Rates {
        ours: Vec::new(),
        engine: Vec::new(),
        raw: Vec::new(),
        raw_ahead: Vec::new(),
    };
    for round in 0..CONSUME_ROUNDS {
        // Even rounds: engine, raw, ours, raw with readahead; odd rounds the other way round.
        let even = round % 2 == 0;
        let (first, second) = if even {
            (&mut raw_iter, &mut ahead_iter)
        } else {
            (&mut ahead_iter, &mut raw_iter)
        };
        if even {
            rates
                .engine
                .push(read_engine(&mut subscription, payload, per_round));
        }
        let before = read_raw(first, payload, per_round);
        rates
            .ours
            .push(read_ours(consumer.as_mut(), payload, per_round).await);
        let after = read_raw(second, payload, per_round);
        if !even {
            rates
                .engine
                .push(read_engine(&mut subscription, payload, per_round));
        }
        let (raw, ahead) = if even {
            (before, after)
        } else {
            (after, before)
        };
        rates.raw.push(raw);
        rates.raw_ahead.push(ahead);
    }
    consumer.close().await;
    ours_client.close().await;
    engine_client.close().await;
    rates
}

/// Reads `n` messages through the mq traits, acking each batch's last message as the stream
/// pumps do; returns messages per second.
async fn read_ours(consumer: &mut dyn Consumer, payload: usize, n: usize) -> f64 {
    let start = Instant::now();
    let (mut received, mut bytes) = (0, 0);
    while received < n {
        let batch = consumer.recv_batch(READ_BATCH).await.expect("recv");
        bytes += batch.iter().map(|m| m.payload.len()).sum::<usize>();
        received += batch.len();
        consumer
            .ack(batch.last().expect("a non-empty batch"))
            .await
            .expect("ack");
    }
    let rate = n as f64 / start.elapsed().as_secs_f64();
    assert_eq!((received, bytes), (n, n * payload));
    rate
}

/// Reads `n` messages through the engine's batch API (no traits, no acks): tells the engine's
/// cost from the adapter's. Returns messages per second.
fn read_engine(subscription: &mut Subscription, payload: usize, n: usize) -> f64 {
    let start = Instant::now();
    let (mut read, mut bytes) = (0, 0);
    while read < n {
        let batch = subscription.consume(READ_BATCH).expect("consume");
        bytes += batch.iter().map(|m| m.payload.len()).sum::<usize>();
        read += batch.len();
    }
    let rate = n as f64 / start.elapsed().as_secs_f64();
    assert_eq!((read, bytes), (n, n * payload));
    rate
}

/// The physical reference: the next `n` values of the messages column family, each copied into
/// an owned `Bytes` (the least a reader must do to hand a message on). Messages per second.
fn read_raw(iter: &mut DBRawIterator<'_>, payload: usize, n: usize) -> f64 {
    let start = Instant::now();
    let (mut read, mut bytes) = (0, 0);
    while read < n {
        let value = iter.value().expect("a stored message");
        let copy = bytes::Bytes::copy_from_slice(value);
        bytes += copy.len();
        read += 1;
        iter.next();
    }
    let rate = n as f64 / start.elapsed().as_secs_f64();
    assert_eq!(bytes, n * payload);
    rate
}

/// Produces `total` messages of `payload_size` bytes (in batches of 1024) through the queue into
/// `dir`, then closes it. Returns the count.
async fn fill_queue(dir: &tempfile::TempDir, payload_size: usize, total: usize) -> usize {
    let client = RocksmqClient::open(queue_options(dir)).expect("open");
    let producer = client.create_producer("bench").await.expect("producer");
    let payload = vec![0x5a; payload_size];
    for _ in 0..total / READ_BATCH {
        producer
            .send_batch(batch_of(&payload, READ_BATCH))
            .await
            .expect("send");
    }
    client.close().await;
    total / READ_BATCH * READ_BATCH
}

/// Copies the (flat) database directory `from` into `to`.
fn copy_dir(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).expect("read the queue's directory") {
        let entry = entry.expect("a directory entry");
        std::fs::copy(entry.path(), to.join(entry.file_name())).expect("copy a database file");
    }
}

/// Raw RocksDB, with the queue's options, over a filled queue's own files.
pub fn open_raw_same_files(path: &Path) -> DB {
    let options = database_options();
    let families = DB::list_cf(&options, path).expect("list column families");
    let descriptors = families
        .iter()
        .map(|name| ColumnFamilyDescriptor::new(name, column_family_options()));
    DB::open_cf_descriptors(&options, path, descriptors).expect("raw open")
}

/// Brings the filled queue's files to a settled state before any side reads them: the WAL
/// replayed and flushed, the messages compacted into the bottom level. Otherwise a side reads a
/// memtable (faster to iterate than tables) or meets a compaction running during its read.
pub fn settle(path: &Path) {
    let db = open_raw_same_files(path);
    for name in DB::list_cf(&database_options(), path).expect("list column families") {
        let cf = db.cf_handle(&name).expect("cf");
        db.flush_cf(cf).expect("flush");
        db.compact_range_cf(cf, None::<&[u8]>, None::<&[u8]>);
    }
}
