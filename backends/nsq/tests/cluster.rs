//! The mq adapter against a Youzan cluster (`cluster = true`): topics created and deleted
//! through lookupd, publishes and subscriptions routed to the partition's leader, a bounded
//! wait for leaders, a leader change followed. Each test starts a test cluster of its own
//! (`TestCluster`: a lookupd over two coordinator-mode nsqds).

use std::time::{Duration, Instant};

use msgstream::mq::{Client, Consumer, ConsumerOptions, InitialPosition, Message, ProducerMessage};
use msgstream::Error;
use msgstream_nsq::{Extensions, NsqClient, NsqConfig};
use msgstream_nsq_testd::{ClusterOptions, TestCluster};

async fn cluster(leader_delay: Duration) -> TestCluster {
    TestCluster::start(ClusterOptions {
        leader_delay,
        ..ClusterOptions::default()
    })
    .await
    .expect("cluster")
}

/// A cluster client that knows every node (the lookupd says which leads what).
fn config(cluster: &TestCluster, partitions: u32, partition: u32) -> NsqConfig {
    let addrs = |f: fn(&msgstream_nsq_testd::TestServer) -> std::net::SocketAddr| {
        cluster.nsqds().iter().map(|n| f(n).to_string()).collect()
    };
    NsqConfig {
        nsqd: addrs(msgstream_nsq_testd::TestServer::tcp_addr),
        nsqd_http: addrs(msgstream_nsq_testd::TestServer::http_addr),
        lookupd: vec![cluster.lookupd_http_addr().to_string()],
        extensions: Extensions::Partitions,
        cluster: true,
        partitions,
        partition,
        max_in_flight: 16,
        ..NsqConfig::default()
    }
}

/// A cluster client that knows only node 0: everything else it finds through lookupd.
fn config_node0(cluster: &TestCluster, partitions: u32, partition: u32) -> NsqConfig {
    let node0 = &cluster.nsqds()[0];
    NsqConfig {
        nsqd: vec![node0.tcp_addr().to_string()],
        nsqd_http: vec![node0.http_addr().to_string()],
        ..config(cluster, partitions, partition)
    }
}

async fn recv(consumer: &mut Box<dyn Consumer>) -> Message {
    tokio::time::timeout(Duration::from_secs(15), consumer.recv())
        .await
        .expect("a message in time")
        .expect("recv")
        .expect("open")
}

