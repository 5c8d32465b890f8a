//! Recovery scenario: reopening a queue whose open retention page holds several MiB. The page
//! bytes are then counted from the topic's page mark (written every MiB of open page) instead of
//! from the page's first message; whichever way they are counted, a page must close at exactly
//! the message it would have closed at without the restart. A mark that does not decode, or that
//! belongs to an older page, must not change that either.
//!
//! Pages are observed through retention: with a zero retention age and every message acked,
//! one pass removes exactly the closed pages, and its report says how many messages they held.

use std::path::Path;
use std::time::Duration;

use msgstream::mq::{InitialPosition, ProducerMessage};
use msgstream_rocksmq::{Rocksmq, RocksmqOptions};

/// 64 KiB messages in 3 MiB pages: every page closes at its 48th message, and the open page
/// passes a 1 MiB mark every 16 messages.
const MESSAGE: usize = 64 * 1024;
const PER_PAGE: u64 = 48;

fn open(dir: &Path) -> Rocksmq {
    let mut options = RocksmqOptions::new(dir);
    options.retention_interval = None;
    options.retention = Duration::ZERO;
    options.page_size_bytes = PER_PAGE * MESSAGE as u64;
    Rocksmq::open(options).expect("open")
}

/// Produces `count` messages one call at a time (so every mark lands on its own write) and
/// returns the last id.
async fn produce(mq: &Rocksmq, count: u64) -> u64 {
    let mut last = 0;
    for _ in 0..count {
        let ids = mq
            .produce("t", vec![ProducerMessage::new(vec![1u8; MESSAGE])])
            .await
            .expect("produce");
        last = ids.end - 1;
    }
    last
}

/// Acks everything up to `last` and returns how many messages the closed pages held.
fn expire_closed_pages(mq: &Rocksmq, last: u64) -> u64 {
    mq.ack("t", "g", last).expect("ack");
    mq.run_retention().expect("retention").messages
}

/// Checks that the open page closes at exactly its `left`th next message (and not before), by
/// expiring the closed pages after each write.
async fn assert_page_closes_after(mq: &Rocksmq, left: u64) {
    let last = produce(mq, left - 1).await;
    assert_eq!(
        expire_closed_pages(mq, last),
        0,
        "one message short, the page is still open"
    );
    let last = produce(mq, 1).await;
    assert_eq!(
        expire_closed_pages(mq, last),
        PER_PAGE,
        "the page closes at its {PER_PAGE}th message, counting its bytes before the restart"
    );
}

/// The closed queue's RocksDB database, opened raw.
fn raw(dir: &Path) -> rocksdb::DB {
    let cfs = rocksdb::DB::list_cf(&rocksdb::Options::default(), dir).expect("cfs");
    rocksdb::DB::open_cf(&rocksdb::Options::default(), dir, cfs).expect("raw open")
}

/// Every key of the `meta` column family.
fn meta_keys(db: &rocksdb::DB) -> Vec<Box<[u8]>> {
    let meta = db.cf_handle("meta").expect("meta cf");
    db.iterator_cf(meta, rocksdb::IteratorMode::Start)
        .map(|entry| entry.expect("entry").0)
        .collect()
}

/// A queue with a topic `t`, a group `g`, and 40 messages (2.5 MiB) in its open page, closed.
async fn two_and_a_half_mib_open(dir: &Path) -> u64 {
    let mq = open(dir);
    mq.create_topic("t").expect("topic");
    mq.create_consumer_group("t", "g", InitialPosition::Earliest)
        .expect("group");
    let last = produce(&mq, 40).await;
    assert_eq!(expire_closed_pages(&mq, last), 0, "the first page is open");
    mq.close();
    last
}

#[tokio::test]
async fn the_open_page_closes_where_it_would_have_without_the_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    two_and_a_half_mib_open(dir.path()).await;

    let mq = open(dir.path());
    assert_page_closes_after(&mq, PER_PAGE - 40).await;
}

#[tokio::test]
async fn a_mark_of_an_older_page_is_not_counted() {
    let dir = tempfile::tempdir().expect("tempdir");
    two_and_a_half_mib_open(dir.path()).await;
    // Close the first page and put 0.5 MiB in the next: its newest mark is still the first
    // page's (at 2 MiB), which must not count for the new page.
    let mq = open(dir.path());
    let last = produce(&mq, PER_PAGE - 40 + 8).await;
    assert_eq!(expire_closed_pages(&mq, last), PER_PAGE);
    mq.close();

    let mq = open(dir.path());
    assert_page_closes_after(&mq, PER_PAGE - 8).await;
}

#[tokio::test]
async fn a_damaged_mark_is_ignored_and_the_page_counted_from_its_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    two_and_a_half_mib_open(dir.path()).await;
    {
        let db = raw(dir.path());
        // Page marks are the nine-byte `P ‖ topic id` keys of `meta`.
        let marks: Vec<_> = meta_keys(&db)
            .into_iter()
            .filter(|key| key.len() == 9 && key[0] == b'P')
            .collect();
        assert_eq!(marks.len(), 1, "one topic, one mark");
        let meta = db.cf_handle("meta").expect("meta cf");
        db.put_cf(meta, &marks[0], b"not a mark").expect("damage");
    }

    let mq = open(dir.path());
    assert_page_closes_after(&mq, PER_PAGE - 40).await;
}

#[tokio::test]
async fn a_deleted_topic_leaves_no_mark() {
    let dir = tempfile::tempdir().expect("tempdir");
    two_and_a_half_mib_open(dir.path()).await;
    let mq = open(dir.path());
    mq.destroy_topic("t").expect("destroy");
    mq.close();

    let left: Vec<_> = meta_keys(&raw(dir.path()))
        .into_iter()
        .filter(|key| key.first() != Some(&b'C'))
        .collect();
    assert!(left.is_empty(), "meta keeps only the id counter: {left:?}");
}
