//! What only the crate can stage: a consumer that died after spooling a message and before
//! its FIN reached nsqd.

use std::time::Duration;

use msgstream::mq::{Client, ConsumerOptions, ProducerMessage};
use msgstream_nsq_testd::{Extensions, Options, TestServer};

use super::*;
use crate::adapter::NsqClient;
use crate::consumer::ConsumerConfig;
use crate::spool::SpoolSync;
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
            &crate::codec::MsgId(held[1].nsq_id),
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

/// What nsqd delivered to a consumer that is closing (before its CLS took effect) is spooled
/// and FINed, so the next consumer of the subscription gets it first, in order. Requeued
/// instead, upstream nsqd would queue it behind everything published meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closing_consumer_spools_what_nsqd_had_sent_it() {
    let server = TestServer::start(Options::default()).await.expect("server");
    let dir = tempfile::tempdir().expect("tempdir");
    let client = NsqClient::connect(NsqConfig {
        nsqd: vec![server.tcp_addr().to_string()],
        spool_dir: dir.path().to_path_buf(),
        ..NsqConfig::default()
    })
    .await
    .expect("client");
    let producer = client.create_producer("closing").await.expect("producer");
    producer
        .send(ProducerMessage::new("in flight"))
        .await
        .expect("send");
    let mut config = ConsumerConfig::new("closing", "tt");
    config.nsqd = vec![server.tcp_addr().to_string()];
    let reading = Arc::new(NsqPush::connect(config).await.expect("consumer"));
    tokio::time::timeout(Duration::from_secs(15), async {
        while reading.stats().received == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("delivered in time");
    // The consumer closed before its pump took the delivery.
    let spool = Spool::open(dir.path(), "closing", "tt", SpoolSync::Buffered).expect("spool");
    let journal = Arc::new(Journal::new(spool, SpoolSync::Buffered));
    journal.closed.store(true, Ordering::Release);
    let pump = tokio::spawn(pump(
        journal.clone(),
        reading.clone(),
        "closing".into(),
        "tt".into(),
    ));
    SpooledConsumer::shut(Some(reading), Some(pump), journal).await;

    let spool = Spool::open(dir.path(), "closing", "tt", SpoolSync::Buffered).expect("reopen");
    let held = spool.read_from(0, 10).expect("read");
    assert_eq!(held.len(), 1, "spooled");
    // A FIN is never answered: poll the channel until the server has read it, then check
    // that it was a FIN (nothing requeued, nothing left).
    let channel = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let (status, stats) = crate::http::request(
                &server.http_addr().to_string(),
                "GET",
                "/stats?format=json&topic=closing",
                b"",
                Duration::from_secs(5),
            )
            .await
            .expect("stats");
            assert_eq!(status, 200);
            let stats: serde_json::Value = serde_json::from_slice(&stats).expect("json");
            let channel = stats["topics"][0]["channels"][0].clone();
            if channel["in_flight_count"] == 0 {
                break channel;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the server read the FIN in time");
    assert_eq!(
        (&channel["depth"], &channel["requeue_count"]),
        (&0.into(), &0.into()),
        "FINed, not requeued: {channel}"
    );
    client.close().await;
}
