//! Produce and consume throughput, ours against raw RocksDB (see the crate-level notes in
//! `main.rs` for what each side does).

use std::time::Instant;

use msgstream::mq::{Client, ConsumerOptions, InitialPosition, Producer, ProducerMessage};
use msgstream_rocksmq::{column_family_options, database_options, RocksmqClient};
use rocksdb::{ColumnFamilyDescriptor, WriteBatch, DB};

use crate::{batch_of, chosen, key, median, paired_ratio, queue_options, raw_db, Scale, RUNS};

/// Filled queues per consume case; each is read `CONSUME_PASSES` times by each side.
const CONSUME_RUNS: usize = 3;
/// Read passes per side over each filled queue: the consume figures are the median over
/// `CONSUME_RUNS × CONSUME_PASSES` passes per side, so one invocation can be trusted.
const CONSUME_PASSES: usize = 3;

/// Rounds per produce case. Each side keeps one database for the whole case and writes one
/// chunk per round, the two chunks back to back (which goes first alternates), so that a pair
/// is measured within a fraction of a second: this machine's speed drifts by a fifth from one
/// second to the next, and runs on fresh databases a second apart gave single ratios anywhere
/// between 0.65 and 0.96 for the same two builds.
const PRODUCE_ROUNDS: usize = 30;

/// Every produce case: 128 B and 1 KiB payloads, batches of 1, 64 and 1024. Each side writes
/// as many messages as `RUNS` runs of the scale's count, in `PRODUCE_ROUNDS` chunks.
pub fn produce_cases(runtime: &tokio::runtime::Runtime, scale: &Scale, summary: &mut Vec<String>) {
    for payload in chosen("MSGSTREAM_BENCH_PAYLOADS", &[128, 1024]) {
        for batch in chosen("MSGSTREAM_BENCH_BATCHES", &[1, 64, 1024]) {
            let total = if batch == 1 {
                scale.produce_msgs_unbatched
            } else {
                scale.produce_msgs
            };
            let batches_per_chunk = (total * RUNS / PRODUCE_ROUNDS / batch).max(1);
            let payload_bytes = vec![0x5a; payload];
            let chunk = || -> Vec<_> {
                (0..batches_per_chunk)
                    .map(|_| batch_of(&payload_bytes, batch))
                    .collect()
            };
            let ours_dir = tempfile::tempdir().expect("tempdir");
            let (client, producer) = runtime.block_on(async {
                let client = RocksmqClient::open(queue_options(&ours_dir)).expect("open");
                let producer = client.create_producer("bench").await.expect("producer");
                (client, producer)
            });
            let mut raw_side = RawProducer::open();
            let (mut ours, mut raw) = (Vec::new(), Vec::new());
            for round in 0..PRODUCE_ROUNDS {
                // Built before either clock starts: the same owned messages for both sides.
                let (for_ours, for_raw) = (chunk(), chunk());
                if round % 2 == 0 {
                    raw.push(raw_side.write(for_raw));
                    ours.push(runtime.block_on(produce_ours(producer.as_ref(), for_ours)));
                } else {
                    ours.push(runtime.block_on(produce_ours(producer.as_ref(), for_ours)));
                    raw.push(raw_side.write(for_raw));
                }
            }
            runtime.block_on(client.close());
            raw_side.close();
            let ratio = paired_ratio(&ours, &raw);
            let (ours, raw) = (median(ours), median(raw));
            let mb = |rate: f64| rate * payload as f64 / 1e6;
            println!(
                "produce payload={payload} batch={batch}: ours {ours:.0} msgs/s {:.1} MB/s, raw {raw:.0} msgs/s {:.1} MB/s",
                mb(ours),
                mb(raw)
            );
            summary.push(format!(
                "case=produce payload={payload} batch={batch} ours_msgs_per_s={ours:.0} raw_msgs_per_s={raw:.0} ratio={ratio:.2}"
            ));
        }
    }
}

