//! The client's reconnects and redeliveries reach the core's OpenTelemetry instruments
//! (`msgstream.reconnects`, `msgstream.redeliveries`).
//! Its own test binary: the instruments bind to the global provider on first use, so the
//! provider must be installed before anything records. It drops the server's connections: a
//! `fixture_` test.

mod common;

use common::*;
use std::time::Duration;

use msgstream::mq::{Client, ConsumerOptions};
use msgstream::testkit::metrics::recorded;
use msgstream_nsq::{Consumer, NsqClient, NsqConfig};
use msgstream_nsq_testd::{Extensions, Options};

/// `msgstream.reconnects` for backend nsq, summed over addresses.
fn reconnects() -> u64 {
    recorded().counter("msgstream.reconnects", "backend", "nsq")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixture_a_reconnect_is_counted() {
    recorded();
    let s = fixture_server(Extensions::None).await;
    let consumer = Consumer::connect(consumer_config(&[&s], "metered", "c"))
        .await
        .expect("consumer");
    assert_eq!(reconnects(), 0, "nothing lost yet");
    s.drop_connections();
    eventually("the consumer reconnected", async || {
        consumer.stats().reconnects >= 1
    })
    .await;
    assert_eq!(reconnects(), consumer.stats().reconnects);
    consumer.stop().await;
}

/// Two messages unacked when the connection drops: upstream nsqd keeps them in flight until
/// their msg_timeout (1 s here) and then queues them behind what came meanwhile. The adapter's
/// consumer gets the newer message first, then both again, each reported
/// (`msgstream.redeliveries` of the channel).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixture_messages_back_after_a_reconnect_are_delivered_and_counted() {
    recorded();
    let s = fixture_server_with(Options {
        msg_timeout: Duration::from_secs(1),
        ..Options::default()
    })
    .await;
    let spool = tempfile::tempdir().expect("tempdir");
    let connect = async || {
        NsqClient::connect(NsqConfig {
            nsqd: vec![s.tcp_addr().to_string()],
            spool_dir: spool.path().to_path_buf(),
            ..NsqConfig::default()
        })
        .await
        .expect("client")
    };
    let client = connect().await;
    let topic = topic("redelivered");
    let mut consumer = client
        .subscribe(ConsumerOptions::new(&topic, "c"))
        .await
        .expect("subscribe");
    let first = publish_mq(&client, &topic, 0, 2).await;
    for id in &first {
        assert_eq!(&recv_mq(&mut consumer).await.id, id);
    }
    s.drop_connections();
    let later = publish_mq(&connect().await, &topic, 2, 1).await;
    let mut got = Vec::new();
    for _ in 0..3 {
        let message = recv_mq(&mut consumer).await;
        consumer.ack(&message).await.expect("ack");
        got.push(message.id);
    }
    assert_eq!(got, [later[0].clone(), first[0].clone(), first[1].clone()]);
    assert_eq!(
        recorded().counter("msgstream.redeliveries", "channel", &topic),
        2
    );
    consumer.close().await;
}
