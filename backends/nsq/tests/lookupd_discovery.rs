//! A consumer that discovers its nsqd through lookupd and starts before its topic exists.

mod common;

use std::sync::Arc;

use common::*;
use msgstream_nsq::{Consumer, ConsumerConfig, NsqClient, NsqConfig};
use msgstream_nsq_testd::{Extensions, TestLookupd};

/// lookupd answers `404 TOPIC_NOT_FOUND` until the first PUB creates the topic (`U7`): the
/// consumer asks again soon, instead of a whole poll interval (a minute) later, and gets the
/// message published after it started (the topic's first channel gets its backlog, `U2`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixture_a_consumer_started_before_its_topic_gets_the_first_publish_soon() {
    let nsqd = fixture_server(Extensions::None).await;
    let lookupd = TestLookupd::start(&[&nsqd]).await.expect("lookupd");
    let topic = topic("not-yet");
    let mut config = ConsumerConfig::new(&topic, "c");
    config.lookupd = vec![lookupd.http_addr().to_string()];
    config.conn = conn_config();
    let consumer = Consumer::connect(config).await.expect("consumer");
    let producer = producer(&[&nsqd]);
    producer.publish(&topic, b"first").await.expect("publish");
    let message = recv(&consumer).await;
    assert_eq!(body(&message), "first");
    message.finish().await.expect("FIN");
    consumer.stop().await;
    producer.close().await;
}

/// The conformance check that failed against a real nsqd with `MSGSTREAM_NSQ_LOOKUPD` set: the
/// only one that subscribes before its channel (topic) exists, then publishes garbage and
/// waits 30 s for the error item. Run here as the conformance harness configures the client
/// for an external server with a lookupd (consumers discover through lookupd only).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixture_stream_bad_inputs_through_lookupd() {
    let nsqd = fixture_server(Extensions::None).await;
    let lookupd = TestLookupd::start(&[&nsqd]).await.expect("lookupd");
    let spool = tempfile::tempdir().expect("tempdir");
    let client = NsqClient::connect(NsqConfig {
        nsqd: vec![nsqd.tcp_addr().to_string()],
        nsqd_http: vec![nsqd.http_addr().to_string()],
        lookupd: vec![lookupd.http_addr().to_string()],
        max_in_flight: 64,
        spool_dir: spool.path().to_path_buf(),
        ..NsqConfig::default()
    })
    .await
    .expect("client");
    msgstream::testkit::stream_bad_inputs(Arc::new(client)).await;
}
