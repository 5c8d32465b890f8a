//! Failover on a cluster of two brokers and two name servers.
//!
//! - A broker killed mid-produce: a producer of a topic on both brokers moves to the survivor
//!   within each send; every acknowledged message is consumed, each queue in send order.
//! - A name server killed: routes come from the other one (the restarted broker is known to
//!   that one only).
//! - A channel's broker killed mid-consume and restarted: a channel is one queue on one broker
//!   (strict order), so it does not move; sends fail (transiently) while its broker is down, and
//!   afterwards the consumer resumes where it was and a new one from the committed offset.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use msgstream::mq::{Client, ConsumerOptions, ProducerMessage};
use msgstream::testkit::within;
use msgstream_rocketmq::namespace::Namespace;
use msgstream_rocketmq::remoting::RemotingOptions;
use msgstream_rocketmq::{
    Admin, ConnectionConfig, ConsumeFrom, ConsumeResult, ConsumerOptions as LiteOptions,
    LitePullConsumer, MessageQueue, OutgoingMessage, Producer, QueueSelector, RocketMqClient,
    RocketMqConfig,
};
use tokio::sync::watch;

/// Short timeouts, so that failures are found and retried quickly.
fn connection() -> ConnectionConfig {
    ConnectionConfig {
        heartbeat_interval_ms: 1000,
        probe_timeout_ms: 1000,
        reconnect_min_backoff_ms: 50,
        reconnect_max_backoff_ms: 500,
        ..ConnectionConfig::default()
    }
}

fn config(cluster: &support::Cluster) -> RocketMqConfig {
    RocketMqConfig {
        send_timeout_ms: 2000,
        connection: connection(),
        ..cluster.config()
    }
}

