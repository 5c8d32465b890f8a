//! Recovery scenario: records lost from under a consumer group (as a damaged write-ahead log
//! leaves it). RocksDB recovers such damage silently; the queue must say how many acknowledged
//! ids are gone instead of carrying on as if nothing happened.

use msgstream::mq::ProducerMessage;
use msgstream_rocksmq::{Rocksmq, RocksmqOptions};

#[tokio::test]
async fn ids_a_group_acknowledged_but_the_topic_lost_are_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut options = RocksmqOptions::new(dir.path());
    options.retention_interval = None;
    let mq = Rocksmq::open(options.clone()).expect("open");
    mq.create_topic("t").expect("topic");
    let batch = (0..100)
        .map(|i| ProducerMessage::new(format!("m{i}").into_bytes()))
        .collect();
    let ids = mq.produce("t", batch).await.expect("produce");
    mq.create_consumer_group("t", "g", msgstream::mq::InitialPosition::Earliest)
        .expect("group");
    mq.ack("t", "g", ids.end - 1).expect("ack all");
    assert!(mq.lost_at_recovery().is_empty());
    mq.close();

    // Remove the last ten messages behind the queue's back, as lost log records would.
    let cfs = rocksdb::DB::list_cf(&rocksdb::Options::default(), dir.path()).expect("cfs");
    let db = rocksdb::DB::open_cf(&rocksdb::Options::default(), dir.path(), cfs).expect("raw");
    let messages = db.cf_handle("messages").expect("messages cf");
    let keys: Vec<Box<[u8]>> = db
        .iterator_cf(messages, rocksdb::IteratorMode::End)
        .take(10)
        .map(|item| item.expect("key").0)
        .collect();
    for key in keys {
        db.delete_cf(messages, key).expect("delete");
    }
    drop(db);

    let mq = Rocksmq::open(options).expect("reopen");
    let lost = mq.lost_at_recovery();
    assert_eq!(
        lost.len(),
        2,
        "the group and the ledger both show it: {lost:?}"
    );
    let by_group = lost.iter().find(|l| l.group.is_some()).expect("group");
    assert_eq!(
        (by_group.topic.as_str(), by_group.group.as_deref()),
        ("t", Some("g"))
    );
    assert_eq!(by_group.count(), 10, "ten ids missing");
    let by_ledger = lost.iter().find(|l| l.group.is_none()).expect("ledger");
    assert_eq!((by_ledger.topic.as_str(), by_ledger.count()), ("t", 10));
    mq.close();
}
