//! The mq adapter against the test server, in both modes: upstream (`extensions = none`) and
//! Youzan (`extensions = partitions`), standalone or a cluster (`cluster = true`, where consume
//! offsets give seek, readers and the latest id). The core's contract checks run against every
//! mode in the workspace's conformance suite (`tests/conformance`); these are the adapter's
//! own. Each mode runs against the external server when `MSGSTREAM_NSQ_*` names one of that
//! mode (`common::server`); `fixture_` tests need test servers of their own.

mod common;

use std::sync::Arc;

use std::time::Duration;

use msgstream::mq::{
    Client, Consumer, ConsumerOptions, Message, ProducerMessage, ReaderOptions, SubscriptionInfo,
};
use msgstream::testkit::Harness;
use msgstream::Error;
use msgstream_nsq::{Extensions, NsqClient, NsqConfig};
use msgstream_nsq_testd::{ClusterOptions, TestCluster};

async fn harness(extensions: Extensions) -> Harness {
    let server = common::server(match extensions {
        Extensions::None => msgstream_nsq_testd::Extensions::None,
        Extensions::Partitions => msgstream_nsq_testd::Extensions::Partitions,
    })
    .await;
    let config = match extensions {
        Extensions::Partitions => NsqConfig {
            max_in_flight: 64,
            ..common::partitions_config(&server)
        },
        Extensions::None => NsqConfig {
            nsqd: vec![server.tcp_addr().to_string()],
            nsqd_http: vec![server.http_addr().to_string()],
            extensions,
            max_in_flight: 64,
            ..NsqConfig::default()
        },
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

/// The adapter with consume offsets (seek, readers, latest id), which only a Youzan cluster
/// serves: the external one when `MSGSTREAM_NSQ_CLUSTER=true`, else an in-process cluster.
async fn offsets() -> Harness {
    if common::external().is_some_and(|e| e.cluster) {
        let server = common::server(msgstream_nsq_testd::Extensions::Partitions).await;
        let config = NsqConfig {
            max_in_flight: 64,
            ..common::partitions_config(&server)
        };
        let client = NsqClient::connect(config).await.expect("client");
        return Harness::new(Arc::new(client), server);
    }
    let cluster = TestCluster::start(ClusterOptions::default())
        .await
        .expect("test cluster");
    let client = NsqClient::connect(cluster_config(&cluster, 0))
        .await
        .expect("client");
    Harness::new(Arc::new(client), cluster)
}

/// A client of `cluster` knowing every node, its channels in `partition` of two.
fn cluster_config(cluster: &TestCluster, partition: u32) -> NsqConfig {
    let addrs = |f: fn(&msgstream_nsq_testd::TestServer) -> std::net::SocketAddr| {
        cluster.nsqds().iter().map(|n| f(n).to_string()).collect()
    };
    NsqConfig {
        nsqd: addrs(msgstream_nsq_testd::TestServer::tcp_addr),
        nsqd_http: addrs(msgstream_nsq_testd::TestServer::http_addr),
        lookupd: vec![cluster.lookupd_http_addr().to_string()],
        extensions: Extensions::Partitions,
        cluster: true,
        partitions: 2,
        partition,
        max_in_flight: 64,
        ..NsqConfig::default()
    }
}

/// A standalone Youzan nsqd has no consume offsets (it refuses `virtual_queue:`, transcript
/// Y8): seek, readers and the latest id are `Unsupported`, declared so; a new subscription
/// starts without an offset and, as the topic's first channel, gets what was published
/// before it (Y8 63); order is best effort (a closed connection's messages come back in no
/// fixed order, Y8 127-129).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standalone_partitions_have_no_offsets() {
    // The standalone server of this mode (an external cluster is no standalone nsqd).
    let server = common::server(msgstream_nsq_testd::Extensions::Partitions).await;
    let client = NsqClient::connect(NsqConfig {
        nsqd: vec![server.tcp_addr().to_string()],
        nsqd_http: vec![server.http_addr().to_string()],
        extensions: Extensions::Partitions,
        ..NsqConfig::default()
    })
    .await
    .expect("client");
    let caps = client.capabilities();
    assert_eq!(
        (caps.seek, caps.readers, caps.latest_id, caps.ordering),
        (false, false, false, msgstream::mq::Ordering::BestEffort)
    );
    let topic = common::topic("standalone");
    let producer = client.create_producer(&topic).await.expect("producer");
    let sent = producer
        .send(ProducerMessage::new("before"))
        .await
        .expect("send");
    let mut consumer = client
        .subscribe(
            ConsumerOptions::new(&topic, "g")
                .with_initial_position(msgstream::mq::InitialPosition::Earliest),
        )
        .await
        .expect("a new subscription at Earliest, without an offset");
    let first = recv(&mut consumer).await;
    assert_eq!((&first.id, first.payload.as_ref()), (&sent, &b"before"[..]));
    consumer.ack(&first).await.expect("ack");
    assert!(matches!(
        consumer.latest_message_id().await,
        Err(Error::Unsupported { .. })
    ));
    assert!(matches!(
        consumer.seek(&first.id, true).await,
        Err(Error::Unsupported { .. })
    ));
    let reader = client
        .create_reader(ReaderOptions {
            topic: topic.clone(),
            start: client.earliest_message_id(),
            inclusive: true,
        })
        .await;
    assert!(matches!(reader, Err(Error::Unsupported { .. })));
    consumer.close().await;
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
    let topic = common::topic("t");
    let producer = client.create_producer(&topic).await.expect("producer");
    producer
        .send(ProducerMessage::new(&b"before"[..]))
        .await
        .expect("send");
    let mut first = client
        .subscribe(ConsumerOptions::new(&topic, "first"))
        .await
        .expect("first");
    assert_eq!(
        recv(&mut first).await.payload.as_ref(),
        b"before",
        "the first channel gets the backlog"
    );
    let mut second = client
        .subscribe(ConsumerOptions::new(&topic, "second"))
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
        let topic = common::topic("listed");
        let producer = client.create_producer(&topic).await.expect("producer");
        let mut consumer = client
            .subscribe(ConsumerOptions::new(&topic, "g"))
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
            listed = lag(client.list_subscriptions(&topic).await.expect("list"));
            if listed == [("g".to_string(), Some(2))] {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(listed, [("g".to_string(), Some(2))]);
        assert!(client.list_topics().await.expect("topics").contains(&topic));
        let wrong_len = vec![0u8; ids[0].as_bytes().len() + 1];
        assert!(matches!(
            client.message_id_from_bytes(&wrong_len),
            Err(Error::Decode(_))
        ));
        assert!(matches!(
            client
                .list_subscriptions(&common::topic("never-created"))
                .await,
            Err(Error::UnknownChannel { .. })
        ));
        consumer.close().await;
    }
}

/// nsqd's channel `depth` leaves out deferred messages (here one published with `defer`, as
/// another client may): the subscription's lag still counts it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deferred_messages_count_in_the_lag() {
    let server = common::server(msgstream_nsq_testd::Extensions::None).await;
    let client = NsqClient::connect(NsqConfig {
        nsqd: vec![server.tcp_addr().to_string()],
        nsqd_http: vec![server.http_addr().to_string()],
        ..NsqConfig::default()
    })
    .await
    .expect("client");
    let topic = common::topic("deferred");
    let consumer = client
        .subscribe(ConsumerOptions::new(&topic, "g"))
        .await
        .expect("sub");
    let (status, _) = common::http(
        server.http_addr(),
        "POST",
        &format!("/pub?topic={topic}&defer=60000"),
        b"later",
    )
    .await;
    assert_eq!(status, 200);
    let listed: Vec<(String, Option<u64>)> = client
        .list_subscriptions(&topic)
        .await
        .expect("list")
        .into_iter()
        .map(|s| (s.name, s.lag))
        .collect();
    assert_eq!(listed, [("g".to_string(), Some(1))]);
    drop(consumer);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_http_the_admin_parts_are_unsupported() {
    let server = common::server(msgstream_nsq_testd::Extensions::None).await;
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
    let server = common::server(msgstream_nsq_testd::Extensions::None).await;
    let topic = common::topic("raw");
    let client = NsqClient::connect(NsqConfig {
        nsqd: vec![server.tcp_addr().to_string()],
        ..NsqConfig::default()
    })
    .await
    .expect("client");
    let mut consumer = client
        .subscribe(ConsumerOptions::new(&topic, "g"))
        .await
        .expect("sub");
    let raw = msgstream_nsq::Producer::new(msgstream_nsq::ProducerConfig {
        nsqd: vec![server.tcp_addr().to_string()],
        ..msgstream_nsq::ProducerConfig::default()
    })
    .expect("raw producer");
    raw.publish(&topic, b"\xffMS1\0\0")
        .await
        .expect("pub broken");
    raw.publish(&topic, b"from pynsq")
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

/// A seek that fails once the old subscription was closed (here: another process still
/// subscribed to the channel, so nsqd would share it) says the consumer may have moved
/// (`SeekMoved`), and the consumer reads on: nothing lost, old deliveries stale.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixture_a_seek_failing_after_the_subscription_closed_reads_on() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    if common::external().is_some() {
        panic!("a fixture test: run it without MSGSTREAM_NSQ_NSQD or skip it with `-- --skip fixture_`");
    }
    let cluster = TestCluster::start(ClusterOptions::default())
        .await
        .expect("test cluster");
    // Partition 0 is led by the first node.
    let server = &cluster.nsqds()[0];
    let client = NsqClient::connect(cluster_config(&cluster, 0))
        .await
        .expect("client");
    let topic = common::topic("seek-fails");
    let producer = client.create_producer(&topic).await.expect("producer");
    let mut consumer = client
        .subscribe(ConsumerOptions::new(&topic, "g"))
        .await
        .expect("sub");
    for body in ["a", "b"] {
        producer
            .send(ProducerMessage::new(body))
            .await
            .expect("send");
    }
    let first = recv(&mut consumer).await;
    // Another process's connection on the channel, taking nothing (no RDY).
    let mut other = tokio::net::TcpStream::connect(server.tcp_addr())
        .await
        .expect("connect");
    other
        .write_all(format!("  V2SUB {topic} g 0\n").as_bytes())
        .await
        .expect("SUB");
    let mut ok = [0u8; 10];
    other.read_exact(&mut ok).await.expect("SUB answered");
    assert_eq!(&ok[8..], b"OK");
    match consumer.seek(&first.id, false).await {
        Err(Error::SeekMoved { channel, .. }) => assert_eq!(channel, topic),
        other => panic!("SeekMoved expected, got {other:?}"),
    }
    drop(other);
    assert!(matches!(
        consumer.ack(&first).await,
        Err(Error::StaleDelivery(_))
    ));
    let mut got = Vec::new();
    while got.len() < 2 {
        let m = recv(&mut consumer).await;
        consumer.ack(&m).await.expect("ack");
        got.push(String::from_utf8(m.payload.to_vec()).expect("utf-8"));
    }
    assert_eq!(got, ["a", "b"], "read on where the channel stood");
    consumer.close().await;
}

