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
