//! On a `current_thread` runtime, work that waits for the disk (synced writes, open, close,
//! deleting a topic) must not stall the runtime: other tasks keep running while it happens.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use msgstream::mq::{Client, ProducerMessage};
use msgstream_rocksmq::{Durability, RocksmqClient, RocksmqOptions};

#[tokio::test(flavor = "current_thread")]
async fn synced_writes_leave_the_runtime_free() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut options = RocksmqOptions::new(dir.path());
    options.retention_interval = None;
    options.sync = Durability::SyncData;
    let client = RocksmqClient::connect(options).await.expect("open");
    let producer = client.create_producer("t").await.expect("producer");

    // A task that counts how often the runtime lets it run.
    let turns = Arc::new(AtomicU64::new(0));
    let counter = turns.clone();
    let ticker = tokio::spawn(async move {
        loop {
            counter.fetch_add(1, Ordering::Relaxed);
            tokio::task::yield_now().await;
        }
    });
    const SENDS: u64 = 20;
    for i in 0..SENDS {
        let before = turns.load(Ordering::Relaxed);
        producer
            .send(ProducerMessage::new(format!("m{i}").into_bytes()))
            .await
            .expect("send");
        assert!(
            turns.load(Ordering::Relaxed) > before,
            "send {i}: the runtime ran nothing else while the write was synced"
        );
    }
    let before = turns.load(Ordering::Relaxed);
    client.delete_topic("t").await.expect("delete");
    client.close().await;
    assert!(
        turns.load(Ordering::Relaxed) > before,
        "delete and close yield too"
    );
    ticker.abort();
}
