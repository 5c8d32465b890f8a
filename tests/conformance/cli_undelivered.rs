//! `consume` never ends a run that lost messages as a clean one: a message the stream reports
//! instead of delivering (here a message at timestamp 0, which no tt pack can hold, written by
//! a library producer, since `produce` refuses it) is a warning when it is met and makes the
//! run exit 1 at its end, after printing every pack it did deliver.

#![cfg(feature = "rocksmq")]

use msgstream::msg::{MsgPack, TsMsg};
use msgstream_facade::{Config, Factory};

use crate::cli::{msgstream, stderr, stdout};

#[tokio::test]
async fn a_late_message_makes_consume_fail_after_the_packs_it_delivered() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let mut config = Config::default();
    config.rocksmq.path = path.clone();
    let factory = Factory::new(&config).await.expect("factory");
    let mut out = factory.msg_stream();
    out.as_producer(&["late"]).await.expect("producer");
    let msgs = [
        TsMsg::insert(1, 0, "at zero"),
        TsMsg::insert(2, 5, "on time"),
    ];
    out.produce(&MsgPack::new(msgs)).await.expect("produce");
    out.broadcast(&MsgPack::new([TsMsg::timetick(10)]))
        .await
        .expect("tick");
    out.close().await;
    factory.close().await;

    let path = path.to_string_lossy();
    let env = [("MSGSTREAM_ROCKSMQ__PATH", path.as_ref())];
    let run = msgstream(
        &[
            "consume",
            "--channels",
            "late",
            "--tt",
            "--idle-timeout",
            "2",
        ],
        &env,
    );
    let (out, err) = (stdout(&run), stderr(&run));
    assert_eq!(run.status.code(), Some(1), "stdout: {out}\nstderr: {err}");
    assert!(out.contains("on time"), "the pack it could deliver: {out}");
    assert!(!out.contains("at zero"), "{out}");
    assert!(err.contains("warning: late message"), "{err}");
    assert!(
        err.contains("1 message(s) were reported and are in no pack"),
        "{err}"
    );
}