/// A consumer with RDY to spare gets each message as it comes: the client asks nsqd not to
/// buffer its deliveries (nsqd's default flush every 250 ms made each round trip that long).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_trips_do_not_wait_for_nsqds_output_buffer() {
    let harness = upstream().await;
    let client = harness.client();
    let topic = common::topic("round-trip");
    let producer = client.create_producer(&topic).await.expect("producer");
    let mut consumer = client
        .subscribe(ConsumerOptions::new(&topic, "g"))
        .await
        .expect("sub");
    let started = std::time::Instant::now();
    for i in 0..5 {
        producer
            .send(ProducerMessage::new(format!("{i}")))
            .await
            .expect("send");
        let got = recv(&mut consumer).await;
        assert_eq!(got.payload.as_ref(), format!("{i}").as_bytes());
        consumer.ack(&got).await.expect("ack");
    }
    let took = started.elapsed();
    assert!(
        took < Duration::from_millis(500),
        "5 round trips took {took:?}"
    );
    consumer.close().await;
}

/// Foreign bodies carry no stamp: each is known by its NSQ id, so several in flight are acked
/// one by one and the unacked ones come back to the next consumer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_bodies_in_flight_are_acked_one_by_one() {
    let server = common::server(msgstream_nsq_testd::Extensions::None).await;
    let topic = common::topic("foreign");
    let client = NsqClient::connect(NsqConfig {
        nsqd: vec![server.tcp_addr().to_string()],
        max_in_flight: 8,
        ..NsqConfig::default()
    })
    .await
    .expect("client");
    let mut consumer = client
        .subscribe(ConsumerOptions::new(&topic, "g"))
        .await
        .expect("sub");
    let raw = msgstream_nsq::Producer::new(msgstream_nsq::ProducerConfig {
        nsqd: vec![server.tcp_addr().to_string()],
        ..msgstream_nsq::ProducerConfig::default()
    })
    .expect("raw producer");
    for body in ["one", "two", "three"] {
        raw.publish(&topic, body.as_bytes()).await.expect("pub");
    }
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(recv(&mut consumer).await);
    }
    let ids: std::collections::BTreeSet<_> = held.iter().map(|m| m.id.clone()).collect();
    assert_eq!(ids.len(), 3, "each foreign body has an id of its own");
    let two = held
        .iter()
        .find(|m| m.payload.as_ref() == b"two")
        .expect("two");
    consumer.ack(two).await.expect("ack two");
    consumer.close().await;
    let mut again = client
        .subscribe(ConsumerOptions::new(&topic, "g"))
        .await
        .expect("re-subscribe");
    let mut back = Vec::new();
    for _ in 0..2 {
        let m = recv(&mut again).await;
        back.push(String::from_utf8(m.payload.to_vec()).expect("utf-8"));
        again.ack(&m).await.expect("ack");
    }
    back.sort();
    assert_eq!(
        back,
        ["one", "three"],
        "the unacked come back, the acked does not"
    );
    again.close().await;
    raw.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latest_id_is_the_last_delivered_one_and_seeks_exactly() {
    let harness = offsets().await;
    let client = harness.client();
    assert!(client.capabilities().latest_id);
    let topic = common::topic("newest");
    let mut consumer = client
        .subscribe(ConsumerOptions::new(&topic, "g"))
        .await
        .expect("sub");
    assert_eq!(
        consumer.latest_message_id().await.expect("latest"),
        None,
        "an empty partition has no newest message"
    );
    let producer = client.create_producer(&topic).await.expect("producer");
    let mut sent = Vec::new();
    for i in 0..3 {
        let payload = format!("m{i}{}", "x".repeat(i * 7));
        sent.push(
            producer
                .send(ProducerMessage::new(payload))
                .await
                .expect("send"),
        );
    }
    let mut received = Vec::new();
    for _ in 0..3 {
        received.push(recv(&mut consumer).await);
    }
    let latest = consumer
        .latest_message_id()
        .await
        .expect("latest")
        .expect("some");
    assert_eq!(
        latest, received[2].id,
        "the id the consumer got for the last"
    );
    assert_eq!(latest, sent[2], "and the one the producer got");
    consumer.seek(&latest, false).await.expect("seek past it");
    producer
        .send(ProducerMessage::new(&b"after"[..]))
        .await
        .expect("send");
    let next = recv(&mut consumer).await;
    assert_eq!(
        next.payload.as_ref(),
        b"after",
        "nothing at or before the latest"
    );
    assert_eq!(
        consumer.latest_message_id().await.expect("latest"),
        Some(next.id.clone()),
        "the newest moved on"
    );
    let mut reader = client
        .create_reader(ReaderOptions {
            topic: topic.clone(),
            start: latest.clone(),
            inclusive: true,
        })
        .await
        .expect("reader");
    let read = tokio::time::timeout(Duration::from_secs(15), reader.next())
        .await
        .expect("in time")
        .expect("next");
    assert_eq!(
        (read.id, read.payload),
        (latest, received[2].payload.clone())
    );
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(15), reader.next())
            .await
            .expect("in time")
            .expect("next")
            .payload
            .as_ref(),
        b"after"
    );
    assert!(!reader.has_next().await.expect("has_next"), "nothing more");
    reader.close().await;
    consumer.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latest_id_while_publishing_is_always_a_real_message() {
    // A publish racing between `/stats` and `/message/get` must not pair one message's offset
    // with a later end: every answer is the id of a message the consumer gets.
    let harness = offsets().await;
    let client = harness.client();
    let topic = common::topic("racing");
    let mut consumer = client
        .subscribe(ConsumerOptions::new(&topic, "g"))
        .await
        .expect("sub");
    let producer = client.create_producer(&topic).await.expect("producer");
    // Halfway, the publisher waits until the loop below had two answers: the asking overlaps
    // the publishing however the two tasks are scheduled.
    let (asked_tx, asked_rx) = tokio::sync::oneshot::channel::<()>();
    let mut asked_rx = Some(asked_rx);
    let publishing = tokio::spawn(async move {
        for i in 0..200 {
            if i == 100 {
                if let Some(asked) = asked_rx.take() {
                    let _ = asked.await;
                }
            }
            producer
                .send(ProducerMessage::new(format!(
                    "{i:0>width$}",
                    width = i % 13 + 1
                )))
                .await
                .expect("send");
        }
    });
    let mut answers = Vec::new();
    let mut asked_tx = Some(asked_tx);
    while !publishing.is_finished() {
        // A round that a publish raced every time it retried is a transient error (the caller
        // asks again): not an answer, and never a wrong one.
        match consumer.latest_message_id().await {
            Ok(Some(id)) => answers.push(id),
            Ok(None) => {}
            Err(e) if e.is_transient() => {}
            Err(e) => panic!("latest: {e}"),
        }
        if answers.len() == 2 {
            if let Some(tx) = asked_tx.take() {
                let _ = tx.send(());
            }
        }
    }
    publishing.await.expect("publisher");
    answers.push(
        consumer
            .latest_message_id()
            .await
            .expect("latest")
            .expect("some"),
    );
    let mut ids = std::collections::HashSet::new();
    for _ in 0..200 {
        let message = recv(&mut consumer).await;
        consumer.ack(&message).await.expect("ack");
        ids.insert(message.id);
    }
    assert!(answers.len() > 1, "asked while publishing");
    for answer in &answers {
        assert!(ids.contains(answer), "{answer:?} is no message's id");
    }
    assert!(answers.windows(2).all(|w| w[0] <= w[1]), "never goes back");
    consumer.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixture_readers_find_their_partition_through_lookupd() {
    // Partition 0 of the topic is led by node 0, partition 1 by node 1; the client knows node 0
    // only, as a TCP address, and has no nsqd_http: the reader of partition 1 must reach node
    // 1's TCP and HTTP through lookupd. (A cluster of its own: fixture.)
    if common::external().is_some() {
        panic!("a fixture test: run it without MSGSTREAM_NSQ_NSQD or skip it with `-- --skip fixture_`");
    }
    let cluster = TestCluster::start(ClusterOptions::default())
        .await
        .expect("test cluster");
    let node0 = &cluster.nsqds()[0];
    let client = NsqClient::connect(NsqConfig {
        nsqd: vec![node0.tcp_addr().to_string()],
        nsqd_http: Vec::new(),
        ..cluster_config(&cluster, 1)
    })
    .await
    .expect("client");
    let caps = client.capabilities();
    assert_eq!(
        (caps.readers, caps.seek, caps.latest_id),
        (true, false, false),
        "lookupd names the reader's nsqd; seek and latest still need nsqd_http"
    );
    let producer = client.create_producer("routed").await.expect("producer");
    let (status, _) = common::http(
        node0.http_addr(),
        "POST",
        "/pub?topic=routed&partition=0",
        b"decoy",
    )
    .await;
    assert_eq!(status, 200, "a message in the other partition");
    let mut ids = Vec::new();
    for i in 0..3 {
        ids.push(
            producer
                .send(ProducerMessage::new(format!("r{i}")))
                .await
                .expect("send"),
        );
    }
    let mut reader = client
        .create_reader(ReaderOptions {
            topic: "routed".into(),
            start: client.earliest_message_id(),
            inclusive: true,
        })
        .await
        .expect("reader");
    for (i, id) in ids.iter().enumerate() {
        assert!(reader.has_next().await.expect("has_next"));
        let message = tokio::time::timeout(Duration::from_secs(15), reader.next())
            .await
            .expect("in time")
            .expect("next");
        assert_eq!(
            (&message.id, message.payload.as_ref()),
            (id, format!("r{i}").as_bytes())
        );
    }
    assert!(
        !reader.has_next().await.expect("has_next"),
        "read to the end"
    );
    reader.seek(&ids[0], false).await.expect("seek");
    let message = tokio::time::timeout(Duration::from_secs(15), reader.next())
        .await
        .expect("in time")
        .expect("next");
    assert_eq!(message.payload.as_ref(), b"r1");
    reader.close().await;
    let consumer = client
        .subscribe(ConsumerOptions::new("routed", "g"))
        .await
        .expect("sub");
    assert!(matches!(
        consumer.latest_message_id().await,
        Err(Error::Unsupported { .. })
    ));
    let missing = client
        .create_reader(ReaderOptions {
            topic: "nowhere".into(),
            start: client.earliest_message_id(),
            inclusive: true,
        })
        .await;
    assert!(
        missing.is_ok(),
        "the reader creates its topic, then finds it"
    );
}

/// A server whose message timeout is short (1 s here; nsqd's `--msg-timeout`) still never
/// times out a message the adapter holds unacked: the adapter TOUCHes held messages at least
/// three times per timeout of their connection (at a fixed 15 s it let this one time out and
/// come again behind newer ones). Holding it for 3.5 timeouts is the point of the test, so it
/// waits that long; then the server must report it still in flight and never timed out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixture_held_messages_outlive_a_short_server_msg_timeout() {
    let server = common::fixture_server_with(msgstream_nsq_testd::Options {
        extensions: msgstream_nsq_testd::Extensions::Partitions,
        msg_timeout: Duration::from_secs(1),
        ..msgstream_nsq_testd::Options::default()
    })
    .await;
    let client = NsqClient::connect(NsqConfig {
        nsqd: vec![server.tcp_addr().to_string()],
        nsqd_http: vec![server.http_addr().to_string()],
        extensions: Extensions::Partitions,
        ..NsqConfig::default()
    })
    .await
    .expect("client");
    let topic = common::topic("held");
    let producer = client.create_producer(&topic).await.expect("producer");
    producer
        .send(ProducerMessage::new(&b"held"[..]))
        .await
        .expect("send");
    let mut consumer = client
        .subscribe(ConsumerOptions::new(&topic, "holder"))
        .await
        .expect("subscribe");
    let held = recv(&mut consumer).await;
    tokio::time::sleep(Duration::from_millis(3500)).await;
    let stats = common::channel_stats(&server, &topic, Some(0), "holder").await;
    assert_eq!(stats["timeout_count"], 0, "never timed out: {stats}");
    assert_eq!(stats["in_flight_count"], 1, "still held: {stats}");
    consumer.ack(&held).await.expect("ack");
    consumer.close().await;
    client.close().await;
}

