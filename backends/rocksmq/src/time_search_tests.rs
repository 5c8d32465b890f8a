//! The time index against a real RocksDB: exact answers after a binary search and at most one
//! block, across reopen, retention, messages without a timestamp, damaged marks and topics
//! written before the index existed.

use std::time::Duration;

use msgstream::mq::{InitialPosition, ProducerMessage};
use msgstream::msg::TsMsg;

use crate::keys::{time_from_key, time_mark_key, CF_META};
use crate::time_index::BLOCK;
use crate::topics::FIRST_MESSAGE_ID;
use crate::{Rocksmq, RocksmqOptions};

/// The timestamp of message `i` (0-based): groups of ten between "ticks" 100 apart, written
/// out of order inside each group.
fn ts(i: u64) -> u64 {
    (i / 10) * 100 + ((i * 7) % 10) * 10 + 1
}

fn message(i: u64, timestamp: Option<u64>) -> ProducerMessage {
    ProducerMessage {
        timestamp,
        ..ProducerMessage::new(TsMsg::time_tick(ts(i)).encode())
    }
}

fn open(dir: &tempfile::TempDir, page_size_bytes: u64) -> Rocksmq {
    let mut options = RocksmqOptions::new(dir.path());
    options.retention_interval = None;
    options.retention = Duration::ZERO;
    options.page_size_bytes = page_size_bytes;
    Rocksmq::open(options).expect("open")
}

/// Writes messages `from..to` in batches of uneven sizes (crossing blocks every which way).
async fn write(mq: &Rocksmq, from: u64, to: u64, stamp: impl Fn(u64) -> Option<u64>) {
    let mut i = from;
    for size in [1u64, 7, 300, 50, 2, 513].iter().cycle() {
        if i >= to {
            break;
        }
        let end = (i + size).min(to);
        let batch = (i..end).map(|k| message(k, stamp(k))).collect();
        mq.produce("t", batch).await.expect("produce");
        i = end;
    }
}

/// The exact answer for messages `oldest..written` (0-based), as a message id.
fn expected(oldest: u64, written: u64, timestamp: u64) -> u64 {
    (oldest..written)
        .find(|&i| ts(i) >= timestamp)
        .unwrap_or(written)
        + FIRST_MESSAGE_ID
}

/// Every search over the first `written` messages (those from `oldest` still held) is exact,
/// and reads at most `within` ids before the answer after the binary search.
fn check(mq: &Rocksmq, oldest: u64, written: u64, within: u64) {
    let last = ts(written - 1) + 200;
    for timestamp in (0..last).step_by(37).chain([0, 1, last]) {
        let want = expected(oldest, written, timestamp);
        assert_eq!(
            mq.position_at_time("t", timestamp).expect("search"),
            want,
            "time {timestamp}"
        );
        let bound = mq.time_lower_bound("t", timestamp).expect("bound");
        assert!(bound <= want, "time {timestamp}: bound {bound} past {want}");
        assert!(
            want - bound <= within,
            "time {timestamp}: bound {bound} is {} ids before {want}",
            want - bound
        );
    }
}

#[tokio::test]
async fn searches_are_exact_within_one_block_and_survive_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let mq = open(&dir, 64 << 20);
        mq.create_topic("t").expect("topic");
        write(&mq, 0, 3000, |i| Some(ts(i))).await;
        check(&mq, 0, 3000, BLOCK);
    }
    let mq = open(&dir, 64 << 20);
    check(&mq, 0, 3000, BLOCK);
    write(&mq, 3000, 4000, |i| Some(ts(i))).await;
    check(&mq, 0, 4000, BLOCK);
    mq.create_consumer_group("t", "at", InitialPosition::Timestamp(ts(1234)))
        .expect("group at a time");
    let mut subscription = mq.subscribe("t", "at").expect("subscribe");
    let first = subscription.consume(1).expect("consume");
    assert_eq!(first[0].id, expected(0, 4000, ts(1234)));
    drop(subscription);

    let topic = mq.topic("t").expect("topic").id;
    assert!(index_records(&mq, topic) > 4000 / BLOCK as usize);
    mq.destroy_topic("t").expect("destroy");
    assert_eq!(index_records(&mq, topic), 0, "destroyed with its topic");
}

/// The time index records (start and marks) of `topic` in the store.
fn index_records(mq: &Rocksmq, topic: u64) -> usize {
    mq.inner
        .store
        .with(|db| {
            let meta = db.cf(CF_META)?;
            let start = db.db.get_cf(meta, time_from_key(topic)).ok().flatten();
            let mut iter = db.db.raw_iterator_cf(meta);
            iter.seek(time_mark_key(topic, 0));
            let mut marks = 0;
            while iter
                .key()
                .is_some_and(|key| key < time_mark_key(topic + 1, 0).as_slice())
            {
                marks += 1;
                iter.next();
            }
            Ok(marks + usize::from(start.is_some()))
        })
        .expect("index records")
}

