//! What only the crate can stage: a consumer that died after spooling a message and before
//! its FIN reached nsqd.

use std::time::Duration;

use msgstream::mq::{Client, ConsumerOptions, ProducerMessage};
use msgstream_nsq_testd::{Extensions, Options, TestServer};

use super::*;
use crate::adapter::spool::SpoolSync;
use crate::adapter::NsqClient;
use crate::consumer::ConsumerConfig;
use crate::NsqConfig;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redelivery_of_a_spooled_message_is_not_handed_over_twice() {
    let server = TestServer::start(Options {
        extensions: Extensions::None,
        ..Options::default()
    })
    .await
    .expect("server");
    let dir = tempfile::tempdir().expect("tempdir");
    let client = NsqClient::connect(NsqConfig {
        nsqd: vec![server.tcp_addr().to_string()],
        spool_dir: dir.path().to_path_buf(),
        ..NsqConfig::default()
    })
    .await
    .expect("client");
    let producer = client.create_producer("dedupe").await.expect("producer");
    producer
        .send(ProducerMessage::new("first"))
        .await
        .expect("first");

    // The consumer that died: it spooled "first", and its FIN never reached nsqd, which
    // therefore sends "first" again.
    let mut config = ConsumerConfig::new("dedupe", "tt");
    config.nsqd = vec![server.tcp_addr().to_string()];
    let died = NsqPush::connect(config).await.expect("consumer");
    let nsq = tokio::time::timeout(Duration::from_secs(15), died.recv())
        .await
        .expect("in time")
        .expect("first");
    Spool::open(dir.path(), "dedupe", "tt", SpoolSync::Buffered)
        .expect("spool")
        .append(nsq.id().0, None, nsq.body())
        .expect("append");
    nsq.requeue_without_backoff(Some(Duration::ZERO))
        .await
        .expect("requeue");
    died.stop().await;

    let second = producer
        .send(ProducerMessage::new("second"))
        .await
        .expect("second");
    let mut consumer = client
        .subscribe(ConsumerOptions::new("dedupe", "tt").in_order())
        .await
        .expect("subscribe");
    let mut got = Vec::new();
    for _ in 0..2 {
        let message = tokio::time::timeout(Duration::from_secs(15), consumer.recv())
            .await
            .expect("in time")
            .expect("recv")
            .expect("open");
        got.push(message.payload);
    }
    assert_eq!(got, [&b"first"[..], b"second"]);
    consumer.close().await;
    let spool = Spool::open(dir.path(), "dedupe", "tt", SpoolSync::Buffered).expect("reopen");
    let held = spool.read_from(0, 10).expect("read");
    assert_eq!(held.len(), 2, "the redelivery was FINed, not spooled again");
    assert_eq!(
        delivered_message(
            &SharedStr::interned("dedupe"),
            None,
            &held[1].body,
            None,
            Delivery::default()
        )
        .expect("decode")
        .id,
        second
    );
    client.close().await;
}
