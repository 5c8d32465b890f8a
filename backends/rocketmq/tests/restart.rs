//! A broker killed and restarted mid-stream: the producer and the consumer recover by
//! themselves, failed sends are reported, and every acknowledged message is consumed.

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use msgstream::mq::{Client, ConsumerOptions, Producer, ProducerMessage};
use msgstream::testkit::{unique, within};
use msgstream_rocketmq::RocketMqClient;

/// Sends `i` until the broker acknowledges it (after a restart the first attempts fail while
/// connections and routes recover); returns how many attempts failed.
async fn send_until_acked(producer: &dyn Producer, i: usize) -> usize {
    let mut failures = 0;
    within("a send to succeed", async {
        while producer
            .send(ProducerMessage::new(i.to_string()))
            .await
            .is_err()
        {
            failures += 1;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    failures
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_restart_mid_stream() {
    let mut cluster = support::Cluster::start();
    let client = RocketMqClient::connect(cluster.config())
        .await
        .expect("connect");
    let topic = unique("restart");
    let producer = client.create_producer(&topic).await.expect("producer");
    let mut consumer = client
        .subscribe(ConsumerOptions::new(&topic, "g"))
        .await
        .expect("sub");
    let receiver = tokio::spawn(async move {
        let mut seen = BTreeSet::new();
        while seen.len() < 40 {
            let Some(m) = consumer.recv().await.expect("recv") else {
                break;
            };
            seen.insert(
                String::from_utf8_lossy(&m.payload)
                    .parse::<usize>()
                    .expect("number"),
            );
            // An ack is durable when it returns; while the broker restarts it fails
            // (transiently) and is simply made again.
            let mut attempts = 0;
            while let Err(e) = consumer.ack(&m).await {
                assert!(e.is_transient() && attempts < 600, "ack: {e:?}");
                attempts += 1;
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
        seen
    });
    let mut acked = BTreeSet::new();
    for i in 0..20 {
        send_until_acked(producer.as_ref(), i).await;
        acked.insert(i);
    }
    tokio::task::block_in_place(|| cluster.kill_broker(0));
    let failed = producer.send(ProducerMessage::new("lost")).await;
    assert!(
        failed.is_err(),
        "a send to a dead broker is reported: {failed:?}"
    );
    tokio::task::block_in_place(|| cluster.start_broker(0));
    for i in 20..40 {
        send_until_acked(producer.as_ref(), i).await;
        acked.insert(i);
    }
    let seen = within("every acknowledged message", receiver)
        .await
        .expect("receiver");
    assert!(
        acked.is_subset(&seen),
        "missing {:?}",
        acked.difference(&seen).collect::<Vec<_>>()
    );
}