/// Where a test's `tracing` output goes.
#[derive(Clone, Default)]
struct Logs(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    fn count(&self, needle: &str) -> usize {
        let text =
            String::from_utf8_lossy(&self.0.lock().unwrap_or_else(|p| p.into_inner())).into_owned();
        text.matches(needle).count()
    }
}

/// Collects the WARN logs of the current thread's tests while the guard lives.
fn capture_warnings() -> (Logs, tracing::subscriber::DefaultGuard) {
    let logs = Logs::default();
    let writer = {
        let logs = logs.clone();
        move || logs.clone()
    };
    let _logging = tracing::subscriber::set_default(
        tracing_subscriber::fmt()
            .with_writer(writer)
            .with_max_level(tracing::Level::WARN)
            .with_ansi(false)
            .finish(),
    );
    (logs, _logging)
}

const STARVED: &str = "holds max_in_flight (2) unacked messages";

/// A consumer of `topic` with `max_in_flight` 2 that has received two of three messages.
async fn holding_two(
    server: &common::Server,
    topic: &str,
) -> (NsqClient, Box<dyn Consumer>, Message) {
    let client = NsqClient::connect(NsqConfig {
        nsqd: vec![server.tcp_addr().to_string()],
        nsqd_http: vec![server.http_addr().to_string()],
        max_in_flight: 2,
        ..NsqConfig::default()
    })
    .await
    .expect("client");
    let mut consumer = client
        .subscribe(ConsumerOptions::new(topic, "c"))
        .await
        .expect("subscribe");
    let producer = client.create_producer(topic).await.expect("producer");
    for body in ["one", "two", "three"] {
        producer
            .send(ProducerMessage::new(body.as_bytes()))
            .await
            .expect("send");
    }
    let first = recv(&mut consumer).await;
    let _second = recv(&mut consumer).await;
    (client, consumer, first)
}

