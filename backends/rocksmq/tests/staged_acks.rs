//! Staged acks against a real RocksDB: checked when staged, written together by a flush, never
//! moving a group back past a seek or a direct ack, dropped with their group, written at close.

use std::sync::Arc;

use msgstream::mq::{Client, ConsumerOptions, InitialPosition, ProducerMessage};
use msgstream::Error;
use msgstream_rocksmq::{Rocksmq, RocksmqClient, RocksmqOptions};

fn options(dir: &tempfile::TempDir) -> RocksmqOptions {
    let mut options = RocksmqOptions::new(dir.path());
    options.retention_interval = None;
    options
}

/// A queue with `topics` topics of ten messages (ids 1..=10), each with group `g`.
async fn queue_with(dir: &tempfile::TempDir, topics: &[&str]) -> Rocksmq {
    let mq = Rocksmq::open(options(dir)).expect("open");
    for topic in topics {
        create(&mq, topic).await;
    }
    mq
}

/// Creates `topic` on `mq` with ten messages and group `g` at the earliest.
async fn create(mq: &Rocksmq, topic: &str) {
    mq.create_topic(topic).expect("topic");
    let batch = (0..10)
        .map(|i| ProducerMessage::new(format!("{i}")))
        .collect();
    mq.produce(topic, batch).await.expect("produce");
    mq.create_consumer_group(topic, "g", InitialPosition::Earliest)
        .expect("group");
}

#[tokio::test]
async fn one_flush_writes_the_acks_of_every_group_and_they_survive_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mq = queue_with(&dir, &["a", "b", "c"]).await;
    mq.stage_ack("a", "g", 4).expect("stage");
    mq.stage_ack("b", "g", 7).expect("stage");
    mq.stage_ack("b", "g", 5)
        .expect("an older ack of the same group");
    mq.stage_ack("c", "g", 10).expect("stage");
    for topic in ["a", "b", "c"] {
        assert_eq!(
            mq.committed_position(topic, "g").expect("position"),
            0,
            "nothing is written before the flush"
        );
    }
    mq.flush_acks().expect("flush");
    let positions =
        |mq: &Rocksmq| ["a", "b", "c"].map(|t| mq.committed_position(t, "g").expect("position"));
    assert_eq!(
        positions(&mq),
        [5, 8, 11],
        "the highest ack of each group, plus one"
    );
    mq.flush_acks().expect("a flush with nothing staged");
    // Reopened without `close`: the flush alone made them durable.
    drop(mq);
    let mq = Rocksmq::open(options(&dir)).expect("reopen");
    assert_eq!(positions(&mq), [5, 8, 11]);
}

#[tokio::test]
async fn staging_checks_what_an_ack_checks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mq = queue_with(&dir, &["a"]).await;
    for (topic, group, id) in [
        ("a", "g", 0),
        ("a", "g", 11),
        ("a", "", 3),
        ("nope", "g", 3),
    ] {
        assert!(
            matches!(
                mq.stage_ack(topic, group, id),
                Err(Error::InvalidArgument(_))
            ),
            "{topic:?} {group:?} {id}"
        );
    }
    mq.flush_acks().expect("nothing was staged");
    assert_eq!(mq.committed_position("a", "g").expect("position"), 0);
}

