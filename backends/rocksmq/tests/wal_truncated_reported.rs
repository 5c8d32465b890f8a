//! Recovery scenario: after a SIGKILL under `Buffered` durability, the write-ahead log is
//! truncated to half. RocksDB recovers what precedes the damage and drops the rest without a
//! word outside its own LOG; the queue must report the topic and how many ids are gone (and
//! only once: the next open has accepted the loss).

mod wal_damage;

use msgstream_rocksmq::{Recovery, Rocksmq, FIRST_MESSAGE_ID};
use wal_damage::{crash_and_truncate_wal, options, MESSAGES, TOPIC};

#[test]
fn child_producer() {
    wal_damage::child_body();
}

#[test]
fn a_truncated_wal_is_reported_with_the_topic_and_the_ids_gone() {
    let dir = tempfile::tempdir().expect("tempdir");
    crash_and_truncate_wal(dir.path(), "child_producer");

    let mq = Rocksmq::open(options(dir.path(), Recovery::Report)).expect("open what survived");
    let survived = mq.latest_message_id(TOPIC).expect("topic").unwrap_or(0);
    assert!(
        survived < MESSAGES,
        "half the log is gone: {survived} survived"
    );
    let lost = mq.lost_at_recovery();
    assert_eq!(lost.len(), 1, "{lost:?}");
    assert_eq!(lost[0].topic, TOPIC);
    assert_eq!(lost[0].group, None, "the ledger shows it, no group exists");
    assert_eq!(lost[0].expected_next, MESSAGES + FIRST_MESSAGE_ID);
    assert_eq!(
        lost[0].count(),
        MESSAGES - survived,
        "every id gone is counted"
    );
    mq.close();

    let mq = Rocksmq::open(options(dir.path(), Recovery::Report)).expect("reopen");
    assert!(mq.lost_at_recovery().is_empty(), "reported once");
    mq.close();
}