/// A subscription holding `max_in_flight` unacked messages gets nothing more from nsqd (the
/// streams ack only once a pack was handed over, so a channel that does not tick within that
/// many messages stalls a timetick stream): once it has waited 2 s so, the consumer says so,
/// once per such stretch, and an ack lets the next message through.
#[tokio::test]
async fn a_subscription_holding_max_in_flight_unacked_says_it_waits() {
    let (logs, _logging) = capture_warnings();
    let server = common::server(msgstream_nsq_testd::Extensions::None).await;
    let topic = common::topic("starved");
    let (client, mut consumer, first) = holding_two(&server, &topic).await;
    assert_eq!(logs.count(STARVED), 0, "not starved before the limit");
    // Bounded waits for what must not come: nsqd sends nothing while two are held.
    let third = tokio::time::timeout(Duration::from_millis(2500), consumer.recv()).await;
    assert!(third.is_err(), "a third message while two are unacked");
    assert_eq!(logs.count(STARVED), 1, "said after 2 s of waiting");
    let third = tokio::time::timeout(Duration::from_millis(300), consumer.recv()).await;
    assert!(third.is_err(), "a third message while two are unacked");
    assert_eq!(logs.count(STARVED), 1, "said once for the stretch");
    consumer.ack(&first).await.expect("ack");
    assert_eq!(recv(&mut consumer).await.payload.as_ref(), b"three");
    consumer.close().await;
    client.close().await;
}

