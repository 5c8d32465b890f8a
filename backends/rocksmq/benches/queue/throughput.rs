//! Produce throughput, ours against raw RocksDB (see the crate-level notes in `main.rs` for
//! what each side does).

use std::time::Instant;

use msgstream::mq::{Client, Producer, ProducerMessage};
use msgstream_rocksmq::RocksmqClient;
use rocksdb::{WriteBatch, DB};

use crate::{batch_of, chosen, key, median, paired_ratio, queue_options, raw_db, Scale, RUNS};

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
            produce_case(runtime, scale, payload, batch, false, summary);
            if payload == 128 && batch == 1 {
                produce_case(runtime, scale, payload, batch, true, summary);
            }
        }
    }
}

/// One produce line. `stamped`: every message carries a timestamp, each above the one before
/// (as a stream's messages do), so that every append raises the time index mark of its block
/// and writes it (`case=produce_stamped`); the raw side writes the same payloads as always.
fn produce_case(
    runtime: &tokio::runtime::Runtime,
    scale: &Scale,
    payload: usize,
    batch: usize,
    stamped: bool,
    summary: &mut Vec<String>,
) {
    let total = if batch == 1 {
        scale.produce_msgs_unbatched
    } else {
        scale.produce_msgs
    };
    let batches_per_chunk = (total * RUNS / PRODUCE_ROUNDS / batch).max(1);
    let payload_bytes = vec![0x5a; payload];
    let mut stamp = 0u64;
    let mut chunk = || -> Vec<Vec<ProducerMessage>> {
        (0..batches_per_chunk)
            .map(|_| {
                let mut messages = batch_of(&payload_bytes, batch);
                if stamped {
                    for message in &mut messages {
                        stamp += 1;
                        message.timestamp = Some(stamp);
                    }
                }
                messages
            })
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
    let case = if stamped {
        "produce_stamped"
    } else {
        "produce"
    };
    println!(
        "{case} payload={payload} batch={batch}: ours {ours:.0} msgs/s {:.1} MB/s, raw {raw:.0} msgs/s {:.1} MB/s",
        mb(ours),
        mb(raw)
    );
    summary.push(format!(
        "case={case} payload={payload} batch={batch} ours_msgs_per_s={ours:.0} raw_msgs_per_s={raw:.0} ratio={ratio:.2}"
    ));
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
