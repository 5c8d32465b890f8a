//! Consumers that ask for order (`ConsumerOptions::in_order`, as the timetick stream does)
//! where the server has no ordered channel with a commit point (upstream nsqd, or the fork
//! without `nsqd_http`): one message in flight, each FINed once it is in the subscription's
//! local spool, which keeps it until the ack. A SIGKILLed timetick consumer restarted from its subscription runs in the workspace's
//! conformance suite (`restart.rs`).

mod common;

use std::path::Path;

use msgstream::mq::{Client, Consumer, ConsumerOptions, Message, MessageId};
use msgstream::Error;
use msgstream_nsq::{NsqClient, NsqConfig};
use msgstream_nsq_testd::Extensions;

async fn client(server: &common::Server, spool: &Path) -> NsqClient {
    NsqClient::connect(NsqConfig {
        nsqd: vec![server.tcp_addr().to_string()],
        nsqd_http: vec![server.http_addr().to_string()],
        spool_dir: spool.to_path_buf(),
        ..NsqConfig::default()
    })
    .await
    .expect("client")
}

/// A client of `mode`: upstream nsqd (with its HTTP API), or partitions without `nsqd_http`
/// (so no ordered channel can be moved: the fork's other spooled mode).
async fn client_of(mode: Extensions, server: &common::Server, spool: &Path) -> NsqClient {
    match mode {
        Extensions::None => client(server, spool).await,
        Extensions::Partitions => NsqClient::connect(NsqConfig {
            nsqd: vec![server.tcp_addr().to_string()],
            extensions: msgstream_nsq::Extensions::Partitions,
            spool_dir: spool.to_path_buf(),
            ..NsqConfig::default()
        })
        .await
        .expect("client"),
    }
}

fn partition(mode: Extensions) -> Option<u32> {
    (mode == Extensions::Partitions).then_some(0)
}

use common::{publish_mq as publish, recv_mq as recv};

async fn recv_ids(consumer: &mut Box<dyn Consumer>, count: usize) -> Vec<Message> {
    let mut got = Vec::new();
    for _ in 0..count {
        got.push(recv(consumer).await);
    }
    got
}

fn ids(messages: &[Message]) -> Vec<MessageId> {
    messages.iter().map(|m| m.id.clone()).collect()
}