fn earliest(topic: &str, subscription: &str) -> ConsumerOptions {
    ConsumerOptions::new(topic, subscription).with_initial_position(InitialPosition::Earliest)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixture_cluster_topics_are_created_through_lookupd_and_partitions_routed_to_their_leader()
{
    let cluster = cluster(Duration::ZERO).await;
    // Partition 1 lives on node 1, which the config does not name.
    let client = NsqClient::connect(config_node0(&cluster, 2, 1))
        .await
        .expect("client");
    let topic = msgstream::testkit::unique("cl");
    let producer = client.create_producer(&topic).await.expect("producer");
    assert_eq!(cluster.leader_of(&topic, 0), Some(0));
    assert_eq!(cluster.leader_of(&topic, 1), Some(1));
    let mut ids = Vec::new();
    for body in ["a", "b", "c"] {
        ids.push(
            producer
                .send(ProducerMessage::new(body))
                .await
                .expect("publish to partition 1's leader"),
        );
    }
    // A new subscription at Earliest: the cluster's setoffset needs an existing channel, so
    // the client subscribes first and moves the channel before its first RDY.
    let mut consumer = client
        .subscribe(earliest(&topic, "s"))
        .await
        .expect("subscribe");
    for (body, id) in ["a", "b", "c"].into_iter().zip(&ids) {
        let message = recv(&mut consumer).await;
        assert_eq!(
            (message.payload.as_ref(), &message.id),
            (body.as_bytes(), id)
        );
        consumer.ack(&message).await.expect("ack");
    }
    consumer.close().await;
    // Deletes go through lookupd, for every partition.
    client.delete_topic(&topic).await.expect("delete");
    assert_eq!(cluster.leader_of(&topic, 0), None);
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixture_cluster_a_missing_topic_is_unknown_when_the_client_creates_none() {
    let cluster = cluster(Duration::ZERO).await;
    let client = NsqClient::connect(NsqConfig {
        create_topics: false,
        ..config(&cluster, 2, 0)
    })
    .await
    .expect("client");
    let topic = msgstream::testkit::unique("cl");
    match client.create_producer(&topic).await {
        Err(Error::UnknownChannel { channel }) => assert_eq!(channel, topic),
        Err(other) => panic!("UnknownChannel expected, got {other}"),
        Ok(_) => panic!("UnknownChannel expected, got a producer"),
    }
    assert_eq!(cluster.leader_of(&topic, 0), None, "nothing was created");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixture_cluster_a_partition_without_its_leader_yet_is_waited_for() {
    let delay = Duration::from_millis(800);
    let cluster = cluster(delay).await;
    let client = NsqClient::connect(config(&cluster, 2, 0))
        .await
        .expect("client");
    let topic = msgstream::testkit::unique("cl");
    let started = Instant::now();
    let producer = client.create_producer(&topic).await.expect("producer");
    producer
        .send(ProducerMessage::new("x"))
        .await
        .expect("published once the leader serves");
    assert!(started.elapsed() >= delay, "{:?}", started.elapsed());
    let mut consumer = client
        .subscribe(earliest(&topic, "s"))
        .await
        .expect("subscribe");
    assert_eq!(recv(&mut consumer).await.payload.as_ref(), b"x");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixture_cluster_the_leader_wait_ends_in_a_timeout() {
    let cluster = cluster(Duration::from_secs(60)).await;
    let client = NsqClient::connect(NsqConfig {
        leader_wait_ms: 300,
        ..config(&cluster, 2, 0)
    })
    .await
    .expect("client");
    let topic = msgstream::testkit::unique("cl");
    let producer = client.create_producer(&topic).await.expect("producer");
    let started = Instant::now();
    match producer.send(ProducerMessage::new("x")).await {
        Err(Error::Timeout(after)) => assert_eq!(after, Duration::from_millis(300)),
        other => panic!("a timeout expected, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(5));
}

/// A subscription made before the partition has its leader: its SUB is refused
/// (`E_FAILED_ON_NOT_LEADER`) and retried until the leader takes it; `subscribe` returns then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixture_cluster_a_subscription_waits_for_its_leader() {
    let delay = Duration::from_millis(800);
    let cluster = cluster(delay).await;
    let client = NsqClient::connect(config(&cluster, 2, 0))
        .await
        .expect("client");
    let topic = msgstream::testkit::unique("cl");
    let started = Instant::now();
    let mut consumer = client
        .subscribe(earliest(&topic, "s"))
        .await
        .expect("subscribed once the leader serves");
    assert!(started.elapsed() >= delay, "{:?}", started.elapsed());
    let producer = client.create_producer(&topic).await.expect("producer");
    producer
        .send(ProducerMessage::new("x"))
        .await
        .expect("publish");
    assert_eq!(recv(&mut consumer).await.payload.as_ref(), b"x");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixture_cluster_a_subscription_without_a_leader_times_out() {
    let cluster = cluster(Duration::from_secs(60)).await;
    let client = NsqClient::connect(NsqConfig {
        leader_wait_ms: 300,
        ..config(&cluster, 2, 0)
    })
    .await
    .expect("client");
    let topic = msgstream::testkit::unique("cl");
    let started = Instant::now();
    match client.subscribe(earliest(&topic, "s")).await {
        Err(Error::Timeout(after)) => assert_eq!(after, Duration::from_millis(300)),
        Err(other) => panic!("a timeout expected, got {other:?}"),
        Ok(_) => panic!("a timeout expected, got a consumer"),
    }
    assert!(started.elapsed() < Duration::from_secs(5));
    // The subscription is free again.
    match client.subscribe(earliest(&topic, "s")).await {
        Err(Error::Timeout(_)) => {}
        Err(other) => panic!("a timeout expected again, got {other:?}"),
        Ok(_) => panic!("a timeout expected again, got a consumer"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixture_cluster_a_leader_change_is_followed() {
    let cluster = cluster(Duration::ZERO).await;
    let client = NsqClient::connect(NsqConfig {
        replicas: 2,
        ..config(&cluster, 1, 0)
    })
    .await
    .expect("client");
    let topic = msgstream::testkit::unique("cl");
    let producer = client.create_producer(&topic).await.expect("producer");
    let first = producer.send(ProducerMessage::new("m1")).await.expect("m1");
    let mut consumer = client
        .subscribe(earliest(&topic, "s"))
        .await
        .expect("subscribe");
    let message = recv(&mut consumer).await;
    assert_eq!(message.id, first);
    consumer.ack(&message).await.expect("ack");
    // The FIN reached the leader (what is in flight at a failover is delivered again).
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let subscriptions = client.list_subscriptions(&topic).await.expect("list");
        if subscriptions
            .iter()
            .any(|s| s.name == "s" && s.lag == Some(0))
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "m1 still unfinished: {subscriptions:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Node 0 becomes a follower: it refuses with E_FAILED_ON_NOT_LEADER and drops the
    // consumer's connection; both find node 1 through lookupd.
    cluster.move_leader(&topic, 0, 1).expect("failover");
    let second = producer.send(ProducerMessage::new("m2")).await.expect("m2");
    assert!(second > first, "the partition's data moved with it");
    let message = recv(&mut consumer).await;
    assert_eq!(
        (message.payload.as_ref(), &message.id),
        (&b"m2"[..], &second)
    );
    consumer.ack(&message).await.expect("ack");
    consumer.close().await;
    // The subscription's channel is deleted on the leader only (the follower would refuse).
    client
        .delete_subscription(&topic, "s")
        .await
        .expect("delete subscription");
    let subscriptions = client.list_subscriptions(&topic).await.expect("list");
    assert!(
        subscriptions.iter().all(|s| s.name != "s"),
        "{subscriptions:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixture_cluster_new_subscriptions_start_where_asked() {
    let cluster = cluster(Duration::ZERO).await;
    let client = NsqClient::connect(config(&cluster, 2, 1))
        .await
        .expect("client");
    let topic = msgstream::testkit::unique("cl");
    let producer = client.create_producer(&topic).await.expect("producer");
    producer
        .send(ProducerMessage::new("old"))
        .await
        .expect("old");
    // Latest is where the partition ends when `subscribe` is called, however late the
    // consumer reaches the leader.
    let mut latest = client
        .subscribe(
            ConsumerOptions::new(&topic, "latest").with_initial_position(InitialPosition::Latest),
        )
        .await
        .expect("latest");
    producer
        .send(ProducerMessage::new("new"))
        .await
        .expect("new");
    assert_eq!(recv(&mut latest).await.payload.as_ref(), b"new");
    // An ordered subscription keeps its commit point in a channel no client reads, which the
    // cluster creates only by a subscription.
    let mut ordered = client
        .subscribe(earliest(&topic, "ordered").in_order())
        .await
        .expect("ordered");
    for body in ["old", "new"] {
        let message = recv(&mut ordered).await;
        assert_eq!(message.payload.as_ref(), body.as_bytes());
        ordered.ack(&message).await.expect("ack");
    }
    let listed = client.list_subscriptions(&topic).await.expect("list");
    assert!(
        listed
            .iter()
            .any(|s| s.name == "ordered" && s.lag == Some(0)),
        "{listed:?}"
    );
}
