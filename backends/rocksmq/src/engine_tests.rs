//! Tests of the engine's produce path that need its internals.

use super::*;
use std::time::Duration;

use crate::Durability;

/// A synced append leads from a blocking thread. A runtime that is shutting down drops that
/// thread's task unrun; the leadership must come back, or every later producer of the
/// database would queue behind a leader that never writes and wait forever.
#[test]
fn a_synced_leader_dropped_unrun_hands_the_leadership_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut options = RocksmqOptions::new(dir.path());
    options.sync = Durability::SyncData;
    let engine = Rocksmq::open(options).expect("open");
    let topic = engine.topic_or_create("t").expect("topic");

    let dead = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let handle = dead.handle().clone();
    dead.shutdown_background();
    let unrun = {
        // Inside the shut-down runtime, `spawn_blocking` drops the leader's task unrun.
        let _inside = handle.enter();
        engine
            .start_produce(&topic, Batch::One(ProducerMessage::new("lost")))
            .expect("queued")
    };

    let live = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    live.block_on(async {
        let answer = tokio::time::timeout(Duration::from_secs(10), unrun.ids()).await;
        assert!(
            matches!(answer, Ok(Err(_))),
            "the unrun leader's caller hears an error, not ids: {answer:?}"
        );
        let next = tokio::time::timeout(
            Duration::from_secs(10),
            engine.produce("t", vec![ProducerMessage::new("kept")]),
        )
        .await
        .expect("a later producer leads instead of waiting forever");
        assert_eq!(
            next.expect("written"),
            FIRST_MESSAGE_ID..FIRST_MESSAGE_ID + 1,
            "the unrun batch took no id"
        );
    });
}

fn buffered(dir: &tempfile::TempDir) -> Rocksmq {
    let mut options = RocksmqOptions::new(dir.path());
    options.retention_interval = None;
    Rocksmq::open(options).expect("open")
}

fn on_a_current_thread_runtime(test: impl std::future::Future<Output = ()>) {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(test);
}

/// A buffered write that RocksDB would stall is not waited out on the async worker: it is
/// made on a blocking thread, which answers the producer.
#[test]
fn a_stalled_write_is_made_on_a_blocking_thread() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = buffered(&dir);
    let topic = engine.topic_or_create("t").expect("topic");
    on_a_current_thread_runtime(async {
        let unstalled = engine
            .start_produce(&topic, Batch::One(ProducerMessage::new("m")))
            .expect("started");
        assert!(
            matches!(unstalled, Produced::Written(_)),
            "without a stall, a small write is made on the caller's thread"
        );
        engine
            .inner
            .writer
            .stall_inline_writes
            .store(true, Ordering::Relaxed);
        let started = engine
            .start_produce(&topic, Batch::One(ProducerMessage::new("m")))
            .expect("started");
        assert!(
            matches!(started, Produced::Waiting(_)),
            "not written on the worker"
        );
        let ids = tokio::time::timeout(Duration::from_secs(10), started.ids())
            .await
            .expect("answered")
            .expect("written");
        assert_eq!(ids, FIRST_MESSAGE_ID + 1..FIRST_MESSAGE_ID + 2);
    });
}

/// A batch too big to copy and write in a moment is written on a blocking thread too.
#[test]
fn a_big_batch_is_written_on_a_blocking_thread() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = buffered(&dir);
    let topic = engine.topic_or_create("t").expect("topic");
    on_a_current_thread_runtime(async {
        let batch = (0..16)
            .map(|_| ProducerMessage::new(vec![7u8; 128 * 1024]))
            .collect();
        let started = engine
            .start_produce(&topic, Batch::Many(batch))
            .expect("started");
        assert!(
            matches!(started, Produced::Waiting(_)),
            "not written on the worker"
        );
        let ids = started.ids().await.expect("written");
        assert_eq!(ids, FIRST_MESSAGE_ID..FIRST_MESSAGE_ID + 16);
    });
}