/// The spool file's size beyond its 8-byte magic.
fn spooled_bytes(dir: &Path, topic: &str, subscription: &str) -> u64 {
    std::fs::metadata(dir.join(format!("{topic}@{subscription}.spool")))
        .map_or(0, |m| m.len().saturating_sub(8))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordered_consumers_on_upstream_hold_one_in_flight_and_spool_the_rest() {
    one_in_flight(Extensions::None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordered_consumers_without_nsqd_http_hold_one_in_flight_and_spool_the_rest() {
    one_in_flight(Extensions::Partitions).await;
}

async fn one_in_flight(mode: Extensions) {
    let server = common::server(mode).await;
    let spool = tempfile::tempdir().expect("tempdir");
    let client = client_of(mode, &server, spool.path()).await;
    let topic = common::topic("spooled");
    let mut consumer = client
        .subscribe(ConsumerOptions::new(&topic, "tt").in_order())
        .await
        .expect("subscribe");
    let published = publish(&client, &topic, 0, 20).await;
    // Twenty in a row, none acked: nsqd sends one at a time, each FINed once spooled.
    let got = recv_ids(&mut consumer, 20).await;
    assert_eq!(ids(&got), published);
    let channel = common::channel_stats(&server, &topic, partition(mode), "tt").await;
    let clients = channel["clients"].as_array().cloned().unwrap_or_default();
    assert!(
        !clients.is_empty() && clients.iter().all(|c| c["ready_count"].as_u64() <= Some(1)),
        "RDY 1: {channel}"
    );
    common::eventually("everything FINed on the server", async || {
        let channel = common::channel_stats(&server, &topic, partition(mode), "tt").await;
        channel["in_flight_count"] == 0 && channel["depth"] == 0
    })
    .await;
    assert!(spooled_bytes(spool.path(), &topic, "tt") > 0);

    // Acks are written to the spool; once all are acked it is empty again.
    for message in &got {
        consumer.ack(message).await.expect("ack");
    }
    assert_eq!(spooled_bytes(spool.path(), &topic, "tt"), 0);
    consumer.close().await;
    assert!(matches!(consumer.ack(&got[0]).await, Err(Error::Closed(_))));
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unacked_spooled_messages_come_first_to_the_next_consumer_of_any_kind() {
    spooled_replay(Extensions::None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_nsqd_http_unacked_spooled_messages_come_first_to_the_next_consumer() {
    spooled_replay(Extensions::Partitions).await;
}

async fn spooled_replay(mode: Extensions) {
    let server = common::server(mode).await;
    let spool = tempfile::tempdir().expect("tempdir");
    let client = client_of(mode, &server, spool.path()).await;
    let topic = common::topic("spooled-restart");
    let options = ConsumerOptions::new(&topic, "tt").in_order();
    let mut consumer = client.subscribe(options.clone()).await.expect("subscribe");
    let mut published = publish(&client, &topic, 0, 5).await;
    let got = recv_ids(&mut consumer, 5).await;
    consumer.ack(&got[1]).await.expect("ack");
    consumer.ack(&got[0]).await.expect("ack");
    // Dropped without a word, as a killed process: the FINed, unacked three live in the spool.
    drop(consumer);
    published.extend(publish(&client, &topic, 5, 3).await);
    let mut again = common::within("the subscription freed", async {
        loop {
            match client.subscribe(options.clone()).await {
                Ok(consumer) => break consumer,
                Err(Error::SubscriptionBusy { .. }) => tokio::task::yield_now().await,
                Err(e) => panic!("subscribe: {e}"),
            }
        }
    })
    .await;
    let replayed = recv_ids(&mut again, 6).await;
    assert_eq!(ids(&replayed), published[2..], "the unacked first, then on");
    again.ack(&replayed[0]).await.expect("ack");
    again.close().await;

    // A plain consumer (a MsgStream) of the subscription must not miss them either.
    let mut plain = client
        .subscribe(ConsumerOptions::new(&topic, "tt"))
        .await
        .expect("plain");
    let rest = recv_ids(&mut plain, 5).await;
    assert_eq!(ids(&rest), published[3..]);
    for message in &rest {
        plain.ack(message).await.expect("ack");
    }
    plain.close().await;
    assert_eq!(spooled_bytes(spool.path(), &topic, "tt"), 0);
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spool_has_one_consumer_across_clients_and_goes_with_its_subscription() {
    let server = common::server(Extensions::None).await;
    let spool = tempfile::tempdir().expect("tempdir");
    let (first, second) = (
        client(&server, spool.path()).await,
        client(&server, spool.path()).await,
    );
    let topic = common::topic("spooled-busy");
    let options = ConsumerOptions::new(&topic, "tt").in_order();
    let mut consumer = first.subscribe(options.clone()).await.expect("subscribe");
    // Another client (as another process) sharing the spool directory.
    assert!(matches!(
        second.subscribe(options.clone()).await,
        Err(Error::SubscriptionBusy { .. })
    ));
    assert!(matches!(
        second.delete_subscription(&topic, "tt").await,
        Err(Error::SubscriptionBusy { .. })
    ));
    publish(&first, &topic, 0, 3).await;
    recv_ids(&mut consumer, 3).await;
    consumer.close().await;
    assert!(spooled_bytes(spool.path(), &topic, "tt") > 0);

    // Deleting the subscription deletes what its spool held: a new one starts afresh.
    second
        .delete_subscription(&topic, "tt")
        .await
        .expect("delete");
    assert!(!spool.path().join(format!("{topic}@tt.spool")).exists());
    let mut fresh = second.subscribe(options).await.expect("subscribe");
    let published = publish(&second, &topic, 3, 1).await;
    assert_eq!(recv(&mut fresh).await.id, published[0]);
    fresh.close().await;
    second.delete_topic(&topic).await.expect("delete topic");
    assert_eq!(std::fs::read_dir(spool.path()).expect("ls").count(), 0);
    first.close().await;
    second.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spool_that_cannot_be_opened_fails_the_subscribe() {
    let server = common::server(Extensions::None).await;
    let dir = tempfile::tempdir().expect("tempdir");
    // A file where the spool directory should be.
    let not_a_dir = dir.path().join("file");
    std::fs::write(&not_a_dir, b"x").expect("write");
    let client = client(&server, &not_a_dir).await;
    let topic = common::topic("spooled-bad-dir");
    let err = client
        .subscribe(ConsumerOptions::new(&topic, "tt").in_order())
        .await
        .err()
        .expect("no spool, no ordered consumer");
    assert!(err.to_string().contains("spool"), "{err}");
    // The slot was not kept: a plain consumer needs no spool.
    let mut plain = client
        .subscribe(ConsumerOptions::new(&topic, "tt"))
        .await
        .expect("plain");
    plain.close().await;
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn synced_spools_replay_the_same() {
    let server = common::server(Extensions::None).await;
    let spool = tempfile::tempdir().expect("tempdir");
    let client = NsqClient::connect(NsqConfig {
        nsqd: vec![server.tcp_addr().to_string()],
        spool_dir: spool.path().to_path_buf(),
        spool_sync: msgstream_nsq::SpoolSync::SyncData,
        ..NsqConfig::default()
    })
    .await
    .expect("client");
    let topic = common::topic("spooled-synced");
    let options = ConsumerOptions::new(&topic, "tt").in_order();
    let mut consumer = client.subscribe(options.clone()).await.expect("subscribe");
    let published = publish(&client, &topic, 0, 4).await;
    let got = recv_ids(&mut consumer, 4).await;
    assert_eq!(ids(&got), published);
    consumer.ack(&got[0]).await.expect("ack");
    consumer.close().await;
    let mut again = client.subscribe(options).await.expect("again");
    assert_eq!(ids(&recv_ids(&mut again, 3).await), published[1..]);
    again.close().await;
    client.close().await;
}