/// At the limit for a moment, as a stream is whenever the application is slower than nsqd
/// (it acks each message as the next is taken): no warning. The bench's four channels used to
/// log it many times a second while reading at full speed.
#[tokio::test]
async fn a_brief_wait_at_max_in_flight_says_nothing() {
    let (logs, _logging) = capture_warnings();
    let server = common::server(msgstream_nsq_testd::Extensions::None).await;
    let topic = common::topic("at-the-limit");
    let (client, mut consumer, first) = holding_two(&server, &topic).await;
    let acker = consumer.acker();
    let ack = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        acker.ack(&first).await
    });
    assert_eq!(recv(&mut consumer).await.payload.as_ref(), b"three");
    ack.await.expect("ack task").expect("ack");
    assert_eq!(logs.count(STARVED), 0, "{STARVED}: not for a brief wait");
    consumer.close().await;
    client.close().await;
}

/// Unix milliseconds now.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as u64
}

/// Publishes a timetick of `ts` and returns its id.
async fn publish_tick(client: &NsqClient, topic: &str, ts: u64) -> msgstream::mq::MessageId {
    let producer = client.create_producer(topic).await.expect("producer");
    let tick = msgstream::msg::TsMsg::time_tick(ts).encode();
    let ids = producer
        .send_batch(vec![ProducerMessage::new(tick)])
        .await
        .expect("publish");
    ids[0].clone()
}

