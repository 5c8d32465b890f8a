//! The test server in upstream mode against run A of the upstream recording (nsqd 1.3.0 and
//! nsqlookupd 1.3.0, default options), replayed as recorded, on one nsqd and one lookupd:
//! U1 (IDENTIFY, heartbeats), U2 (a topic holds messages until its first channel), U3 (a
//! consumer that disconnects without FIN gives nothing back: its three messages stay in flight
//! with no client, and come back only at their msg_timeout, 60 s, behind the three published
//! after it left, with attempts 2 and their original timestamps), U5 (the HTTP API, recorded
//! inside U3 while its consumer B was still connected, so its `/stats` shows B) and U7 (the
//! lookupd after all of them). The replay takes U3's minute. See `golden/mod.rs`.

mod golden;

use golden::Replay;
use msgstream_nsq_testd::{Options, TestLookupd, TestServer};

/// The recorded nsqd TCP and HTTP endpoints and the lookupd's HTTP endpoint.
const NSQD_TCP: &str = "127.0.0.1:4250";
const NSQD_HTTP: &str = "127.0.0.1:4251";
const LOOKUPD_HTTP: &str = "127.0.0.1:4261";

/// The last U3 step before the recorder ran U5 (consumer B idle after finishing all six).
const U3_BEFORE_U5: u32 = 52;

#[tokio::test]
async fn run_a_identify_backlog_disconnect_http_and_lookupd() {
    let nsqd = TestServer::start(Options::default())
        .await
        .expect("the test server starts");
    let lookupd = TestLookupd::start(&[&nsqd])
        .await
        .expect("the test lookupd starts");
    let on = |file: &str| {
        Replay::file(file)
            .endpoint(NSQD_TCP, nsqd.tcp_addr())
            .endpoint(NSQD_HTTP, nsqd.http_addr())
            .endpoint(LOOKUPD_HTTP, lookupd.http_addr())
    };
    on("upstream-U1-identify.jsonl").check().await;
    on("upstream-U2-held-until-first-channel.jsonl")
        .check()
        .await;
    on("upstream-U3-requeue-on-disconnect.jsonl")
        .nested(U3_BEFORE_U5, on("upstream-U5-http.jsonl"))
        .check()
        .await;
    on("upstream-U7-lookupd.jsonl").check().await;
}
