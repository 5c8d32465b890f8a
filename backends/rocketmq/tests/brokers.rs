//! Two brokers in one cluster: topics are created on every master, sends spread over both and
//! move to the surviving broker when one dies, and a consumer keeps reading the survivor.

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use msgstream::mq::{Client, ProducerMessage};
use msgstream::testkit::within;
use msgstream_rocketmq::namespace::Namespace;
use msgstream_rocketmq::{
    ConsumeFrom, ConsumeResult, ConsumerOptions, LitePullConsumer, MessageQueue, OutgoingMessage,
    Producer, QueueSelector, RocketMqClient,
};

/// A channel is one queue even on a cluster of several brokers: everything produced is
/// consumed, in order.
async fn channel_is_one_queue(cluster: &support::Cluster) {
    let client = RocketMqClient::connect(cluster.config())
        .await
        .expect("connect");
    let channel = support::unique("chan");
    let producer = client.create_producer(&channel).await.expect("producer");
    for i in 0..6 {
        producer
            .send(ProducerMessage::new(format!("{i}")))
            .await
            .expect("send");
    }
    let route = client
        .admin()
        .name_servers()
        .refresh(&channel)
        .await
        .expect("route");
    assert_eq!(route.read_queues.len(), 1, "{route:?}");
    let mut consumer = client
        .subscribe(msgstream::mq::ConsumerOptions::new(&channel, "g"))
        .await
        .expect("subscribe");
    for i in 0..6 {
        let m = within("a message", consumer.recv())
            .await
            .expect("recv")
            .expect("open");
        assert_eq!(m.payload.as_ref(), format!("{i}").as_bytes());
    }
    consumer.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sends_fail_over_to_the_surviving_broker() {
    let mut cluster = support::Cluster::start_with(2);
    channel_is_one_queue(&cluster).await;
    let admin = support::admin_for(&cluster.namesrv);
    let topic = support::unique("two").replace('.', "_");
    admin.create_topic(&topic, 2).await.expect("create on both");
    let route = admin.name_servers().refresh(&topic).await.expect("route");
    assert_eq!(route.masters.len(), 2);
    assert_eq!(route.write_queues.len(), 4);

    let producer = Producer::new(admin.clone(), "p", Namespace::default(), 2);
    let mut used = BTreeSet::new();
    for i in 0..8 {
        let message = OutgoingMessage::new(&topic, format!("before{i}"));
        let sent = producer
            .send(&message, &QueueSelector::RoundRobin)
            .await
            .expect("send");
        used.insert(sent.queue.broker);
    }
    assert_eq!(
        used.len(),
        2,
        "round robin spreads over both brokers: {used:?}"
    );

    tokio::task::block_in_place(|| cluster.kill_broker(0));
    let dead = MessageQueue::new(&topic, support::broker_name(0), 0);
    let pinned = producer
        .send(
            &OutgoingMessage::new(&topic, "pinned"),
            &QueueSelector::Queue(dead),
        )
        .await;
    assert!(
        pinned.is_err_and(|e| e.is_transient()),
        "a send pinned to the dead broker fails"
    );
    for i in 0..8 {
        let message = OutgoingMessage::new(&topic, format!("after{i}"));
        let sent = producer
            .send(&message, &QueueSelector::RoundRobin)
            .await
            .expect("retried on the survivor");
        assert_eq!(sent.queue.broker, support::broker_name(1));
    }

    let consumer = LitePullConsumer::new(
        &admin,
        Namespace::default(),
        ConsumerOptions {
            consume_from: ConsumeFrom::First,
            long_poll: Duration::from_secs(1),
            ..ConsumerOptions::new(support::unique("two-g"))
        },
    )
    .expect("consumer");
    let survivor: Vec<MessageQueue> = route
        .read_queues
        .iter()
        .filter(|q| q.broker == support::broker_name(1))
        .cloned()
        .collect();
    consumer.assign(survivor).expect("assign");
    consumer.start().await.expect("start");
    let mut after = BTreeSet::new();
    within("the survivor's messages", async {
        while after.len() < 8 {
            if let Some(r) = consumer.poll(Duration::from_secs(1)).await.expect("poll") {
                for m in &r.messages {
                    let body = String::from_utf8_lossy(&m.body).into_owned();
                    if body.starts_with("after") {
                        after.insert(body);
                    }
                }
                consumer.ack(&r, ConsumeResult::Success).await.expect("ack");
            }
        }
    })
    .await;
    consumer.shutdown().await.expect("shutdown");
}