/// Seeking by time on a cluster, timestamps being hybrid ones from this machine's clock (slack
/// 0: the test server stores with the same clock). The nsqds index whole seconds; the core's
/// forward scan makes the answer exact within one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_seeks_by_hybrid_timestamp() {
    use msgstream::mq::time::hybrid_from_unix_ms;
    use msgstream::mq::{InitialPosition, TimePosition};
    let cluster = TestCluster::start(ClusterOptions::default())
        .await
        .expect("test cluster");
    let client = NsqClient::connect(NsqConfig {
        timestamps: msgstream::mq::Timestamps::Hybrid { clock_slack_ms: 0 },
        ..cluster_config(&cluster, 0)
    })
    .await
    .expect("client");
    assert!(client.capabilities().seek_time);
    let topic = common::topic("timed");
    let first_ts = hybrid_from_unix_ms(now_ms());
    let first = publish_tick(&client, &topic, first_ts).await;
    // The next whole second, so that the nsqd stores the next two in a later second.
    let into = now_ms() % 1000;
    tokio::time::sleep(Duration::from_millis(1000 - into + 1)).await;
    let second_ts = hybrid_from_unix_ms(now_ms());
    let second = publish_tick(&client, &topic, second_ts).await;
    let third = publish_tick(&client, &topic, second_ts + 5).await;

    let at = |id: &msgstream::mq::MessageId, inclusive| TimePosition {
        id: id.clone(),
        inclusive,
    };
    for (ts, want) in [
        (first_ts - 1, at(&first, true)),
        (first_ts, at(&first, true)),
        (first_ts + 1, at(&second, true)),
        (second_ts, at(&second, true)),
        (second_ts + 1, at(&third, true)),
        (second_ts + 5, at(&third, true)),
        (second_ts + 6, at(&third, false)),
    ] {
        assert_eq!(
            client.message_id_at_time(&topic, ts).await.expect("search"),
            want,
            "time {ts}"
        );
    }

    let mut options = ConsumerOptions::new(&topic, "from-second");
    options.initial_position = InitialPosition::Timestamp(second_ts);
    let mut consumer = client.subscribe(options).await.expect("subscribe");
    let message = common::recv_mq(&mut consumer).await;
    assert_eq!(message.id, second);
    consumer.close().await;
    client.close().await;
}

