//! On a `current_thread` runtime, work that waits for the disk (synced writes, open, close,
//! deleting a topic) must not stall the runtime: other tasks keep running while it happens.
//!
//! Evidence is a ticker task: an operation that does its disk wait on the runtime's thread
//! completes within its first poll, so the ticker never runs during it; one that hands the wait
//! to another thread is pending meanwhile, so the ticker runs. Not always, though: if the OS
//! deschedules the runtime's thread right after the hand-off, the other thread may finish
//! first and the operation completes at its first poll without having blocked anything (seen
//! once in CI on two busy cores). So the checks count, and fail only when most operations let
//! nothing else run, which is what a blocking implementation does every time. For synced
//! sends the bar is a quarter of 40: with two processes spinning on the two cores beside it,
//! one run in thirty saw only 8 of 20 sends let the ticker run (a blocking send lets it run
//! in none).

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use msgstream::mq::{Client, ProducerMessage};
use msgstream_rocksmq::{Durability, RocksmqClient, RocksmqOptions};

/// Awaits `op`; also says whether the ticker counting `turns` ran meanwhile.
async fn ran_others<T>(turns: &AtomicU64, op: impl Future<Output = T>) -> (T, bool) {
    let before = turns.load(Ordering::Relaxed);
    let out = op.await;
    (out, turns.load(Ordering::Relaxed) > before)
}

#[tokio::test(flavor = "current_thread")]
async fn synced_writes_leave_the_runtime_free() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut options = RocksmqOptions::new(dir.path());
    options.retention_interval = None;
    options.sync = Durability::SyncData;
    let client = RocksmqClient::connect(options).await.expect("open");

    // A task that counts how often the runtime lets it run.
    let turns = Arc::new(AtomicU64::new(0));
    let counter = turns.clone();
    let ticker = tokio::spawn(async move {
        loop {
            counter.fetch_add(1, Ordering::Relaxed);
            tokio::task::yield_now().await;
        }
    });

    const SENDS: usize = 40;
    let producer = client.create_producer("t").await.expect("producer");
    let mut free_sends = 0;
    for i in 0..SENDS {
        let message = ProducerMessage::new(format!("m{i}").into_bytes());
        let (sent, ran) = ran_others(&turns, producer.send(message)).await;
        sent.expect("send");
        free_sends += usize::from(ran);
    }
    assert!(
        free_sends * 4 >= SENDS,
        "only {free_sends} of {SENDS} synced sends let the runtime run anything else"
    );

    const TOPICS: usize = 4;
    for t in 0..TOPICS {
        let producer = client
            .create_producer(&format!("d{t}"))
            .await
            .expect("producer");
        producer
            .send(ProducerMessage::new(&b"x"[..]))
            .await
            .expect("send");
    }
    let mut free_deletes = 0;
    for t in ["t".to_string()]
        .into_iter()
        .chain((0..TOPICS).map(|t| format!("d{t}")))
    {
        let (deleted, ran) = ran_others(&turns, client.delete_topic(&t)).await;
        deleted.expect("delete");
        free_deletes += usize::from(ran);
    }
    let ((), closed_freely) = ran_others(&turns, client.close()).await;
    assert!(
        (free_deletes + usize::from(closed_freely)) * 2 >= TOPICS + 2,
        "only {free_deletes} of {} topic deletions and {} of 1 close let the runtime run anything else",
        TOPICS + 1,
        usize::from(closed_freely)
    );
    ticker.abort();
}
