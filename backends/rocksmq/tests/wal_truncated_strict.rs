//! Recovery scenario: the write-ahead log truncated to half after a SIGKILL (see `wal_damage`),
//! opened with `Recovery::Strict`: the open is refused with a typed error naming the topic,
//! and keeps being refused until an open with `Recovery::Report` accepts the loss.

mod wal_damage;

use msgstream_rocksmq::{Recovery, Rocksmq};
use wal_damage::{crash_and_truncate_wal, options, TOPIC};

#[test]
fn child_producer() {
    wal_damage::child_body();
}

fn refused(dir: &std::path::Path) -> String {
    match Rocksmq::open(options(dir, Recovery::Strict)) {
        Err(msgstream::Error::Corrupt {
            channel, detail, ..
        }) => {
            assert_eq!(channel, TOPIC);
            detail
        }
        other => panic!("expected a refusal, got {:?}", other.map(|_| ())),
    }
}

#[test]
fn strict_recovery_refuses_a_truncated_wal_until_the_loss_is_accepted() {
    let dir = tempfile::tempdir().expect("tempdir");
    crash_and_truncate_wal(dir.path(), "child_producer");

    let detail = refused(dir.path());
    assert!(detail.contains("strict"), "{detail}");
    assert!(
        detail.contains(&format!("{TOPIC}: ")),
        "names the topic's count: {detail}"
    );
    refused(dir.path());

    let mq = Rocksmq::open(options(dir.path(), Recovery::Report)).expect("accept the loss");
    assert_eq!(mq.lost_at_recovery().len(), 1);
    mq.close();
    Rocksmq::open(options(dir.path(), Recovery::Strict))
        .expect("accepted: strict opens again")
        .close();
}
