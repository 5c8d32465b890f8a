//! The consumer with the Youzan extensions: ordered delivery, consume offsets (seek), and one
//! connection per (nsqd, partition) found through lookupd. Tests on `youzan` run against an
//! external server too; consume offsets (`virtual_queue:`, `timestamp:`) need the coordinator,
//! so their tests run on an in-process cluster (`offsets_cluster`); `fixture_` tests need test
//! servers of their own.

mod common;

use std::collections::BTreeSet;

use common::*;
use msgstream_nsq::{ConsumeOffset, Consumer, ConsumerConfig, SubscribeMode};
use msgstream_nsq_testd::{Extensions, TestLookupd};

/// A server with the extensions, and a new topic of `partitions` partitions on it.
async fn youzan(partitions: u32) -> (Server, String) {
    let s = server(Extensions::Partitions).await;
    let yz = topic("yz");
    create_youzan_topic(&s, &yz, partitions).await;
    (s, yz)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordered_delivery_survives_a_requeue() {
    let (s, yz) = youzan(1).await;
    let mut config = consumer_config(&[&s], &yz, "ordered");
    config.mode = SubscribeMode::Ordered;
    config.partition = Some(0);
    config.max_in_flight = 10;
    let consumer = Consumer::connect(config).await.expect("consumer");
    let producer = producer(&[&s]);
    for i in 0..20 {
        producer
            .publish_trace(&yz, 0, i, format!("{i}").as_bytes())
            .await
            .expect("pub");
    }
    let mut finished = Vec::new();
    let mut last_offset = None;
    let mut requeued = false;
    while finished.len() < 20 {
        let message = recv(&consumer).await;
        let (offset, _) = message
            .position()
            .expect("ordered deliveries carry offsets");
        assert!(
            last_offset <= Some(offset),
            "offsets never go back past a FIN"
        );
        if body(&message) == "5" && !requeued {
            requeued = true;
            message
                .requeue_without_backoff(Some(std::time::Duration::ZERO))
                .await
                .expect("REQ 0");
            continue;
        }
        last_offset = Some(offset);
        finished.push(body(&message).parse::<u32>().expect("number"));
        message.finish().await.expect("FIN");
    }
    assert_eq!(finished, (0..20).collect::<Vec<_>>());
    assert!(requeued);
    consumer.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seek_to_a_stored_partition_and_offset() {
    let yz = topic("yz");
    let cluster = offsets_cluster(&yz, 2).await;
    let s = &cluster.nsqds()[1];
    let producer = producer(&[s]);
    let mut receipts = Vec::new();
    for i in 0..10u64 {
        receipts.push(
            producer
                .publish_trace(&yz, 1, i, format!("{i}").as_bytes())
                .await
                .expect("pub"),
        );
    }
    let mut config = consumer_config(&[s], &yz, "replay");
    config.mode = SubscribeMode::Advanced;
    config.partition = Some(1);
    config.max_in_flight = 4;
    config.offset = Some(ConsumeOffset::VirtualQueue(receipts[4].offset));
    let consumer = Consumer::connect(config.clone()).await.expect("consumer");
    for (i, receipt) in receipts.iter().enumerate().skip(4) {
        let message = recv(&consumer).await;
        assert_eq!(body(&message), i.to_string());
        assert_eq!(message.position(), Some((receipt.offset, receipt.raw_size)));
        assert_eq!(message.origin().partition, Some(1));
        message.finish().await.expect("FIN");
    }
    consumer.stop().await;
    // Seeking back on the existing channel (no client attached) replays from there.
    config.offset = Some(ConsumeOffset::VirtualQueue(receipts[8].offset));
    let again = Consumer::connect(config.clone()).await.expect("consumer");
    let replayed = recv(&again).await;
    assert_eq!(body(&replayed), "8");
    replayed.finish().await.expect("FIN");
    within("stop", again.stop()).await;
    // Without an HTTP address the partition's offset cannot be set: a clear refusal.
    config.nsqd_http.clear();
    assert!(matches!(
        Consumer::connect(config).await,
        Err(msgstream_nsq::Error::Unsupported { .. })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latest_starts_a_new_channel_at_the_end() {
    let (s, yz) = youzan(1).await;
    let producer = producer(&[&s]);
    producer.publish_to(&yz, 0, b"old").await.expect("pub");
    let mut config = consumer_config(&[&s], &yz, "fresh");
    config.mode = SubscribeMode::Advanced;
    config.partition = Some(0);
    config.offset = Some(ConsumeOffset::Latest);
    let consumer = Consumer::connect(config).await.expect("consumer");
    producer.publish_to(&yz, 0, b"new").await.expect("pub");
    let message = recv(&consumer).await;
    assert_eq!(body(&message), "new");
    message.finish().await.expect("FIN");
    consumer.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixture_one_connection_per_partition_through_lookupd() {
    // Each partition lives on one nsqd (its leader): 0 and 2 on `a`, 1 on `b`.
    let (a, b) = (
        fixture_server(Extensions::Partitions).await,
        fixture_server(Extensions::Partitions).await,
    );
    let producer_a = producer(&[&a]);
    let producer_b = producer(&[&b]);
    for p in [0, 2] {
        producer_a.create_topic("yz", p).await.expect("create");
    }
    producer_b.create_topic("yz", 1).await.expect("create");
    let lookupd = TestLookupd::start(&[&a, &b]).await.expect("lookupd");
    let mut config = ConsumerConfig::new("yz", "all");
    config.lookupd = vec![lookupd.http_addr().to_string()];
    config.conn = conn_config();
    config.mode = SubscribeMode::Advanced;
    config.max_in_flight = 10;
    let consumer = Consumer::connect(config).await.expect("consumer");
    producer_a.publish_to("yz", 0, b"a0").await.expect("pub");
    producer_a.publish_to("yz", 2, b"a2").await.expect("pub");
    producer_b.publish_to("yz", 1, b"b1").await.expect("pub");
    let mut seen = BTreeSet::new();
    for _ in 0..3 {
        let message = recv(&consumer).await;
        seen.insert((
            message.origin().addr.to_string(),
            message.origin().partition,
            body(&message),
        ));
        message.finish().await.expect("FIN");
    }
    let want: BTreeSet<_> = [
        (a.tcp_addr().to_string(), Some(0), "a0".to_string()),
        (a.tcp_addr().to_string(), Some(2), "a2".to_string()),
        (b.tcp_addr().to_string(), Some(1), "b1".to_string()),
    ]
    .into_iter()
    .collect();
    assert_eq!(seen, want);
    assert_eq!(consumer.stats().connections, 3);
    consumer.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timestamp_offsets_start_at_a_publish_time() {
    let yz = topic("yz");
    let cluster = offsets_cluster(&yz, 1).await;
    let s = &cluster.nsqds()[0];
    let producer = producer(&[s]);
    producer.publish_to(&yz, 0, b"old").await.expect("pub");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    for (channel, secs, first) in [("past", now - 3600, "old"), ("future", now + 3600, "new")] {
        let mut config = consumer_config(&[s], &yz, channel);
        config.mode = SubscribeMode::Advanced;
        config.partition = Some(0);
        config.offset = Some(ConsumeOffset::Timestamp(secs));
        let consumer = Consumer::connect(config).await.expect("consumer");
        if first == "new" {
            producer.publish_to(&yz, 0, b"new").await.expect("pub");
        }
        let message = recv(&consumer).await;
        assert_eq!(body(&message), first, "channel {channel}");
        message.finish().await.expect("FIN");
        within("stop", consumer.stop()).await;
    }
}

/// Seconds since the epoch now.
fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs()
}

/// Waits for the wall clock's next whole second and returns it: a message published before
/// the call and one published after it have publish times on either side of it.
async fn next_second() -> u64 {
    let start = now_secs();
    let into = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .subsec_nanos();
    tokio::time::sleep(std::time::Duration::from_nanos(
        u64::from(1_000_000_000 - into) + 1_000_000,
    ))
    .await;
    let now = now_secs();
    assert!(now > start, "the clock moved on");
    now
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_consumer_seeks_to_a_publish_time() {
    let yz = topic("yz");
    let cluster = offsets_cluster(&yz, 2).await;
    let nodes: Vec<_> = cluster.nsqds().iter().collect();
    // Partition p is led by node p.
    let leaders = [producer(&[nodes[0]]), producer(&[nodes[1]])];
    for (p, leader) in (0..).zip(&leaders) {
        leader.publish_to(&yz, p, b"before").await.expect("pub");
    }
    let boundary = next_second().await;
    for (p, leader) in (0..).zip(&leaders) {
        leader.publish_to(&yz, p, b"after").await.expect("pub");
    }
    // Through the lookupd: one connection per partition, to its leader.
    let mut config = consumer_config(&nodes, &yz, "timed");
    config.nsqd.clear();
    config.nsqd_http.clear();
    config.lookupd = vec![cluster.lookupd_http_addr().to_string()];
    config.mode = SubscribeMode::Advanced;
    config.max_in_flight = 10;
    config.offset = Some(ConsumeOffset::Timestamp(boundary - 3600));
    let consumer = Consumer::connect(config).await.expect("consumer");
    let mut seen = BTreeSet::new();
    for _ in 0..4 {
        let message = recv(&consumer).await;
        seen.insert((message.origin().partition, body(&message)));
        message.finish().await.expect("FIN");
    }
    let everything: BTreeSet<_> = [(0, "before"), (0, "after"), (1, "before"), (1, "after")]
        .into_iter()
        .map(|(p, b)| (Some(p), b.to_string()))
        .collect();
    assert_eq!(
        seen, everything,
        "an hour ago: both partitions from the start"
    );

    // At the boundary: each partition continues at its first message published at or after it.
    consumer
        .seek(ConsumeOffset::Timestamp(boundary))
        .await
        .expect("seek by time");
    let mut seen = BTreeSet::new();
    for _ in 0..2 {
        let message = recv(&consumer).await;
        seen.insert((message.origin().partition, body(&message)));
        message.finish().await.expect("FIN");
    }
    let after: BTreeSet<_> = [0, 1].map(|p| (Some(p), "after".to_string())).into();
    assert_eq!(seen, after);

    // A time after the last message: only what is published from now on.
    consumer
        .seek(ConsumeOffset::Timestamp(now_secs() + 3600))
        .await
        .expect("seek past the end");
    leaders[1].publish_to(&yz, 1, b"new").await.expect("pub");
    let message = recv(&consumer).await;
    assert_eq!(
        (message.origin().partition, body(&message)),
        (Some(1), "new".into())
    );
    message.finish().await.expect("FIN");
    within("stop", consumer.stop()).await;
}

/// A standalone Youzan nsqd keeps no commit log and upstream nsqd has no consume offsets:
/// starting or seeking by publish time is refused with `Unsupported`, before anything is
/// delivered from the wrong place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_time_offsets_are_unsupported_without_a_cluster() {
    for extensions in [Extensions::Partitions, Extensions::None] {
        let s = server(extensions).await;
        let t = topic("timed");
        if extensions == Extensions::Partitions {
            create_youzan_topic(&s, &t, 1).await;
        }
        let producer = producer(&[&s]);
        producer.publish(&t, b"m").await.expect("pub");
        let mut config = consumer_config(&[&s], &t, "c");
        if extensions == Extensions::Partitions {
            config.mode = SubscribeMode::Advanced;
            config.offset = Some(ConsumeOffset::Timestamp(now_secs()));
            let refused = Consumer::connect(config.clone()).await;
            assert!(
                matches!(refused, Err(msgstream_nsq::Error::Unsupported { .. })),
                "{extensions:?}: start by time: {:?}",
                refused.err()
            );
            config.offset = None;
        }
        let consumer = Consumer::connect(config).await.expect("consumer");
        assert!(
            consumer
                .wait_connected(std::time::Duration::from_secs(5))
                .await
        );
        let refused = consumer.seek(ConsumeOffset::Timestamp(now_secs())).await;
        assert!(
            matches!(refused, Err(msgstream_nsq::Error::Unsupported { .. })),
            "{extensions:?}: seek by time: {refused:?}"
        );
        within("stop", consumer.stop()).await;
    }
}
