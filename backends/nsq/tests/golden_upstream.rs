//! The test server in upstream mode (`Extensions::None`) against the transcripts recorded
//! from nsqd 1.3.0 (`testd/golden/upstream-*.jsonl`): each replay sends what the recorder sent
//! and requires what the real servers answered (see `golden/mod.rs`). The recording's runs:
//! A = default options (U1, U2, U3 with U5 inside it, U7: `golden_upstream_run_a.rs`, which
//! takes U3's minute), B = `-max-msg-size 1024` (U4), C = `-msg-timeout 2s` (U6). U1 and U2
//! are also replayed here alone, on fresh servers, so that a difference shows without the
//! minute.

mod golden;

use std::time::Duration;

use golden::Replay;
use msgstream_nsq_testd::{Options, TestServer};

/// The recorded nsqd TCP and HTTP endpoints.
const NSQD_TCP: &str = "127.0.0.1:4250";
const NSQD_HTTP: &str = "127.0.0.1:4251";

async fn server(options: Options) -> TestServer {
    TestServer::start(options)
        .await
        .expect("the test server starts")
}

fn on(file: &str, server: &TestServer) -> Replay {
    Replay::file(file)
        .endpoint(NSQD_TCP, server.tcp_addr())
        .endpoint(NSQD_HTTP, server.http_addr())
}

#[tokio::test]
async fn u1_identify_heartbeats_and_identify_errors() {
    let nsqd = server(Options::default()).await;
    on("upstream-U1-identify.jsonl", &nsqd).check().await;
}

#[tokio::test]
async fn u2_a_topic_holds_messages_until_its_first_channel() {
    let nsqd = server(Options::default()).await;
    on("upstream-U2-held-until-first-channel.jsonl", &nsqd)
        .check()
        .await;
}

#[tokio::test]
async fn u4_error_frames_and_which_close_the_connection() {
    let nsqd = server(Options {
        max_msg_size: 1024,
        ..Options::default()
    })
    .await;
    on("upstream-U4-errors.jsonl", &nsqd).check().await;
}

/// The harness itself: a server with another limit than the recording's is caught at the first
/// answer that differs, and the report names the step and both texts.
#[tokio::test]
async fn a_difference_is_reported_with_its_step_and_both_texts() {
    let nsqd = server(Options::default()).await;
    let mismatch = on("upstream-U4-errors.jsonl", &nsqd)
        .run()
        .await
        .expect_err("a 1 MiB max_msg_size accepts what the recording refused");
    assert_eq!(
        (
            mismatch.file.as_str(),
            mismatch.step,
            mismatch.conn.as_str()
        ),
        ("upstream-U4-errors.jsonl", 43, "tcp6")
    );
    assert_eq!(
        mismatch.expected,
        "ERROR E_BAD_MESSAGE PUB message too big 1025 > 1024"
    );
    assert_eq!(mismatch.actual, "RESPONSE OK");
    let report = mismatch.to_string();
    assert!(
        report.contains("step 43") && report.contains("note:"),
        "{report}"
    );
}

#[tokio::test]
async fn u6_timeouts_touch_req_and_client_msg_timeout() {
    let nsqd = server(Options {
        msg_timeout: Duration::from_secs(2),
        ..Options::default()
    })
    .await;
    on("upstream-U6-timeout-redelivery.jsonl", &nsqd)
        .check()
        .await;
}