#[tokio::test]
async fn a_flush_never_moves_a_group_back_past_a_seek_or_a_direct_ack() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mq = queue_with(&dir, &["a"]).await;
    mq.stage_ack("a", "g", 5).expect("stage");
    mq.flush_acks().expect("flush");
    assert_eq!(mq.committed_position("a", "g").expect("position"), 6);

    // A direct ack after a flush: the next flush starts from the record, not from what it
    // wrote last time (6), so it does not undo the ack.
    mq.ack("a", "g", 9).expect("direct ack");
    mq.stage_ack("a", "g", 7).expect("stage an older one");
    mq.flush_acks().expect("flush");
    assert_eq!(mq.committed_position("a", "g").expect("position"), 10);

    // A seek discards what was staged before it.
    mq.stage_ack("a", "g", 8).expect("stage");
    mq.seek("a", "g", 3).expect("seek back");
    mq.flush_acks().expect("flush");
    assert_eq!(mq.committed_position("a", "g").expect("position"), 3);

    // A seek after a flush, then a staged ack below where the flush left the group.
    mq.stage_ack("a", "g", 5).expect("stage");
    mq.flush_acks().expect("flush");
    assert_eq!(mq.committed_position("a", "g").expect("position"), 6);
    mq.seek("a", "g", 2).expect("seek back again");
    mq.stage_ack("a", "g", 4).expect("stage");
    mq.flush_acks().expect("flush");
    assert_eq!(mq.committed_position("a", "g").expect("position"), 5);

    // A group deleted and created again after a flush starts from its new record.
    mq.stage_ack("a", "g", 9).expect("stage");
    mq.flush_acks().expect("flush");
    mq.destroy_consumer_group("a", "g").expect("destroy");
    mq.create_consumer_group("a", "g", InitialPosition::Latest)
        .expect("create again");
    mq.stage_ack("a", "g", 2).expect("stage");
    mq.flush_acks().expect("flush");
    assert_eq!(mq.committed_position("a", "g").expect("position"), 11);
}

#[tokio::test]
async fn acks_of_a_missing_group_are_an_error_and_the_others_are_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mq = queue_with(&dir, &["a", "b"]).await;
    mq.stage_ack("a", "ghost", 3)
        .expect("staging does not read the record");
    mq.stage_ack("b", "g", 6).expect("stage");
    let flushed = mq.flush_acks();
    assert!(
        matches!(&flushed, Err(Error::InvalidArgument(m)) if m.contains("ghost")),
        "{flushed:?}"
    );
    assert_eq!(mq.committed_position("b", "g").expect("position"), 7);
    assert!(!mq.consumer_group_exists("a", "ghost").expect("exists"));
    mq.flush_acks()
        .expect("the missing group's acks were dropped with the error");

    // Deleting a group, or its topic, drops what it staged: no error, nothing recreated.
    mq.stage_ack("a", "g", 2).expect("stage");
    mq.stage_ack("b", "g", 9).expect("stage");
    mq.destroy_consumer_group("a", "g").expect("destroy group");
    mq.destroy_topic("b").expect("destroy topic");
    mq.flush_acks().expect("flush");
    assert!(!mq.consumer_group_exists("a", "g").expect("exists"));
}

#[tokio::test]
async fn close_writes_what_is_staged() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mq = queue_with(&dir, &["a"]).await;
    mq.stage_ack("a", "g", 4).expect("stage");
    mq.close();
    let mq = Rocksmq::open(options(&dir)).expect("reopen");
    assert_eq!(mq.committed_position("a", "g").expect("position"), 5);
}

#[tokio::test]
async fn an_acker_stages_under_the_consumers_rules_and_flushes_for_the_whole_queue() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mq = queue_with(&dir, &["a", "b"]).await;
    let client = Arc::new(RocksmqClient::from(mq.clone()));
    let mut a = client
        .subscribe(ConsumerOptions::new("a", "g"))
        .await
        .expect("consumer a");
    let mut b = client
        .subscribe(ConsumerOptions::new("b", "g"))
        .await
        .expect("consumer b");
    let (a_acker, b_acker) = (a.acker(), b.acker());
    let from_a = a.recv_batch(3).await.expect("recv a");
    let from_b = b.recv_batch(2).await.expect("recv b");
    a_acker.stage(&from_a[2]).await.expect("stage a");
    b_acker.stage(&from_b[1]).await.expect("stage b");
    assert!(
        matches!(
            a_acker.stage(&from_b[0]).await,
            Err(Error::InvalidArgument(_))
        ),
        "a message of another topic"
    );
    a_acker.flush().await.expect("one flush, both groups");
    assert_eq!(mq.committed_position("a", "g").expect("a"), 4);
    assert_eq!(mq.committed_position("b", "g").expect("b"), 3);
    b_acker.flush().await.expect("nothing left");

    a.seek(&from_a[0].id, true).await.expect("seek");
    assert!(matches!(
        a_acker.stage(&from_a[2]).await,
        Err(Error::StaleDelivery(_))
    ));
    b.close().await;
    assert!(matches!(
        b_acker.stage(&from_b[1]).await,
        Err(Error::Closed(_))
    ));
}

