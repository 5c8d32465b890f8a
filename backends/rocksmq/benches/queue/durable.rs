//! Durable group commit: `N` producers each sending one message at a time under
//! `Durability::SyncData`, against raw RocksDB writes synced with `fdatasync` and batched
//! ideally (`N` messages per synced write, as if every producer always made the same sync).

use std::sync::Arc;
use std::time::Instant;

use msgstream::mq::{Client, ProducerMessage};
use msgstream_rocksmq::{Durability, RocksmqClient};
use rocksdb::WriteBatch;

use crate::{key, median, paired_ratio, queue_options, raw_db, Scale, RUNS};

const PAYLOAD: usize = 128;

/// Adds one `case=durable` line per producer count (medians of `RUNS` interleaved runs).
pub fn durable_cases(runtime: &tokio::runtime::Runtime, scale: &Scale, summary: &mut Vec<String>) {
    for producers in [1usize, 4, 16] {
        let per_producer = (scale.durable_msgs / producers).max(1);
        let (mut ours, mut ideal, mut per_sync) = (Vec::new(), Vec::new(), Vec::new());
        for run in 0..RUNS {
            if run % 2 == 0 {
                ideal.push(raw_synced(producers, per_producer));
            }
            let (rate, batching) = runtime.block_on(queue_synced(producers, per_producer));
            ours.push(rate);
            per_sync.push(batching);
            if run % 2 == 1 {
                ideal.push(raw_synced(producers, per_producer));
            }
        }
        let ratio = paired_ratio(&ours, &ideal);
        let (ours, ideal) = (median(ours), median(ideal));
        // Independent of how long the disk takes to sync: how full each sync was.
        println!(
            "durable producers={producers}: ours {ours:.0} msgs/s, {:.1} messages per sync (ideal {producers}); ideal {ideal:.0} msgs/s",
            median(per_sync)
        );
        summary.push(format!(
            "case=durable producers={producers} msgs_per_s={ours:.0} ideal_msgs_per_s={ideal:.0} ratio={ratio:.2}"
        ));
    }
}

/// `producers` tasks, each with its own producer of one topic, each awaiting every send.
/// Returns msgs/s and the messages each synced write carried on average.
async fn queue_synced(producers: usize, per_producer: usize) -> (f64, f64) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut options = queue_options(&dir);
    options.sync = Durability::SyncData;
    let client = Arc::new(RocksmqClient::open(options).expect("open"));
    let mut handles = Vec::new();
    for _ in 0..producers {
        handles.push(client.create_producer("bench").await.expect("producer"));
    }
    let before = client.engine().write_stats();
    let start = Instant::now();
    let tasks: Vec<_> = handles
        .into_iter()
        .map(|producer| {
            tokio::spawn(async move {
                for _ in 0..per_producer {
                    let message = ProducerMessage::new(vec![0x5a; PAYLOAD]);
                    producer.send(message).await.expect("send");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("producer task");
    }
    let rate = (producers * per_producer) as f64 / start.elapsed().as_secs_f64();
    let after = client.engine().write_stats();
    // Every batch here is one message.
    let per_sync = (after.batches - before.batches) as f64 / (after.writes - before.writes) as f64;
    client.close().await;
    (rate, per_sync)
}

/// The same messages as `per_producer` synced writes of `producers` messages each.
fn raw_synced(producers: usize, per_producer: usize) -> f64 {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = raw_db(&dir);
    let cf = db.cf_handle("messages").expect("cf");
    let mut write_options = rocksdb::WriteOptions::default();
    write_options.set_sync(true);
    let start = Instant::now();
    let mut id = 1;
    for _ in 0..per_producer {
        let mut batch = WriteBatch::default();
        for _ in 0..producers {
            batch.put_cf(cf, key(id), vec![0x5a; PAYLOAD]);
            id += 1;
        }
        db.write_opt(batch, &write_options).expect("write");
    }
    (producers * per_producer) as f64 / start.elapsed().as_secs_f64()
}