/// Every consume case: 128 B and 1 KiB payloads, one group reading everything.
pub fn consume_cases(runtime: &tokio::runtime::Runtime, scale: &Scale, summary: &mut Vec<String>) {
    for payload in chosen("MSGSTREAM_BENCH_PAYLOADS", &[128, 1024]) {
        let total = if payload == 128 {
            scale.consume_msgs
        } else {
            scale.consume_msgs / 4
        };
        let (mut ours, mut engine, mut raw, mut separate) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for run in 0..CONSUME_RUNS {
            let dir = tempfile::tempdir().expect("tempdir");
            let count = runtime.block_on(fill_queue(&dir, payload, total));
            settle(&dir);
            for pass in 0..CONSUME_PASSES {
                // Alternate which side reads first, so neither always meets a warmer page cache.
                let raw_first = (run + pass) % 2 == 0;
                if raw_first {
                    raw.push(consume_raw_same_files(&dir, payload, count));
                }
                let (through_traits, through_engine) =
                    runtime.block_on(consume_ours(&dir, payload, count, pass));
                ours.push(through_traits);
                engine.push(through_engine);
                if !raw_first {
                    raw.push(consume_raw_same_files(&dir, payload, count));
                }
            }
            separate.push(consume_raw(payload, total));
        }
        let (ratio, engine_ratio) = (paired_ratio(&ours, &raw), paired_ratio(&engine, &raw));
        let (ours, engine, raw, separate) =
            (median(ours), median(engine), median(raw), median(separate));
        println!(
            "consume payload={payload}: ours {ours:.0} msgs/s (engine batches {engine:.0} msgs/s, ratio {engine_ratio:.2}), raw iterator over the same files {raw:.0} msgs/s (over a separately written database: {separate:.0} msgs/s)"
        );
        summary.push(format!(
            "case=consume payload={payload} ours_msgs_per_s={ours:.0} raw_msgs_per_s={raw:.0} ratio={ratio:.2}"
        ));
    }
}

/// Sends `batches` through `producer`; returns messages per second.
async fn produce_ours(producer: &dyn Producer, batches: Vec<Vec<ProducerMessage>>) -> f64 {
    let count: usize = batches.iter().map(Vec::len).sum();
    let start = Instant::now();
    for mut messages in batches {
        // One message at a time goes through `send`, the call an application sending single
        // messages makes (no vector of one id back); batches through `send_batch`.
        match messages.pop() {
            Some(message) if messages.is_empty() => {
                producer.send(message).await.expect("send");
            }
            Some(message) => {
                messages.push(message);
                producer.send_batch(messages).await.expect("send");
            }
            None => {}
        }
    }
    count as f64 / start.elapsed().as_secs_f64()
}

/// The physical reference of a produce case: raw `WriteBatch` puts of the same keys and
/// payloads into the same column family with the same options, one write per batch.
struct RawProducer {
    db: DB,
    next_id: u64,
    _dir: tempfile::TempDir,
}

impl RawProducer {
    fn open() -> RawProducer {
        let dir = tempfile::tempdir().expect("tempdir");
        RawProducer {
            db: raw_db(&dir),
            next_id: 1,
            _dir: dir,
        }
    }

    /// Writes `batches`; returns messages per second.
    fn write(&mut self, batches: Vec<Vec<ProducerMessage>>) -> f64 {
        let cf = self.db.cf_handle("messages").expect("cf");
        let write_options = rocksdb::WriteOptions::default();
        let count: usize = batches.iter().map(Vec::len).sum();
        let start = Instant::now();
        for messages in batches {
            let mut write = WriteBatch::default();
            for message in &messages {
                write.put_cf(cf, key(self.next_id), &message.payload);
                self.next_id += 1;
            }
            self.db.write_opt(write, &write_options).expect("write");
        }
        count as f64 / start.elapsed().as_secs_f64()
    }

    /// Syncs the WAL, as the queue's close does: without it the directory is deleted with
    /// gigabytes of unsynced pages, and the kernel's clean-up slows whatever comes next.
    fn close(self) {
        self.db.flush_wal(true).expect("sync the WAL");
    }
}

/// Produces `total` messages of `payload_size` bytes through the queue into `dir`, then closes
/// it, so that the queue and raw RocksDB afterwards read the very same files. Returns the count.
async fn fill_queue(dir: &tempfile::TempDir, payload_size: usize, total: usize) -> usize {
    let client = RocksmqClient::open(queue_options(dir)).expect("open");
    let producer = client.create_producer("bench").await.expect("producer");
    let payload = vec![0x5a; payload_size];
    for _ in 0..total / 1024 {
        producer
            .send_batch(batch_of(&payload, 1024))
            .await
            .expect("send");
    }
    client.close().await;
    total / 1024 * 1024
}