/// A stamped message at `time`, its payload a tick at the same time.
fn at(time: u64) -> ProducerMessage {
    ProducerMessage {
        timestamp: Some(time),
        ..ProducerMessage::new(TsMsg::time_tick(time).encode())
    }
}

/// Single-message appends write a mark only with the last message of a block (and none of
/// the largest possible value, which a missing mark reads as); searches stay exact, the open
/// block included, across a reopen too.
#[tokio::test]
async fn a_block_is_marked_once_when_it_is_complete() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let mq = open(&dir, 64 << 20);
        mq.create_topic("t").expect("topic");
        let topic = mq.topic("t").expect("topic").id;
        for i in 0..600 {
            mq.produce("t", vec![message(i, Some(ts(i)))])
                .await
                .expect("produce");
        }
        // Ids 1..=600: blocks 0 and 256 complete, 512 open.
        assert_eq!(
            index_records(&mq, topic),
            3,
            "the start record and two marks"
        );
        check(&mq, 0, 600, BLOCK);
        mq.create_topic("u").expect("topic");
        let unstamped = mq.topic("u").expect("topic").id;
        for i in 0..600 {
            mq.produce("u", vec![message(i, None)])
                .await
                .expect("produce");
        }
        assert_eq!(index_records(&mq, unstamped), 1, "the start record alone");
    }
    let mq = open(&dir, 64 << 20);
    check(&mq, 0, 600, BLOCK);
    write(&mq, 600, 1100, |i| Some(ts(i))).await;
    check(&mq, 0, 1100, BLOCK);
}

/// The mark of a block completed after a reopen covers the messages it held before: here
/// the block's highest timestamp was written before the reopen, all after it are lower.
#[tokio::test]
async fn a_block_completed_after_a_reopen_is_marked_with_what_it_held_before() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let mq = open(&dir, 64 << 20);
        mq.create_topic("t").expect("topic");
        let mut batch: Vec<ProducerMessage> = (0..99).map(at).collect();
        batch.push(at(10_000));
        mq.produce("t", batch).await.expect("produce ids 1..=100");
    }
    let mq = open(&dir, 64 << 20);
    for time in 100..400 {
        mq.produce("t", vec![at(time)]).await.expect("produce");
    }
    // Block 0 (ids 1..=255) is complete and marked; 10,000 is id 100's.
    assert_eq!(mq.position_at_time("t", 5_000).expect("search"), 100);
    assert_eq!(mq.position_at_time("t", 10_000).expect("search"), 100);
    assert_eq!(mq.position_at_time("t", 10_001).expect("search"), 401);
}

/// Retention may delete every block below the open one with its mark: the mark the open
/// block gets then starts from the messages that remain, and searches stay exact and short.
#[tokio::test]
async fn a_block_completed_after_retention_deleted_the_one_before_is_marked_from_what_remains() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let mq = open(&dir, 40);
        mq.create_topic("t").expect("topic");
        write(&mq, 0, 300, |i| Some(ts(i))).await;
        mq.create_consumer_group("t", "g", InitialPosition::Earliest)
            .expect("group");
        mq.ack("t", "g", 280).expect("ack");
        mq.run_retention().expect("retention");
    }
    let mq = open(&dir, 40);
    let oldest = mq
        .oldest_message_id("t")
        .expect("oldest")
        .expect("some left");
    assert!(
        (BLOCK..300).contains(&oldest),
        "retention left part of the open block: {oldest}"
    );
    write(&mq, 300, 1000, |i| Some(ts(i))).await;
    check(&mq, oldest - FIRST_MESSAGE_ID, 1000, BLOCK);
}

/// A database written by the version that marked every append holds a mark for its open
/// block, which appends of this version would no longer raise: the first append after the
/// open removes it, so later messages of the block are found.
#[tokio::test]
async fn a_mark_of_the_open_block_from_an_older_version_is_removed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let topic = {
        let mq = open(&dir, 64 << 20);
        mq.create_topic("t").expect("topic");
        let batch: Vec<ProducerMessage> = (0..10).map(at).collect();
        mq.produce("t", batch).await.expect("produce ids 1..=10");
        let topic = mq.topic("t").expect("topic").id;
        mq.inner
            .store
            .with(|db| {
                db.db
                    .put_cf(db.cf(CF_META)?, time_mark_key(topic, 0), 9u64.to_be_bytes())
                    .map_err(|e| crate::store::db_error("writing an old mark", e))
            })
            .expect("old mark");
        topic
    };
    let mq = open(&dir, 64 << 20);
    mq.produce("t", vec![at(500)]).await.expect("produce id 11");
    assert_eq!(index_records(&mq, topic), 1, "the old mark is gone");
    assert_eq!(mq.position_at_time("t", 100).expect("search"), 11);
}

