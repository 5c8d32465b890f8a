//! Consumers that ask for order (`ConsumerOptions::in_order`, as the timetick stream does) with
//! partitions: read through an ordered channel (`SUB_ORDERED`), which sends the next message
//! only after a FIN, while acks move the subscription's own channel, so a restart from the
//! subscription is at-least-once. Both need consume offsets, which only a Youzan cluster
//! serves (a standalone nsqd refuses them, transcript Y8: there ordered consumers are spooled),
//! so these run on an in-process cluster. The timetick stream over them (packs, replay, a
//! SIGKILLed consumer restarted from its subscription) runs in the workspace's conformance
//! suite.

mod common;

use std::sync::Arc;
use std::time::Duration;

use msgstream::mq::{Client, ConsumerOptions, InitialPosition};
use msgstream::msg::{MsgPack, TsMsg};
use msgstream::stream::StreamOptions;
use msgstream::testkit::insert;
use msgstream::tt::TtMsgStream;
use msgstream_nsq::{ConsumerConfig, Extensions, NsqClient, NsqConfig, SubscribeMode};
use msgstream_nsq_testd::{ClusterOptions, TestCluster, TestServer};

/// A Youzan cluster of one nsqd, which leads every topic the client creates (one partition).
async fn cluster() -> TestCluster {
    TestCluster::start(ClusterOptions {
        nsqds: 1,
        ..ClusterOptions::default()
    })
    .await
    .expect("test cluster")
}

fn config(cluster: &TestCluster) -> NsqConfig {
    let node = &cluster.nsqds()[0];
    NsqConfig {
        nsqd: vec![node.tcp_addr().to_string()],
        nsqd_http: vec![node.http_addr().to_string()],
        lookupd: vec![cluster.lookupd_http_addr().to_string()],
        extensions: Extensions::Partitions,
        cluster: true,
        partitions: 1,
        ..NsqConfig::default()
    }
}

use common::{publish_mq as publish, recv_mq as recv};