/// Reopens the filled queue and reads everything with one consumer group through the mq traits,
/// then, reopened again, through the engine's batch API (to tell the engine's cost from the
/// traits'). Each pass reads with groups of its own. Every pass starts from a freshly opened database, as the raw reference does.
async fn consume_ours(
    dir: &tempfile::TempDir,
    payload_size: usize,
    count: usize,
    pass: usize,
) -> (f64, f64) {
    let client = RocksmqClient::open(queue_options(dir)).expect("open");
    let mut consumer = client
        .subscribe(ConsumerOptions::new("bench", format!("all-{pass}")))
        .await
        .expect("subscribe");
    let start = Instant::now();
    let mut bytes = 0;
    let mut received = 0;
    while received < count {
        let batch = consumer.recv_batch(1024).await.expect("recv");
        bytes += batch.iter().map(|m| m.payload.len()).sum::<usize>();
        received += batch.len();
        consumer
            .ack(batch.last().expect("a non-empty batch"))
            .await
            .expect("ack");
    }
    let rate = count as f64 / start.elapsed().as_secs_f64();
    assert_eq!(bytes, count * payload_size);
    // Reopened, so that the engine pass starts with a cold block cache too.
    client.close().await;
    let client = RocksmqClient::open(queue_options(dir)).expect("reopen");
    let engine = client.engine();
    engine
        .create_consumer_group(
            "bench",
            &format!("engine-{pass}"),
            InitialPosition::Earliest,
        )
        .expect("group");
    let mut subscription = engine
        .subscribe("bench", &format!("engine-{pass}"))
        .expect("subscribe");
    let start = Instant::now();
    let mut read = 0;
    while read < count {
        read += subscription.consume(1024).expect("consume").len();
    }
    let engine_rate = count as f64 / start.elapsed().as_secs_f64();
    client.close().await;
    (rate, engine_rate)
}

/// Raw RocksDB, with the queue's options, over the filled queue's own files.
pub fn open_raw_same_files(dir: &tempfile::TempDir) -> DB {
    let options = database_options();
    let families = DB::list_cf(&options, dir.path()).expect("list column families");
    let descriptors = families
        .iter()
        .map(|name| ColumnFamilyDescriptor::new(name, column_family_options()));
    DB::open_cf_descriptors(&options, dir.path(), descriptors).expect("raw open")
}

/// Brings the filled queue's files to a settled state before either side reads them: the WAL
/// replayed and flushed, the messages compacted into the bottom level. Otherwise whichever side
/// opens the files first replays the WAL into a memtable (faster to iterate than tables) and
/// leaves fresh level-0 files whose compaction then runs during the other side's read.
pub fn settle(dir: &tempfile::TempDir) {
    let db = open_raw_same_files(dir);
    for name in DB::list_cf(&database_options(), dir.path()).expect("list column families") {
        let cf = db.cf_handle(&name).expect("cf");
        db.flush_cf(cf).expect("flush");
        db.compact_range_cf(cf, None::<&[u8]>, None::<&[u8]>);
    }
}

/// The physical reference: raw RocksDB, with the queue's options, opening the filled queue's
/// own (settled) files and iterating its messages column family, copying each value out.
fn consume_raw_same_files(dir: &tempfile::TempDir, payload_size: usize, count: usize) -> f64 {
    let db = open_raw_same_files(dir);
    let cf = db.cf_handle("messages").expect("cf");
    let mut iter = db.raw_iterator_cf(cf);
    iter.seek_to_first();
    let start = Instant::now();
    let (mut read, mut bytes) = (0usize, 0usize);
    while let (Some(_), Some(value)) = (iter.key(), iter.value()) {
        let copy = bytes::Bytes::copy_from_slice(value);
        bytes += copy.len();
        read += 1;
        iter.next();
    }
    let rate = read as f64 / start.elapsed().as_secs_f64();
    assert_eq!((read, bytes), (count, count * payload_size));
    rate
}

/// The same reference on a separate database written directly with raw `WriteBatch`es (one
/// column family): shown for comparison, since its files are laid out differently.
fn consume_raw(payload_size: usize, total: usize) -> f64 {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = raw_db(&dir);
    let cf = db.cf_handle("messages").expect("cf");
    let payload = vec![0x5a; payload_size];
    let mut id = 1;
    for _ in 0..total / 1024 {
        let mut write = WriteBatch::default();
        for _ in 0..1024 {
            write.put_cf(cf, key(id), &payload);
            id += 1;
        }
        db.write(write).expect("write");
    }
    let start = Instant::now();
    let mut options = rocksdb::ReadOptions::default();
    options.set_iterate_upper_bound(key(u64::MAX).to_vec());
    let mut iter = db.raw_iterator_cf_opt(cf, options);
    iter.seek(key(0));
    let (mut count, mut bytes) = (0usize, 0usize);
    while let (Some(_), Some(value)) = (iter.key(), iter.value()) {
        let copy = bytes::Bytes::copy_from_slice(value);
        bytes += copy.len();
        count += 1;
        iter.next();
    }
    let rate = count as f64 / start.elapsed().as_secs_f64();
    assert_eq!(bytes, count * payload_size);
    db.flush_wal(true).expect("sync the WAL");
    rate
}