#[tokio::test]
async fn a_direct_ack_writes_its_own_group_and_leaves_the_others_staged() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mq = queue_with(&dir, &["a", "b"]).await;
    mq.stage_ack("a", "g", 3).expect("stage");
    mq.stage_ack("b", "g", 4).expect("stage");
    mq.stage_ack("a", "ghost", 2).expect("stage");
    mq.ack("a", "g", 2).expect("direct ack");
    assert_eq!(
        mq.committed_position("a", "g").expect("a"),
        4,
        "the group's staged ack went with it"
    );
    assert_eq!(
        mq.committed_position("b", "g").expect("b"),
        0,
        "still staged"
    );
    let unknown = mq.ack("a", "nope", 1);
    assert!(
        matches!(&unknown, Err(Error::InvalidArgument(m)) if m.contains("nope")),
        "{unknown:?}"
    );
    let flushed = mq.flush_acks();
    assert!(
        matches!(&flushed, Err(Error::InvalidArgument(m)) if m.contains("ghost")),
        "{flushed:?}"
    );
    assert_eq!(mq.committed_position("b", "g").expect("b"), 5);
}

/// A stream flushes once per channel after staging a pack's acks: the first flush writes them
/// all and the others find nothing. However many flushes found nothing, the next ack staged is
/// written by the next flush, on any topic.
#[tokio::test]
async fn flushes_that_find_nothing_do_not_keep_the_next_ack_from_being_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mq = queue_with(&dir, &["a", "b"]).await;
    mq.stage_ack("a", "g", 3).expect("stage");
    for _ in 0..3 {
        mq.flush_acks().expect("flush");
    }
    assert_eq!(mq.committed_position("a", "g").expect("position"), 4);
    mq.stage_ack("b", "g", 6).expect("stage");
    mq.flush_acks().expect("flush");
    assert_eq!(
        mq.committed_position("b", "g").expect("position"),
        7,
        "written by the flush after it"
    );
    mq.stage_ack("a", "g", 9).expect("stage");
    mq.ack("b", "g", 8)
        .expect("a direct ack writes only its own group");
    assert_eq!(mq.committed_position("a", "g").expect("position"), 4);
    mq.flush_acks().expect("flush");
    assert_eq!(
        mq.committed_position("a", "g").expect("position"),
        10,
        "still staged after the direct ack, written by the next flush"
    );
}

/// A consumer acks (staged or direct) on the topic it subscribed to: once that topic is
/// destroyed its acks are refused, even when a new topic of the same name exists (its ids are other
/// messages), and nothing is staged for the new topic's group.
#[tokio::test]
async fn an_acker_refuses_acks_once_its_topic_is_destroyed_even_if_the_name_is_reused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mq = queue_with(&dir, &["a"]).await;
    let client = Arc::new(RocksmqClient::from(mq.clone()));
    let mut a = client
        .subscribe(ConsumerOptions::new("a", "g"))
        .await
        .expect("consumer a");
    let acker = a.acker();
    let received = a.recv_batch(3).await.expect("recv a");
    mq.destroy_topic("a").expect("destroy");
    create(&mq, "a").await;
    assert!(
        matches!(
            acker.stage(&received[2]).await,
            Err(Error::InvalidArgument(_))
        ),
        "a staged ack of a message of the destroyed topic"
    );
    assert!(
        matches!(
            acker.ack(&received[2]).await,
            Err(Error::InvalidArgument(_))
        ),
        "a direct ack of it"
    );
    mq.flush_acks().expect("flush");
    assert_eq!(
        mq.committed_position("a", "g").expect("position"),
        0,
        "the new topic's group did not move"
    );
}
