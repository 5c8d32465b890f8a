//! The mq adapter against the test server, in both modes: upstream (`extensions = none`) and
//! Youzan (`extensions = partitions`). The core's contract checks run against both modes in the
//! workspace's conformance suite (`tests/conformance`); these are the adapter's own.

use std::sync::Arc;

use std::time::Duration;

use msgstream::mq::{
    Client, Consumer, ConsumerOptions, Message, ProducerMessage, SubscriptionInfo,
};
use msgstream::testkit::Harness;
use msgstream::Error;
use msgstream_nsq::{Extensions, NsqClient, NsqConfig};
use msgstream_nsq_testd::{Options, TestServer};

async fn harness(extensions: Extensions) -> Harness {
    let server = TestServer::start(Options {
        extensions: match extensions {
            Extensions::None => msgstream_nsq_testd::Extensions::None,
            Extensions::Partitions => msgstream_nsq_testd::Extensions::Partitions,
        },
        ..Options::default()
    })
    .await
    .expect("test server");
    let config = NsqConfig {
        nsqd: vec![server.tcp_addr().to_string()],
        nsqd_http: vec![server.http_addr().to_string()],
        extensions,
        max_in_flight: 64,
        ..NsqConfig::default()
    };
    let client = NsqClient::connect(config).await.expect("client");
    Harness::new(Arc::new(client), server)
}

async fn partitions() -> Harness {
    harness(Extensions::Partitions).await
}

async fn upstream() -> Harness {
    harness(Extensions::None).await
}

async fn recv(consumer: &mut Box<dyn Consumer>) -> Message {
    tokio::time::timeout(Duration::from_secs(15), consumer.recv())
        .await
        .expect("a message in time")
        .expect("recv")
        .expect("open")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_new_channels_see_only_new_messages() {
    let harness = upstream().await;
    let client = harness.client();
    let producer = client.create_producer("t").await.expect("producer");
    producer
        .send(ProducerMessage::new(&b"before"[..]))
        .await
        .expect("send");
    let mut first = client
        .subscribe(ConsumerOptions::new("t", "first"))
        .await
        .expect("first");
    assert_eq!(
        recv(&mut first).await.payload.as_ref(),
        b"before",
        "the first channel gets the backlog"
    );
    let mut second = client
        .subscribe(ConsumerOptions::new("t", "second"))
        .await
        .expect("second");
    producer
        .send(ProducerMessage::new(&b"after"[..]))
        .await
        .expect("send");
    assert_eq!(
        recv(&mut second).await.payload.as_ref(),
        b"after",
        "a later channel starts at the end"
    );
    let caps = client.capabilities();
    assert_eq!(
        (caps.seek, caps.readers, caps.latest_id),
        (false, false, false)
    );
    assert_eq!(caps.ordering, msgstream::mq::Ordering::BestEffort);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_lag_and_listing() {
    for harness in [partitions().await, upstream().await] {
        let client = harness.client();
        let producer = client.create_producer("listed").await.expect("producer");
        let mut consumer = client
            .subscribe(ConsumerOptions::new("listed", "g"))
            .await
            .expect("sub");
        let ids = producer
            .send_batch(
                (0..3)
                    .map(|i| ProducerMessage::new(format!("{i}")))
                    .collect(),
            )
            .await
            .expect("batch");
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
        let first = recv(&mut consumer).await;
        assert_eq!(first.id, ids[0]);
        consumer.ack(&first).await.expect("ack");
        let lag = |subs: Vec<SubscriptionInfo>| {
            subs.into_iter()
                .map(|s| (s.name, s.lag))
                .collect::<Vec<_>>()
        };
        let mut listed = Vec::new();
        for _ in 0..200 {
            listed = lag(client.list_subscriptions("listed").await.expect("list"));
            if listed == [("g".to_string(), Some(2))] {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(listed, [("g".to_string(), Some(2))]);
        assert!(client
            .list_topics()
            .await
            .expect("topics")
            .contains(&"listed".to_string()));
        let wrong_len = vec![0u8; ids[0].as_bytes().len() + 1];
        assert!(matches!(
            client.message_id_from_bytes(&wrong_len),
            Err(Error::Decode(_))
        ));
        assert!(matches!(
            client.list_subscriptions("never-created").await,
            Err(Error::UnknownChannel { .. })
        ));
        consumer.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_http_the_admin_parts_are_unsupported() {
    let server = TestServer::start(Options::default()).await.expect("server");
    let client = NsqClient::connect(NsqConfig {
        nsqd: vec![server.tcp_addr().to_string()],
        ..NsqConfig::default()
    })
    .await
    .expect("client");
    let caps = client.capabilities();
    assert!(!caps.delete_topics && !caps.delete_subscriptions);
    assert!(matches!(
        client.list_topics().await,
        Err(Error::Unsupported { .. })
    ));
    assert!(matches!(
        client.delete_topic("t").await,
        Err(Error::Unsupported { .. })
    ));
    let latest = ConsumerOptions::new("t", "g")
        .with_initial_position(msgstream::mq::InitialPosition::Latest);
    assert!(matches!(
        client.subscribe(latest).await.map(|_| ()),
        Err(Error::Unsupported { .. })
    ));
    assert!(NsqClient::connect(NsqConfig {
        nsqd: vec!["127.0.0.1:1".into()],
        ..NsqConfig::default()
    })
    .await
    .is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_envelope_is_reported_once_and_foreign_bodies_pass() {
    let server = TestServer::start(Options::default()).await.expect("server");
    let client = NsqClient::connect(NsqConfig {
        nsqd: vec![server.tcp_addr().to_string()],
        ..NsqConfig::default()
    })
    .await
    .expect("client");
    let mut consumer = client
        .subscribe(ConsumerOptions::new("raw", "g"))
        .await
        .expect("sub");
    let raw = msgstream_nsq::Producer::new(msgstream_nsq::ProducerConfig {
        nsqd: vec![server.tcp_addr().to_string()],
        ..msgstream_nsq::ProducerConfig::default()
    })
    .expect("raw producer");
    raw.publish("raw", b"\xffMS1\0\0")
        .await
        .expect("pub broken");
    raw.publish("raw", b"from pynsq")
        .await
        .expect("pub foreign");
    let broken = tokio::time::timeout(Duration::from_secs(15), consumer.recv())
        .await
        .expect("in time");
    assert!(matches!(broken, Err(Error::Decode(_))), "{broken:?}");
    let foreign = recv(&mut consumer).await;
    assert_eq!(foreign.payload.as_ref(), b"from pynsq");
    assert!(foreign.properties.is_empty());
    consumer.ack(&foreign).await.expect("ack");
    consumer.close().await;
}