/// Messages acknowledged before the kill, and sent after it.
const BEFORE: usize = 20;
const AFTER: usize = 30;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_and_name_server_loss_mid_produce() {
    let mut cluster = support::Cluster::start_many(2, 2);
    let admin = Admin::connect_with(
        cluster.name_servers.clone(),
        Duration::from_secs(2),
        RemotingOptions::from(&connection()),
    )
    .expect("admin");
    let topic = support::unique("failover").replace('.', "_");
    admin.create_topic(&topic, 2).await.expect("topic");
    let route = admin.name_servers().refresh(&topic).await.expect("route");
    assert_eq!(route.write_queues.len(), 4, "{route:?}");

    let (progress, mut acked_so_far) = watch::channel(0);
    let (killed, killed_rx) = watch::channel(false);
    let producer = Producer::new(admin.clone(), "p", Namespace::default(), 2);
    let sender_topic = topic.clone();
    // Sends until AFTER messages were sent after the kill; every send must succeed (it moves
    // to the other broker within the send).
    let sender = tokio::spawn(async move {
        let (mut acked, mut after) = (Vec::new(), 0);
        for i in 0.. {
            let after_kill = *killed_rx.borrow();
            let message = OutgoingMessage::new(&sender_topic, i.to_string());
            let sent = producer
                .send(&message, &QueueSelector::RoundRobin)
                .await
                .unwrap_or_else(|e| panic!("send {i} did not fail over: {e:?}"));
            acked.push((sent.queue, sent.queue_offset, i, after_kill));
            progress.send_replace(i + 1);
            after += usize::from(after_kill);
            if after == AFTER {
                break;
            }
        }
        acked
    });
    within("the first sends", acked_so_far.wait_for(|n| *n >= BEFORE))
        .await
        .expect("sender running");
    tokio::task::block_in_place(|| cluster.kill_broker(0));
    killed.send_replace(true);
    let acked = within("the sends after the kill", sender)
        .await
        .expect("sender");
    let survivor = support::broker_name(1);
    for (queue, _, i, _) in acked.iter().filter(|m| m.3) {
        assert_eq!(queue.broker, survivor, "message {i} sent after the kill");
    }

    // Name server 0 goes; broker-a comes back registered with name server 1 only.
    tokio::task::block_in_place(|| {
        cluster.kill_name_server(0);
        cluster.start_broker(0);
    });
    let route = within("a route from the other name server", async {
        loop {
            match admin.name_servers().refresh(&topic).await {
                Ok(route) if route.masters.len() == 2 => return route,
                Ok(_) => {}
                Err(e) => assert!(e.is_transient(), "route: {e:?}"),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;

    let consumer = LitePullConsumer::new(
        &admin,
        Namespace::default(),
        LiteOptions {
            consume_from: ConsumeFrom::First,
            long_poll: Duration::from_millis(500),
            request_timeout: Duration::from_secs(2),
            ..LiteOptions::new(support::unique("failover-g"))
        },
    )
    .expect("consumer");
    consumer.assign(route.read_queues.clone()).expect("assign");
    consumer.start().await.expect("start");
    let mut stored: BTreeMap<MessageQueue, BTreeMap<i64, usize>> = BTreeMap::new();
    within("every acknowledged message", async {
        while !acked
            .iter()
            .all(|(q, o, _, _)| stored.get(q).is_some_and(|s| s.contains_key(o)))
        {
            let Some(r) = consumer.poll(Duration::from_secs(1)).await.expect("poll") else {
                continue;
            };
            for m in &r.messages {
                let i = String::from_utf8_lossy(&m.body).parse().expect("a number");
                stored
                    .entry(r.queue.clone())
                    .or_default()
                    .insert(m.queue_offset, i);
            }
            consumer.ack(&r, ConsumeResult::Success).await.expect("ack");
        }
    })
    .await;
    consumer.shutdown().await.expect("shutdown");
    for (queue, offset, i, _) in &acked {
        assert_eq!(stored[queue].get(offset), Some(i), "{queue} at {offset}");
    }
    for (queue, messages) in &stored {
        let order: Vec<usize> = messages.values().copied().collect();
        assert!(
            order.windows(2).all(|w| w[0] < w[1]),
            "{queue} is out of send order: {order:?}"
        );
    }
}

async fn send_until_acked(producer: &dyn msgstream::mq::Producer, i: usize) {
    within("a send to succeed", async {
        while producer
            .send(ProducerMessage::new(i.to_string()))
            .await
            .is_err()
        {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
}

/// Receives `range` in order (what a consumer resuming where it was gets), acking each.
async fn receive_in_order(
    consumer: &mut dyn msgstream::mq::Consumer,
    range: std::ops::Range<usize>,
) {
    for expected in range {
        let m = within("the next message", consumer.recv())
            .await
            .expect("recv")
            .expect("open");
        let i: usize = String::from_utf8_lossy(&m.payload)
            .parse()
            .expect("a number");
        assert_eq!(i, expected, "resumed at the wrong message");
        within("an ack", async {
            while let Err(e) = consumer.ack(&m).await {
                assert!(e.is_transient(), "ack: {e:?}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn channel_broker_restart_mid_consume() {
    let mut cluster = support::Cluster::start_many(2, 2);
    let client = RocketMqClient::connect(config(&cluster))
        .await
        .expect("connect");
    let channel = support::unique("resume");
    let producer = client.create_producer(&channel).await.expect("producer");
    let route = client
        .admin()
        .name_servers()
        .refresh(&channel.replace('.', "|"))
        .await
        .expect("route");
    let home = route.read_queues[0].broker.clone();
    let home_index = (0..2)
        .find(|i| support::broker_name(*i) == home)
        .expect("one of ours");
    let mut consumer = client
        .subscribe(ConsumerOptions::new(&channel, "g"))
        .await
        .expect("subscribe");
    for i in 0..20 {
        send_until_acked(producer.as_ref(), i).await;
    }
    receive_in_order(consumer.as_mut(), 0..10).await;

    // The consumer's fetch task is long-polling for offset 20 now.
    tokio::task::block_in_place(|| cluster.kill_broker(home_index));
    let refused = within(
        "a send to the dead broker to fail",
        producer.send(ProducerMessage::new("lost")),
    )
    .await;
    assert!(
        refused.as_ref().is_err_and(|e| e.is_transient()),
        "a channel does not move to another broker: {refused:?}"
    );
    tokio::task::block_in_place(|| cluster.start_broker(home_index));
    for i in 20..40 {
        send_until_acked(producer.as_ref(), i).await;
    }
    receive_in_order(consumer.as_mut(), 10..30).await;
    consumer.close().await;

    let mut resumed = client
        .subscribe(ConsumerOptions::new(&channel, "g"))
        .await
        .expect("subscribe again");
    receive_in_order(resumed.as_mut(), 30..40).await;
    resumed.close().await;
    client.close().await;
}
