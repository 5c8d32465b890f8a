//! The test server in upstream mode (`Extensions::None`) against the transcripts recorded
//! from nsqd 1.3.0 and nsqlookupd 1.3.0 (`testd/golden/upstream-*.jsonl`): each replay sends
//! what the recorder sent and requires what the real servers answered (see `golden/mod.rs`).
//! The recording's runs: A = default options (U1, U2, U3, U5, U7, one after the other on one
//! nsqd and lookupd), B = `-max-msg-size 1024` (U4), C = `-msg-timeout 2s` (U6).

mod golden;

use std::time::Duration;

use golden::Replay;
use msgstream_nsq_testd::{Options, TestServer};

/// The recorded nsqd TCP and HTTP endpoints.
const NSQD_TCP: &str = "127.0.0.1:4250";
const NSQD_HTTP: &str = "127.0.0.1:4251";

/// U5 steps 5-6 read the stats U3 left (its 60-s redelivery flow, with consumer B connected).
const U5_AFTER_U3: &[u32] = &[5, 6];
const U5_AFTER_U3_WHY: &str = "/stats of U3's channel after U3's whole flow";

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

#[tokio::test]
async fn u5_http_api() {
    let nsqd = server(Options::default()).await;
    on("upstream-U5-http.jsonl", &nsqd)
        .skip(U5_AFTER_U3, U5_AFTER_U3_WHY)
        .check()
        .await;
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
