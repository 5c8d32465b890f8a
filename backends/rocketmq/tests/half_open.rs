//! A half-open broker connection: a proxy between the client and the broker stops forwarding
//! without closing (the broker's host gone, a NAT entry dropped). The client's heartbeats find
//! the connections dead within the configured bound, it dials new ones, and the stream goes on
//! with every acknowledged message consumed, in order.

mod support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use msgstream::mq::{Client, Consumer, ConsumerOptions, Producer, ProducerMessage};
use msgstream::testkit::{unique, within};
use msgstream_rocketmq::{ConnectionConfig, RocketMqClient, RocketMqConfig};
use support::proxy::Proxy;

const HEARTBEAT: Duration = Duration::from_millis(500);
const PROBE: Duration = Duration::from_millis(500);

/// Sends `i` until the broker acknowledges it (a send on the black-holed connection times out).
async fn send_until_acked(producer: &dyn Producer, i: usize) {
    within("a send to succeed", async {
        while producer
            .send(ProducerMessage::new(i.to_string()))
            .await
            .is_err()
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
}

/// Receives until every number in `expected` was seen; checks first deliveries come in
/// order and acks each (retrying while the connection is being replaced).
async fn receive(consumer: &mut dyn Consumer, expected: &BTreeSet<usize>, seen: &mut Vec<usize>) {
    within("every acknowledged message", async {
        while !expected.iter().all(|i| seen.contains(i)) {
            let m = consumer.recv().await.expect("recv").expect("open");
            let i: usize = String::from_utf8_lossy(&m.payload)
                .parse()
                .expect("a number");
            if !seen.contains(&i) {
                assert!(
                    seen.last().is_none_or(|last| *last < i),
                    "{i} delivered after {seen:?}"
                );
                seen.push(i);
            }
            while let Err(e) = consumer.ack(&m).await {
                assert!(e.is_transient(), "ack: {e:?}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_half_open_broker_connection_is_replaced_without_loss() {
    // The broker is routed as 127.0.0.2 (where the proxy listens) and listens on 127.0.0.1.
    let cluster = support::Cluster::start_advertised(1, 1, "127.0.0.2");
    let mut proxy = Proxy::start(&cluster.brokers[0], &cluster.broker_listen[0]).await;
    let config = RocketMqConfig {
        send_timeout_ms: 1000,
        connection: ConnectionConfig {
            heartbeat_interval_ms: HEARTBEAT.as_millis() as u64,
            probe_timeout_ms: PROBE.as_millis() as u64,
            reconnect_min_backoff_ms: 50,
            reconnect_max_backoff_ms: 500,
            ..ConnectionConfig::default()
        },
        ..cluster.config()
    };
    let client = RocketMqClient::connect(config).await.expect("connect");
    let topic = unique("half-open");
    let producer = client.create_producer(&topic).await.expect("producer");
    let mut consumer = client
        .subscribe(ConsumerOptions::new(&topic, "g"))
        .await
        .expect("subscribe");
    let mut acked = BTreeSet::new();
    let mut seen = Vec::new();
    for i in 0..10 {
        send_until_acked(producer.as_ref(), i).await;
        acked.insert(i);
    }
    receive(consumer.as_mut(), &acked, &mut seen).await;
    let mut before = 0;
    while let Ok(n) = proxy.accepted.try_recv() {
        before = n;
    }
    assert!(before >= 2, "the producer's and the consumer's connections");

    proxy.black_hole_existing();
    let frozen = Instant::now();
    let sender = async {
        for i in 10..20 {
            send_until_acked(producer.as_ref(), i).await;
            acked.insert(i);
        }
    };
    // Both pools (the client's, the consumer's) must notice and dial anew.
    let bound = HEARTBEAT + PROBE * 2 + Duration::from_secs(2);
    let reconnected = async {
        let mut fresh = Vec::new();
        while fresh.len() < 2 {
            let n = tokio::time::timeout(bound, proxy.accepted.recv())
                .await
                .unwrap_or_else(|_| {
                    panic!(
                        "{} of 2 connections replaced {bound:?} after the black hole",
                        fresh.len()
                    )
                })
                .expect("proxy running");
            fresh.push((n, frozen.elapsed()));
        }
        fresh
    };
    let ((), fresh) = tokio::join!(sender, reconnected);
    let noticed = fresh.iter().map(|(_, at)| *at).max().expect("two");
    eprintln!("half-open connections replaced after {noticed:?} (bound {bound:?})");
    assert!(fresh.iter().all(|(n, _)| *n > before), "{fresh:?} {before}");
    assert!(noticed <= bound, "noticed after {noticed:?}");
    receive(consumer.as_mut(), &acked, &mut seen).await;
    consumer.close().await;
    client.close().await;
}
