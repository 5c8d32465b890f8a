//! The test server in upstream mode against `upstream-U3-requeue-on-disconnect.jsonl`
//! (nsqd 1.3.0, default options): a consumer that disconnects without FIN gives nothing back;
//! its three messages stay in flight with no client (`/stats`), and come back only at their
//! msg_timeout (60 s, so this replay takes a minute), behind the three published after it
//! left, with attempts 2 and their original timestamps. See `golden/mod.rs`.

mod golden;

use golden::Replay;
use msgstream_nsq_testd::{Options, TestServer};

#[tokio::test]
async fn u3_a_disconnected_consumers_messages_come_back_at_their_timeout() {
    let nsqd = TestServer::start(Options::default())
        .await
        .expect("the test server starts");
    Replay::file("upstream-U3-requeue-on-disconnect.jsonl")
        .endpoint("127.0.0.1:4250", nsqd.tcp_addr())
        .endpoint("127.0.0.1:4251", nsqd.http_addr())
        .check()
        .await;
}