async fn lag(client: &NsqClient, topic: &str, subscription: &str) -> Option<u64> {
    client
        .list_subscriptions(topic)
        .await
        .expect("list")
        .into_iter()
        .find(|s| s.name == subscription)
        .and_then(|s| s.lag)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordered_reads_need_no_ack_and_acks_move_the_subscription() {
    let cluster = cluster().await;
    let server = &cluster.nsqds()[0];
    let client = NsqClient::connect(config(&cluster)).await.expect("client");
    let topic = common::topic("ordered");
    let options = ConsumerOptions::new(&topic, "tt").in_order();
    let mut consumer = client.subscribe(options.clone()).await.expect("subscribe");
    let ids = publish(&client, &topic, 0, 5).await;
    // An ordered channel sends the next message only after a FIN: five in a row, none acked.
    let mut got = Vec::new();
    for _ in 0..5 {
        got.push(recv(&mut consumer).await);
    }
    assert_eq!(got.iter().map(|m| m.id.clone()).collect::<Vec<_>>(), ids);

    // The reading channel is an ordered one: nsqd refuses it to an unordered subscriber.
    let stats = common::stats_at(server.http_addr()).await;
    let reading = common::topic_entries(&stats, &topic, Some(0))
        .into_iter()
        .flat_map(|t| t["channels"].as_array().cloned().unwrap_or_default())
        .filter_map(|c| c["channel_name"].as_str().map(str::to_string))
        .find(|name| name.starts_with("ordered-"))
        .expect("the reading channel is listed");
    let mut advanced = ConsumerConfig::new(topic.clone(), reading);
    advanced.nsqd = vec![server.tcp_addr().to_string()];
    advanced.partition = Some(0);
    advanced.mode = SubscribeMode::Advanced;
    advanced.conn = common::conn_config();
    let refused = msgstream_nsq::Consumer::connect(advanced).await;
    let error = refused.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(error.contains("E_SUB_ORDER_IS_MUST"), "{error:?}");

    // Nothing was committed by reading; an ack commits through that message. The reading
    // channel is no subscription.
    let listed: Vec<String> = client
        .list_subscriptions(&topic)
        .await
        .expect("list")
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(listed, ["tt"]);
    assert_eq!(lag(&client, &topic, "tt").await, Some(5));
    consumer.ack(&got[1]).await.expect("ack");
    assert_eq!(lag(&client, &topic, "tt").await, Some(3));
    consumer.ack(&got[0]).await.expect("an older ack");
    assert_eq!(
        lag(&client, &topic, "tt").await,
        Some(3),
        "never moves back"
    );

    // Dropped without a word (as a killed process): the next consumer starts after the ack,
    // ordered or not.
    drop(consumer);
    let mut again = common::within("the subscription freed", async {
        loop {
            match client.subscribe(options.clone()).await {
                Ok(consumer) => break consumer,
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        }
    })
    .await;
    assert_eq!(recv(&mut again).await.id, ids[2]);
    again.close().await;
    let mut plain = client
        .subscribe(ConsumerOptions::new(&topic, "tt"))
        .await
        .expect("plain");
    assert_eq!(recv(&mut plain).await.id, ids[2]);
    plain.close().await;
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixture_ordered_reading_resumes_in_place_after_dropped_connections() {
    let cluster = cluster().await;
    let server = &cluster.nsqds()[0];
    let client = NsqClient::connect(config(&cluster)).await.expect("client");
    let topic = common::topic("ordered-drop");
    let mut consumer = client
        .subscribe(ConsumerOptions::new(&topic, "tt").in_order())
        .await
        .expect("subscribe");
    let mut ids = publish(&client, &topic, 0, 6).await;
    let mut got = Vec::new();
    for _ in 0..3 {
        got.push(recv(&mut consumer).await.id);
    }
    server.drop_connections();
    ids.extend(publish(&client, &topic, 6, 6).await);
    for _ in 3..12 {
        got.push(recv(&mut consumer).await.id);
    }
    assert_eq!(got, ids, "every message once, in order, across the drop");
    consumer.close().await;
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seeking_an_ordered_consumer_moves_its_subscription() {
    let cluster = cluster().await;
    let client = Arc::new(NsqClient::connect(config(&cluster)).await.expect("client"));
    let topic = common::topic("ordered-seek");
    let ids = publish(&client, &topic, 0, 4).await;
    let options = ConsumerOptions::new(&topic, "tt").in_order();
    let mut consumer = client.subscribe(options.clone()).await.expect("subscribe");
    let first = recv(&mut consumer).await;
    assert_eq!(first.id, ids[0]);
    consumer.seek(&ids[2], true).await.expect("seek");
    assert!(
        matches!(
            consumer.ack(&first).await,
            Err(msgstream::Error::StaleDelivery(_))
        ),
        "a delivery from before the seek"
    );
    assert_eq!(recv(&mut consumer).await.id, ids[2]);
    consumer.close().await;
    let mut again = client.subscribe(options).await.expect("again");
    assert_eq!(recv(&mut again).await.id, ids[2], "the seek was stored");
    again.close().await;
    client.close().await;
}

/// The names of `topic`'s ordered reading channels nsqd lists now.
async fn reading_channels(server: &TestServer, topic: &str) -> Vec<String> {
    let stats = common::stats_at(server.http_addr()).await;
    common::topic_entries(&stats, topic, Some(0))
        .into_iter()
        .flat_map(|t| t["channels"].as_array().cloned().unwrap_or_default())
        .filter_map(|c| c["channel_name"].as_str().map(str::to_string))
        .filter(|name| name.starts_with("ordered-"))
        .collect()
}

/// The timetick stream asks for order: each of its channels is read through an ordered
/// channel, and a pack with several messages of one channel completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tt_stream_reads_through_ordered_channels() {
    let cluster = cluster().await;
    let server = &cluster.nsqds()[0];
    let client: Arc<dyn Client> =
        Arc::new(NsqClient::connect(config(&cluster)).await.expect("client"));
    let topics = [common::topic("tt-ord-a"), common::topic("tt-ord-b")];
    let channels: Vec<&str> = topics.iter().map(String::as_str).collect();
    let mut out = TtMsgStream::new(client.clone(), StreamOptions::default());
    out.as_producer(&channels).await.expect("producer");
    let on = |key: u32, msgs: Vec<TsMsg>| MsgPack {
        msgs: msgs
            .into_iter()
            .map(|m| m.with_hash_keys(vec![key]))
            .collect(),
        ..MsgPack::default()
    };
    for key in 0..2 {
        let msgs = vec![insert(1, 1, 0), insert(2, 2, 0), TsMsg::time_tick(5)];
        out.produce(&on(key, msgs)).await.expect("produce");
    }
    let mut stream = TtMsgStream::new(client.clone(), StreamOptions::default());
    stream
        .as_consumer(&channels, "tt", InitialPosition::Earliest)
        .await
        .expect("as_consumer");
    let pack = common::within("the pack", stream.next_pack())
        .await
        .expect("open")
        .expect("pack");
    assert_eq!(pack.msgs.len(), 4, "two messages of each channel");
    for topic in &topics {
        assert_eq!(reading_channels(server, topic).await.len(), 1, "{topic}");
    }
    stream.close().await;
    out.close().await;
}