/// With opaque timestamps (the default) the streams' timestamps say nothing about the nsqds'
/// clocks: seeking by time is declared unsupported and refused so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opaque_timestamps_cannot_be_searched() {
    let cluster = TestCluster::start(ClusterOptions::default())
        .await
        .expect("test cluster");
    let client = NsqClient::connect(cluster_config(&cluster, 0))
        .await
        .expect("client");
    assert!(!client.capabilities().seek_time);
    let topic = common::topic("opaque");
    assert!(matches!(
        client.message_id_at_time(&topic, 7).await,
        Err(Error::Unsupported { .. })
    ));
    let mut options = ConsumerOptions::new(&topic, "s");
    options.initial_position = msgstream::mq::InitialPosition::Timestamp(7);
    assert!(matches!(
        client.subscribe(options).await.err(),
        Some(Error::Unsupported { .. })
    ));
    client.close().await;
}

/// Subscribes `options`, waiting while a dropped consumer's lease is still held by the task
/// that releases its spool (at most `common::within`'s wait).
async fn subscribe_once_free(client: &NsqClient, options: &ConsumerOptions) -> Box<dyn Consumer> {
    common::within("the subscription freed", async {
        loop {
            match client.subscribe(options.clone()).await {
                Ok(consumer) => break consumer,
                Err(Error::SubscriptionBusy { .. }) => tokio::task::yield_now().await,
                Err(e) => panic!("subscribe: {e}"),
            }
        }
    })
    .await
}

