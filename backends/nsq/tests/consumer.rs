//! The push consumer against the test server: flow control, backoff, attempts, requeue,
//! TOUCH, lookupd discovery, reconnect and graceful stop. Tests on `common::server` run against
//! an external server too; `fixture_` tests need test servers of their own.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use msgstream_nsq::{spawn_handlers, Consumer, ConsumerConfig, Error};
use msgstream_nsq_testd::{Extensions, TestLookupd};

async fn publish_n<S: Nsqd>(servers: &[&S], topic: &str, n: usize) {
    for server in servers {
        let producer = producer(&[*server]);
        let bodies: Vec<Bytes> = (0..n)
            .map(|i| Bytes::from(format!("{}-{i}", server.tcp_addr().port())))
            .collect();
        producer
            .multi_publish(topic, None, &bodies)
            .await
            .expect("mpub");
        producer.close().await;
    }
}

/// Creates the channel before anything is published, so it sees every message.
async fn subscribe(config: ConsumerConfig) -> Arc<Consumer> {
    Arc::new(Consumer::connect(config).await.expect("consumer"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixture_never_more_in_flight_than_max_in_flight() {
    let (a, b) = (
        fixture_server(Extensions::None).await,
        fixture_server(Extensions::None).await,
    );
    let mut config = consumer_config(&[&a, &b], "flow", "c");
    config.max_in_flight = 3;
    let consumer = subscribe(config).await;
    publish_n(&[&a, &b], "flow", 30).await;
    let (now, peak, done) = (
        Arc::new(AtomicU32::new(0)),
        Arc::new(AtomicU32::new(0)),
        Arc::new(AtomicU32::new(0)),
    );
    let handlers = {
        let (now, peak, done) = (now.clone(), peak.clone(), done.clone());
        spawn_handlers(&consumer, 10, move |_message| {
            let (now, peak, done) = (now.clone(), peak.clone(), done.clone());
            async move {
                let inside = now.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(inside, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(3)).await;
                now.fetch_sub(1, Ordering::SeqCst);
                done.fetch_add(1, Ordering::SeqCst);
                Ok::<(), Error>(())
            }
        })
    };
    eventually("all 60 handled", async || done.load(Ordering::SeqCst) == 60).await;
    let peak = peak.load(Ordering::SeqCst);
    assert!(peak <= 3, "{peak} messages were in flight at once");
    assert!(
        peak >= 2,
        "both connections delivered concurrently (peak {peak})"
    );
    for server in [&a, &b] {
        let stats = channel_stats(server, "flow", None, "c").await;
        let rdy: u64 = stats["clients"][0]["ready_count"].as_u64().expect("rdy");
        assert!(rdy <= 1, "each of 2 connections holds ≤ 3/2 = 1, got {rdy}");
    }
    consumer.stop().await;
    for handler in handlers {
        within("handler end", handler).await.expect("join");
    }
    assert_eq!(consumer.stats().finished, 60);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backoff_is_entered_and_left() {
    let s = server(Extensions::None).await;
    let topic = topic("backoff");
    let mut config = consumer_config(&[&s], &topic, "c");
    config.max_in_flight = 5;
    config.backoff.multiplier = Duration::from_millis(20);
    config.backoff.max = Duration::from_secs(1);
    config.max_attempts = 0;
    let consumer = subscribe(config).await;
    publish_n(&[&s], &topic, 10).await;
    let levels = Arc::new(Mutex::new(Vec::new()));
    let rdy_in_backoff = Arc::new(AtomicU64::new(0));
    let samples = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicU32::new(0));
    let handlers = {
        let (consumer2, levels, done) = (consumer.clone(), levels.clone(), done.clone());
        spawn_handlers(&consumer, 1, move |message| {
            let (consumer, levels, done) = (consumer2.clone(), levels.clone(), done.clone());
            async move {
                levels
                    .lock()
                    .expect("lock")
                    .push(consumer.stats().backoff_level);
                // The first three deliveries fail: three levels of backoff.
                if message.attempts() == 1 && body(&message).ends_with(['0', '1', '2']) {
                    return Err("fail");
                }
                done.fetch_add(1, Ordering::SeqCst);
                Ok(())
            }
        })
    };
    let watcher = {
        let (s_addr, rdy_in_backoff, consumer, samples, topic) = (
            s.http_addr(),
            rdy_in_backoff.clone(),
            consumer.clone(),
            samples.clone(),
            topic.clone(),
        );
        tokio::spawn(async move {
            loop {
                // A sample counts only if the same backoff level held from 10 ms before the
                // read (so the RDY 0 that entered it has reached the server) until after it.
                let before = consumer.stats().backoff_level;
                if before > 0 {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    let c = channel_stats_at(s_addr, &topic, None, "c").await;
                    let rdy = c["clients"][0]["ready_count"].as_u64().unwrap_or(0);
                    if consumer.stats().backoff_level == before {
                        rdy_in_backoff.fetch_max(rdy, Ordering::SeqCst);
                        samples.fetch_add(1, Ordering::SeqCst);
                    }
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        })
    };
    eventually("all handled", async || done.load(Ordering::SeqCst) == 10).await;
    eventually("backoff left", async || consumer.stats().backoff_level == 0).await;
    watcher.abort();
    let seen = levels.lock().expect("lock").clone();
    assert!(seen.iter().any(|l| *l > 0), "backoff was entered: {seen:?}");
    assert!(
        samples.load(Ordering::SeqCst) > 0,
        "RDY was sampled in backoff"
    );
    assert!(
        rdy_in_backoff.load(Ordering::SeqCst) <= 1,
        "in backoff only the test-the-waters RDY 1 is allowed"
    );
    let stats = consumer.stats();
    assert_eq!((stats.finished, stats.requeued), (10, 3));
    consumer.stop().await;
    for handler in handlers {
        within("handler end", handler).await.expect("join");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_attempts_reach_the_failed_callback() {
    let s = server(Extensions::None).await;
    let failed = Arc::new(Mutex::new(Vec::new()));
    let topic = topic("attempts");
    let mut config = consumer_config(&[&s], &topic, "c");
    config.max_attempts = 3;
    {
        let failed = failed.clone();
        config.on_failed = Some(Arc::new(move |raw| {
            failed.lock().expect("lock").push((
                raw.attempts,
                String::from_utf8_lossy(&raw.body).into_owned(),
            ))
        }));
    }
    let consumer = subscribe(config).await;
    producer(&[&s])
        .publish(&topic, b"poison")
        .await
        .expect("pub");
    let calls = Arc::new(AtomicU32::new(0));
    let handlers = {
        let calls = calls.clone();
        spawn_handlers(&consumer, 1, move |_| {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Err::<(), _>("always fails") }
        })
    };
    eventually("the failed callback", async || {
        !failed.lock().expect("lock").is_empty()
    })
    .await;
    assert_eq!(*failed.lock().expect("lock"), [(4, "poison".to_string())]);
    assert_eq!(
        calls.load(Ordering::SeqCst),
        3,
        "the handler saw attempts 1..=3"
    );
    eventually("the FIN reached the server", async || {
        channel_stats(&s, &topic, None, "c").await["in_flight_count"] == 0
    })
    .await;
    assert_eq!(consumer.stats().failed, 1);
    consumer.stop().await;
    for handler in handlers {
        within("handler end", handler).await.expect("join");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requeue_waits_its_delay_and_auto_delay_scales() {
    let s = server(Extensions::None).await;
    let topic = topic("requeue");
    let mut config = consumer_config(&[&s], &topic, "c");
    config.default_requeue_delay = Duration::from_millis(100);
    config.max_requeue_delay = Duration::from_millis(250);
    let consumer = subscribe(config).await;
    producer(&[&s])
        .publish(&topic, b"later")
        .await
        .expect("pub");
    let first = recv(&consumer).await;
    assert_eq!(first.attempts(), 1);
    assert_eq!(first.auto_delay(), Duration::from_millis(100));
    let requeued_at = Instant::now();
    first
        .requeue_without_backoff(Some(Duration::from_millis(300)))
        .await
        .expect("REQ");
    let second = recv(&consumer).await;
    let waited = requeued_at.elapsed();
    assert!(
        waited >= Duration::from_millis(300),
        "came back after {waited:?}"
    );
    assert_eq!(second.attempts(), 2);
    assert_eq!(second.id(), first.id(), "a requeued message keeps its id");
    second
        .requeue_without_backoff(None)
        .await
        .expect("REQ auto");
    let third = recv(&consumer).await;
    assert_eq!(third.attempts(), 3);
    assert_eq!(third.auto_delay(), Duration::from_millis(250), "capped");
    third.finish().await.expect("FIN");
    third.finish().await.expect("a second FIN is a no-op");
    consumer.stop().await;
    assert_eq!(consumer.stats().requeued, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn touch_keeps_a_slow_message_alive() {
    let s = server(Extensions::None).await;
    let topic = topic("touch");
    let consumer = subscribe(consumer_config(&[&s], &topic, "c")).await;
    producer(&[&s]).publish(&topic, b"slow").await.expect("pub");
    let slow = recv(&consumer).await;
    // Three times the 1 s message timeout, touching every 200 ms.
    for _ in 0..15 {
        slow.touch().await.expect("TOUCH");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    slow.finish().await.expect("FIN");
    // The server reads the FIN on its own time; the HTTP stats may come first.
    eventually("the FIN processed", async || {
        channel_stats(&s, &topic, None, "c").await["in_flight_count"] == 0
    })
    .await;
    let stats = channel_stats(&s, &topic, None, "c").await;
    assert_eq!(stats["timeout_count"], 0, "{stats}");
    // Without TOUCH the same wait times it out.
    producer(&[&s])
        .publish(&topic, b"forgotten")
        .await
        .expect("pub");
    let forgotten = recv(&consumer).await;
    let again = recv(&consumer).await;
    assert_eq!((again.id(), again.attempts()), (forgotten.id(), 2));
    again.finish().await.expect("FIN");
    let stats = channel_stats(&s, &topic, None, "c").await;
    assert_eq!(stats["timeout_count"], 1, "{stats}");
    // The first delivery is no longer in flight: a non-fatal E_FIN_FAILED, the connection
    // stays up, and the consumer counts it answered (so stop does not wait for it).
    forgotten.finish().await.expect("FIN sent");
    within("stop", consumer.stop()).await;
    assert_eq!(consumer.stats().reconnects, 0, "E_FIN_FAILED is not fatal");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixture_lookupd_discovers_two_servers() {
    let (a, b) = (
        fixture_server(Extensions::None).await,
        fixture_server(Extensions::None).await,
    );
    publish_n(&[&a, &b], "found", 5).await;
    let lookupd = TestLookupd::start(&[&a, &b]).await.expect("lookupd");
    let mut config = ConsumerConfig::new("found", "c");
    config.lookupd = vec![lookupd.http_addr().to_string()];
    config.conn = conn_config();
    config.max_in_flight = 10;
    let consumer = subscribe(config).await;
    let mut per_server = BTreeMap::new();
    for _ in 0..10 {
        let message = recv(&consumer).await;
        *per_server
            .entry(message.origin().addr.to_string())
            .or_insert(0) += 1;
        message.finish().await.expect("FIN");
    }
    let want: BTreeMap<String, i32> =
        [(a.tcp_addr().to_string(), 5), (b.tcp_addr().to_string(), 5)]
            .into_iter()
            .collect();
    assert_eq!(per_server, want);
    assert_eq!(consumer.stats().connections, 2);
    // A dropped connection is found again through lookupd (an immediate re-poll).
    a.drop_connections();
    eventually("rediscovered", async || consumer.stats().reconnects >= 1).await;
    publish_n(&[&a], "found", 1).await;
    let again = recv(&consumer).await;
    assert_eq!(again.origin().addr.to_string(), a.tcp_addr().to_string());
    again.finish().await.expect("FIN");
    consumer.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixture_reconnects_after_the_server_drops_every_connection() {
    let s = fixture_server(Extensions::None).await;
    let mut config = consumer_config(&[&s], "drop", "c");
    config.max_in_flight = 4;
    config.conn.msg_timeout = Some(Duration::from_secs(2));
    let consumer = subscribe(config).await;
    publish_n(&[&s], "drop", 8).await;
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(recv(&consumer).await);
    }
    let acked = held.remove(0);
    acked.finish().await.expect("FIN before the drop");
    eventually("the FIN was processed", async || {
        channel_stats(&s, "drop", None, "c").await["clients"][0]["finish_count"] == 1
    })
    .await;
    s.drop_connections();
    eventually("the consumer reconnected", async || {
        consumer.stats().reconnects >= 1
    })
    .await;
    for stale in &held {
        assert!(
            stale.finish().await.is_err(),
            "a FIN on the dropped connection says so"
        );
    }
    let mut seen = BTreeMap::new();
    while seen.len() < 7 {
        let message = recv(&consumer).await;
        // A message buffered before the drop cannot be answered any more; it comes again.
        if message.finish().await.is_ok() {
            seen.insert(body(&message), message.attempts());
        }
    }
    assert!(
        !seen.contains_key(&body(&acked)),
        "an acknowledged message never comes back"
    );
    for stale in &held {
        assert!(
            seen[&body(stale)] > 1,
            "in-flight messages come back with attempts > 1"
        );
    }
    eventually("nothing left", async || {
        let c = channel_stats(&s, "drop", None, "c").await;
        c["depth"] == 0 && c["in_flight_count"] == 0
    })
    .await;
    consumer.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_stop_under_load_loses_nothing() {
    let s = server(Extensions::None).await;
    let topic = topic("stop");
    let mut config = consumer_config(&[&s], &topic, "c");
    config.max_in_flight = 50;
    let consumer = subscribe(config).await;
    publish_n(&[&s], &topic, 500).await;
    let handled = Arc::new(AtomicU32::new(0));
    let handlers = {
        let handled = handled.clone();
        spawn_handlers(&consumer, 4, move |_| {
            let handled = handled.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(1)).await;
                handled.fetch_add(1, Ordering::SeqCst);
                Ok::<(), Error>(())
            }
        })
    };
    eventually("load", async || handled.load(Ordering::SeqCst) >= 50).await;
    within("stop", consumer.stop()).await;
    for handler in handlers {
        within("handler end", handler).await.expect("join");
    }
    let finished = consumer.stats().finished;
    assert_eq!(finished, u64::from(handled.load(Ordering::SeqCst)));
    // Everything in flight was answered and the connections closed; the server notices the
    // close on its own time, so wait for it rather than race the HTTP stats.
    eventually("the server to see every answer and the close", async || {
        let c = channel_stats(&s, &topic, None, "c").await;
        c["in_flight_count"] == 0 && client_count(&c) == 0
    })
    .await;
    let c = channel_stats(&s, &topic, None, "c").await;
    assert_eq!(c["timeout_count"], 0, "answered, not timed out: {c}");
    assert_eq!(c["depth"].as_u64().expect("depth") + finished, 500, "{c}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_are_clear() {
    let s = server(Extensions::None).await;
    assert!(matches!(
        Consumer::connect(consumer_config(&[&s], "bad topic", "c")).await,
        Err(Error::Invalid(_))
    ));
    let mut zero = consumer_config(&[&s], "t", "c");
    zero.max_in_flight = 0;
    assert!(matches!(
        Consumer::connect(zero).await,
        Err(Error::Invalid(_))
    ));
    let mut nowhere = consumer_config(&[&s], "t", "c");
    nowhere.nsqd = vec!["127.0.0.1:1".into()];
    assert!(
        Consumer::connect(nowhere).await.is_err(),
        "no reachable nsqd"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixture_rdy_rotates_when_connections_outnumber_max_in_flight() {
    let servers = [
        fixture_server(Extensions::None).await,
        fixture_server(Extensions::None).await,
        fixture_server(Extensions::None).await,
    ];
    let refs: Vec<&msgstream_nsq_testd::TestServer> = servers.iter().collect();
    let mut config = consumer_config(&refs, "rotate", "c");
    config.max_in_flight = 1;
    config.rdy_redistribute_interval = Duration::from_millis(20);
    config.low_rdy_idle_timeout = Duration::from_millis(50);
    let consumer = subscribe(config).await;
    publish_n(&refs, "rotate", 3).await;
    let mut per_server = BTreeMap::new();
    for _ in 0..9 {
        let message = recv(&consumer).await;
        *per_server
            .entry(message.origin().addr.to_string())
            .or_insert(0) += 1;
        let mut total_rdy = 0;
        for server in &servers {
            let c = channel_stats(server, "rotate", None, "c").await;
            total_rdy += c["clients"][0]["ready_count"].as_u64().unwrap_or(0);
        }
        assert!(total_rdy <= 1, "RDY over all connections is {total_rdy}");
        message.finish().await.expect("FIN");
    }
    assert_eq!(per_server.len(), 3, "no connection starves: {per_server:?}");
    assert!(per_server.values().all(|n| *n == 3));
    consumer.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixture_server_limits_and_heartbeats_are_respected() {
    let s = fixture_server_with(msgstream_nsq_testd::Options {
        max_rdy_count: 5,
        ..msgstream_nsq_testd::Options::default()
    })
    .await;
    let mut config = consumer_config(&[&s], "limits", "c");
    config.max_in_flight = 100;
    let consumer = subscribe(config).await;
    publish_n(&[&s], "limits", 20).await;
    eventually("five in flight", async || {
        channel_stats(&s, "limits", None, "c").await["in_flight_count"] == 5
    })
    .await;
    assert_eq!(
        channel_stats(&s, "limits", None, "c").await["clients"][0]["ready_count"],
        5,
        "RDY capped at the server's max_rdy_count"
    );
    // Idle for three heartbeat intervals: the NOP answers keep the connection.
    tokio::time::sleep(Duration::from_millis(3200)).await;
    assert_eq!(consumer.stats().reconnects, 0);
    assert_eq!(consumer.stats().connections, 1);
    for _ in 0..20 {
        recv(&consumer).await.finish().await.expect("FIN");
    }
    consumer.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_in_flight_zero_pauses_and_a_new_value_resumes() {
    let s = server(Extensions::None).await;
    let topic = topic("pause");
    let mut config = consumer_config(&[&s], &topic, "c");
    config.max_in_flight = 4;
    let consumer = subscribe(config).await;
    let rdy =
        async || channel_stats(&s, &topic, None, "c").await["clients"][0]["ready_count"].clone();
    eventually("RDY 4", async || rdy().await == 4).await;
    consumer.set_max_in_flight(0);
    eventually("RDY 0", async || rdy().await == 0).await;
    publish_n(&[&s], &topic, 3).await;
    assert!(
        consumer.try_recv().await.is_none(),
        "paused: nothing delivered"
    );
    assert_eq!(
        channel_stats(&s, &topic, None, "c").await["in_flight_count"],
        0
    );
    consumer.set_max_in_flight(2);
    for _ in 0..3 {
        recv(&consumer).await.finish().await.expect("FIN");
    }
    assert_eq!(rdy().await, 2);
    within("stop", consumer.stop()).await;
    assert!(consumer.is_stopped());
    assert!(consumer.recv().await.is_none(), "recv ends after stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_consumer_closes_its_connections() {
    let s = server(Extensions::None).await;
    let topic = topic("dropped");
    let consumer = subscribe(consumer_config(&[&s], &topic, "c")).await;
    let clients = async || client_count(&channel_stats(&s, &topic, None, "c").await);
    eventually("subscribed", async || clients().await == 1).await;
    drop(consumer);
    eventually("connection closed", async || clients().await == 0).await;
}