/// A block begun after a reopen starts from the recovered high-water mark, not from its own
/// messages: here they are all below a timestamp the block before ended with.
#[tokio::test]
async fn the_high_water_mark_survives_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tick = |ts: u64| ProducerMessage {
        timestamp: Some(ts),
        ..ProducerMessage::new(TsMsg::time_tick(ts).encode())
    };
    {
        let mq = open(&dir, 64 << 20);
        mq.create_topic("t").expect("topic");
        // Ids 1..=255: block 0 ends with a message at 10,000.
        let mut batch: Vec<ProducerMessage> = (0..254).map(|i| tick(i * 2)).collect();
        batch.push(tick(10_000));
        mq.produce("t", batch).await.expect("produce");
    }
    let mq = open(&dir, 64 << 20);
    mq.produce("t", vec![tick(600)]).await.expect("produce");
    assert_eq!(mq.position_at_time("t", 5_000).expect("search"), 255);
    assert_eq!(mq.position_at_time("t", 10_001).expect("search"), 257);
}

#[tokio::test]
async fn no_timestamp_or_a_damaged_mark_make_searches_longer_never_wrong() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mq = open(&dir, 64 << 20);
    mq.create_topic("t").expect("topic");
    write(&mq, 0, 1000, |i| Some(ts(i))).await;
    write(&mq, 1000, 1001, |_| None).await;
    write(&mq, 1001, 2000, |i| Some(ts(i))).await;
    check(&mq, 0, 2000, 2000);
    let unknown = 1000 + FIRST_MESSAGE_ID;
    let bound = mq.time_lower_bound("t", ts(1500)).expect("bound");
    assert!(
        bound <= unknown,
        "a message without a timestamp may be at any time"
    );

    let topic = mq.topic("t").expect("topic").id;
    mq.inner
        .store
        .with(|db| {
            let key = time_mark_key(topic, 2 * BLOCK);
            db.db
                .put_cf(db.cf(CF_META)?, key, b"bad")
                .map_err(|e| crate::store::db_error("damaging a mark", e))
        })
        .expect("damage");
    check(&mq, 0, 2000, 2000);
}

#[tokio::test]
async fn a_topic_from_before_the_index_is_searched_from_its_oldest_unindexed_message() {
    let dir = tempfile::tempdir().expect("tempdir");
    let topic = {
        // 40-byte pages: each page closes after three messages.
        let mq = open(&dir, 40);
        mq.create_topic("t").expect("topic");
        write(&mq, 0, 600, |i| Some(ts(i))).await;
        let topic = mq.topic("t").expect("topic").id;
        // What an older version leaves: no start record and no marks.
        mq.inner
            .store
            .with(|db| {
                let meta = db.cf(CF_META)?;
                let mut batch = rocksdb::WriteBatch::default();
                batch.delete_cf(meta, time_from_key(topic));
                batch.delete_range_cf(
                    meta,
                    time_mark_key(topic, 0),
                    time_mark_key(topic, u64::MAX),
                );
                db.write(batch)
            })
            .expect("forget the index");
        topic
    };
    let mq = open(&dir, 40);
    assert_eq!(
        mq.time_lower_bound("t", ts(500)).expect("bound"),
        FIRST_MESSAGE_ID
    );
    check(&mq, 0, 600, 600);
    write(&mq, 600, 1200, |i| Some(ts(i))).await;
    assert_eq!(
        mq.time_lower_bound("t", ts(1100)).expect("bound"),
        FIRST_MESSAGE_ID,
        "unindexed messages remain"
    );
    check(&mq, 0, 1200, 1200);

    mq.create_consumer_group("t", "g", InitialPosition::Earliest)
        .expect("group");
    mq.ack("t", "g", 1100 + FIRST_MESSAGE_ID).expect("ack");
    mq.run_retention().expect("retention");
    let oldest = mq
        .oldest_message_id("t")
        .expect("oldest")
        .expect("some left")
        - FIRST_MESSAGE_ID;
    assert!(
        oldest >= 4 * BLOCK,
        "retention dropped every unindexed message and indexed blocks: {oldest}"
    );
    check(&mq, oldest, 1200, BLOCK);
    let floor_block = crate::time_index::block_start(oldest + FIRST_MESSAGE_ID);
    let marks_below = mq
        .inner
        .store
        .with(|db| {
            let mut iter = db.db.raw_iterator_cf(db.cf(CF_META)?);
            iter.seek(time_mark_key(topic, 0));
            let mut below = 0;
            while let Some(key) = iter.key() {
                if key >= time_mark_key(topic, floor_block).as_slice() {
                    break;
                }
                below += 1;
                iter.next();
            }
            Ok(below)
        })
        .expect("marks");
    assert_eq!(
        marks_below, 0,
        "retention deleted the marks of deleted blocks"
    );
}