/// Each kind of consumer owns its subscription's lease: dropped without `close` (a task that
/// panicked, a stream dropped mid-way), it frees the subscription for the next consumer and
/// for deleting it. A plain or ordered consumer frees it as it is dropped; a spooled one once
/// its spool file is released, on the task the drop leaves behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_dropped_without_close_frees_its_subscription() {
    let cluster = TestCluster::start(ClusterOptions::default())
        .await
        .expect("test cluster");
    let with_offsets = NsqClient::connect(cluster_config(&cluster, 0))
        .await
        .expect("client");
    let upstream = common::server(msgstream_nsq_testd::Extensions::None).await;
    let spool = tempfile::tempdir().expect("tempdir");
    let spooling = NsqClient::connect(NsqConfig {
        nsqd: vec![upstream.tcp_addr().to_string()],
        nsqd_http: vec![upstream.http_addr().to_string()],
        spool_dir: spool.path().to_path_buf(),
        ..NsqConfig::default()
    })
    .await
    .expect("client");
    for (kind, client, ordered) in [
        ("plain", &with_offsets, false),
        ("ordered", &with_offsets, true),
        ("spooled", &spooling, true),
    ] {
        let topic = common::topic("dropped");
        let mut options = ConsumerOptions::new(&topic, "sub");
        options.ordered = ordered;
        let consumer = client.subscribe(options.clone()).await.expect(kind);
        assert!(
            matches!(
                client.subscribe(options.clone()).await,
                Err(Error::SubscriptionBusy { .. })
            ),
            "{kind}: busy while the first is live"
        );
        drop(consumer);
        let mut next = if kind == "spooled" {
            subscribe_once_free(client, &options).await
        } else {
            client
                .subscribe(options.clone())
                .await
                .unwrap_or_else(|e| panic!("{kind}: free as soon as dropped: {e}"))
        };
        next.close().await;
        client
            .delete_subscription(&topic, "sub")
            .await
            .unwrap_or_else(|e| panic!("{kind}: deletable after close: {e}"));
    }
    with_offsets.close().await;
    spooling.close().await;
}
