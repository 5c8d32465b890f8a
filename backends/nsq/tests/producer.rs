//! The producer against the test server: every publish command, failover, and refusals.
//! Tests on `server` run against an external server too (one with nsqd's default limits);
//! `fixture_` tests need a test server of their own; the rest use stub servers of their own.

mod common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use msgstream_nsq::{Consumer, Error, Producer, ProducerConfig, PublishReceipt, SubscribeMode};
use msgstream_nsq_testd::{Extensions, Options};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pub_mpub_and_dpub_arrive() {
    let s = server(Extensions::None).await;
    let p = topic("p");
    let mut config = consumer_config(&[&s], &p, "c");
    config.max_in_flight = 10;
    let consumer = Consumer::connect(config).await.expect("consumer");
    let producer = producer(&[&s]);
    producer.publish(&p, b"one").await.expect("PUB");
    let batch = [Bytes::from_static(b"two"), Bytes::from_static(b"three")];
    producer
        .multi_publish(&p, None, &batch)
        .await
        .expect("MPUB");
    let sent = Instant::now();
    producer
        .deferred_publish(&p, Duration::from_millis(300), b"later")
        .await
        .expect("DPUB");
    let mut bodies = Vec::new();
    for _ in 0..4 {
        let message = recv(&consumer).await;
        bodies.push(body(&message));
        message.finish().await.expect("FIN");
    }
    assert!(sent.elapsed() >= Duration::from_millis(300), "DPUB waited");
    assert_eq!(bodies, ["one", "two", "three", "later"]);
    consumer.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixture_fails_over_and_reconnects() {
    let s = fixture_server(Extensions::None).await;
    let producer = Producer::new(ProducerConfig {
        nsqd: vec!["127.0.0.1:1".into(), s.tcp_addr().to_string()],
        conn: conn_config(),
        ..ProducerConfig::default()
    })
    .expect("producer");
    for i in 0..4 {
        producer
            .publish("f", format!("{i}").as_bytes())
            .await
            .expect("failover");
    }
    s.drop_connections();
    producer.publish("f", b"after").await.expect("reconnected");
    let (_, raw) = http(s.http_addr(), "GET", "/stats?format=json", b"").await;
    let stats = unwrap_data(serde_json::from_slice(&raw).expect("json"));
    assert_eq!(stats["topics"][0]["message_count"], 5);
    producer.close().await;
    assert!(matches!(
        producer.publish("f", b"x").await,
        Err(Error::Closed(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_name_the_problem() {
    let s = server(Extensions::None).await;
    let t = topic("t");
    let small = Producer::new(ProducerConfig {
        nsqd: vec![s.tcp_addr().to_string()],
        max_msg_size: 4,
        ..ProducerConfig::default()
    })
    .expect("producer");
    for (topic, body) in [
        ("bad topic", &b"x"[..]),
        (t.as_str(), b""),
        (t.as_str(), b"12345"),
        (&*"x".repeat(65), b"x"),
    ] {
        assert!(
            matches!(small.publish(topic, body).await, Err(Error::Invalid(_))),
            "{topic:?}"
        );
    }
    // What only the server knows: its own max_msg_size. The refusal is permanent, fatal for
    // the connection, and the next publish reconnects.
    let big = producer(&[&s]);
    let too_big = vec![b'x'; 1024 * 1024];
    let refused = big.publish(&t, &[too_big.as_slice(), b"y"].concat()).await;
    assert!(
        matches!(refused, Err(Error::Invalid(_))),
        "client-side limit first: {refused:?}"
    );
    let unlimited = Producer::new(ProducerConfig {
        nsqd: vec![s.tcp_addr().to_string()],
        max_msg_size: 2 * 1024 * 1024,
        ..ProducerConfig::default()
    })
    .expect("producer");
    match unlimited
        .publish(&t, &[too_big.as_slice(), b"y"].concat())
        .await
    {
        Err(Error::Server { error, .. }) => assert_eq!(error.code, "E_BAD_MESSAGE"),
        other => panic!("expected E_BAD_MESSAGE, got {other:?}"),
    }
    unlimited
        .publish(&t, b"fine")
        .await
        .expect("reconnects after a fatal error");
    assert!(Producer::new(ProducerConfig {
        nsqd: vec![],
        ..ProducerConfig::default()
    })
    .is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixture_auth_is_negotiated() {
    let s = fixture_server_with(Options {
        auth_secret: Some("sesame".into()),
        ..Options::default()
    })
    .await;
    let mut config = ProducerConfig {
        nsqd: vec![s.tcp_addr().to_string()],
        ..ProducerConfig::default()
    };
    let without = Producer::new(config.clone()).expect("producer");
    assert!(matches!(
        without.publish("t", b"x").await,
        Err(Error::Unsupported { .. })
    ));
    config.conn.auth_secret = Some("wrong".into());
    match Producer::new(config.clone())
        .expect("producer")
        .publish("t", b"x")
        .await
    {
        Err(Error::Server { error, .. }) => assert_eq!(error.code, "E_AUTH_FAILED"),
        other => panic!("{other:?}"),
    }
    config.conn.auth_secret = Some("sesame".into());
    Producer::new(config)
        .expect("producer")
        .publish("t", b"x")
        .await
        .expect("authorized");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn youzan_publishing() {
    let s = server(Extensions::Partitions).await;
    let yz = topic("yz");
    let producer = producer(&[&s]);
    match producer.publish(&yz, b"x").await {
        Err(Error::Server { error, .. }) => assert_eq!(error.code, "E_TOPIC_NOT_EXIST"),
        other => panic!("topics must be created first: {other:?}"),
    }
    producer.create_topic(&yz, 0).await.expect("create 0");
    producer.create_topic(&yz, 1).await.expect("create 1");
    producer
        .create_topic(&yz, 1)
        .await
        .expect("creating again is fine");
    let first = producer
        .publish_trace(&yz, 1, 42, b"hello")
        .await
        .expect("PUB_TRACE");
    let second = producer
        .publish_trace(&yz, 1, 43, b"hello")
        .await
        .expect("PUB_TRACE");
    assert_eq!(first.raw_size, 4 + 26 + 5);
    assert_eq!(second.offset, first.offset + u64::from(first.raw_size));
    assert_eq!(
        &second.id.0[8..],
        &43u64.to_be_bytes(),
        "binary id: u64 id ‖ trace id"
    );
    producer
        .publish_to(&yz, 0, b"p0")
        .await
        .expect("PUB with a partition");
    match producer.publish_to(&yz, 7, b"x").await {
        Err(Error::Server { error, .. }) => assert_eq!(error.code, "E_TOPIC_NOT_EXIST"),
        other => panic!("{other:?}"),
    }
    match producer
        .deferred_publish(&yz, Duration::from_millis(1), b"x")
        .await
    {
        Err(Error::Server { error, .. }) => {
            assert_eq!(error.code, "E_INVALID", "no DPUB in the fork")
        }
        other => panic!("{other:?}"),
    }
    // The message published with a partition is where it was sent: the partition's first
    // channel gets what was published before it (Y8 63).
    let mut config = consumer_config(&[&s], &yz, "c");
    config.partition = Some(1);
    config.mode = SubscribeMode::Advanced;
    let consumer = Consumer::connect(config).await.expect("consumer");
    let message = recv(&consumer).await;
    assert_eq!(message.position(), Some((first.offset, first.raw_size)));
    assert_eq!(message.id(), first.id);
    message.finish().await.expect("FIN");
    consumer.stop().await;
}

/// Whether a publish failed because its reply did not come in time.
fn is_reply_timeout<T>(result: &Result<T, Error>) -> bool {
    matches!(
        result,
        Err(Error::Timeout {
            what: "publish reply",
            ..
        })
    )
}

/// A producer of the one nsqd at `addr` whose replies time out after `read_timeout`.
fn producer_timing_out(
    addr: std::net::SocketAddr,
    read_timeout: Duration,
) -> std::sync::Arc<Producer> {
    let mut conn = conn_config();
    conn.read_timeout = read_timeout;
    std::sync::Arc::new(
        Producer::new(ProducerConfig {
            nsqd: vec![addr.to_string()],
            conn,
            ..ProducerConfig::default()
        })
        .expect("producer"),
    )
}

/// A server that negotiates, then answers nothing but heartbeats: the connection stays up
/// (its reads never time out), so only the request deadline can end a publish.
async fn stuck_server() -> std::net::SocketAddr {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let frame = |data: &[u8]| {
                    let mut f = ((4 + data.len()) as u32).to_be_bytes().to_vec();
                    f.extend_from_slice(&0u32.to_be_bytes());
                    f.extend_from_slice(data);
                    f
                };
                let (mut read, mut write) = socket.into_split();
                let mut buf = [0u8; 4096];
                if read.read(&mut buf).await.unwrap_or(0) == 0 {
                    return;
                }
                if write.write_all(&frame(b"OK")).await.is_err() {
                    return;
                }
                tokio::spawn(async move { while read.read(&mut buf).await.unwrap_or(0) > 0 {} });
                loop {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    if write.write_all(&frame(b"_heartbeat_")).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_reply_fails_the_publish_within_the_timeout() {
    let producer = producer_timing_out(stuck_server().await, Duration::from_millis(400));
    let started = Instant::now();
    let sends: Vec<_> = (0..3)
        .map(|i| {
            let producer = producer.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(100 * i)).await;
                producer.publish("t", b"x").await
            })
        })
        .collect();
    for send in sends {
        let result = send.await.expect("task");
        assert!(is_reply_timeout(&result), "{result:?}");
    }
    // Each send tries the nsqd twice (a fresh connection the second time): two timeouts.
    let elapsed = started.elapsed();
    assert!(elapsed >= Duration::from_millis(800), "{elapsed:?}");
    assert!(elapsed < Duration::from_millis(2000), "{elapsed:?}");
}

/// A server whose first connection answers its first PUB only after `delay`, and with an
/// error; every other PUB, on any connection, gets `OK` at once. Every connection gets a
/// heartbeat every 50 ms, so only the reply deadline can end a wait.
async fn late_first_reply_server(delay: Duration) -> std::net::SocketAddr {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let first = Arc::new(AtomicBool::new(true));
    let frame = |kind: u32, data: &[u8]| {
        let mut f = ((4 + data.len()) as u32).to_be_bytes().to_vec();
        f.extend_from_slice(&kind.to_be_bytes());
        f.extend_from_slice(data);
        f
    };
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let slow = first.swap(false, Ordering::SeqCst);
            let (mut read, write) = socket.into_split();
            let write = Arc::new(tokio::sync::Mutex::new(write));
            let heartbeats = write.clone();
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    let beat = frame(0, b"_heartbeat_");
                    if heartbeats.lock().await.write_all(&beat).await.is_err() {
                        return;
                    }
                }
            });
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                // Magic, then IDENTIFY's line, size and body.
                let identified = loop {
                    let n = read.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    if let Some(line) = buf[4..].iter().position(|&b| b == b'\n') {
                        let size_at = 4 + line + 1;
                        if buf.len() >= size_at + 4 {
                            let size = u32::from_be_bytes(
                                buf[size_at..size_at + 4].try_into().expect("4 bytes"),
                            ) as usize;
                            if buf.len() >= size_at + 4 + size {
                                break size_at + 4 + size;
                            }
                        }
                    }
                };
                buf.drain(..identified);
                if write
                    .lock()
                    .await
                    .write_all(&frame(0, b"OK"))
                    .await
                    .is_err()
                {
                    return;
                }
                let mut late = slow;
                loop {
                    // Each PUB: `PUB <topic>\n`, size, body; NOPs are lines alone.
                    let line = buf.iter().position(|&b| b == b'\n');
                    let whole = line.and_then(|line| {
                        if buf.starts_with(b"NOP") {
                            return Some((line + 1, false));
                        }
                        let size = buf.get(line + 1..line + 5)?;
                        let size = u32::from_be_bytes(size.try_into().ok()?) as usize;
                        (buf.len() >= line + 5 + size).then_some((line + 5 + size, true))
                    });
                    let Some((whole, publish)) = whole else {
                        let n = read.read(&mut chunk).await.unwrap_or(0);
                        if n == 0 {
                            return;
                        }
                        buf.extend_from_slice(&chunk[..n]);
                        continue;
                    };
                    buf.drain(..whole);
                    if !publish {
                        continue;
                    }
                    let reply = if std::mem::take(&mut late) {
                        tokio::time::sleep(delay).await;
                        frame(1, b"E_BAD_MESSAGE late")
                    } else {
                        frame(0, b"OK")
                    };
                    if write.lock().await.write_all(&reply).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

/// Replies are matched to requests by order, so a reply that comes after its request gave up
/// must not be taken for the reply of a later one: the publish sent between the timeout and
/// the late error gets its own `OK`, never that error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_reply_never_answers_a_later_publish() {
    let addr = late_first_reply_server(Duration::from_millis(900)).await;
    let producer = producer_timing_out(addr, Duration::from_millis(300));
    let started = Instant::now();
    let first = {
        let producer = producer.clone();
        tokio::spawn(async move { producer.publish("t", b"first").await })
    };
    // After the first one's timeout (300 ms, checked every 75), before its late reply (900).
    tokio::time::sleep(Duration::from_millis(500)).await;
    let second = producer.publish("t", b"second").await;
    assert!(
        started.elapsed() < Duration::from_millis(900),
        "{:?}",
        started.elapsed()
    );
    assert!(second.is_ok(), "{second:?}");
    // The first one timed out on the slow connection and went through on a fresh one.
    let first = first.await.expect("task");
    assert!(first.is_ok(), "{first:?}");
    producer.close().await;
}

/// One task keeps 64 publishes in flight through receipts: every one is acknowledged, and
/// every message is on the server exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_publishes_from_one_task_all_arrive() {
    let s = server(Extensions::None).await;
    let q = topic("q");
    let mut config = consumer_config(&[&s], &q, "c");
    config.max_in_flight = 100;
    let consumer = Consumer::connect(config).await.expect("consumer");
    let producer = producer(&[&s]);
    let mut receipts = std::collections::VecDeque::new();
    for i in 0..1000 {
        if receipts.len() == 64 {
            let oldest: PublishReceipt = receipts.pop_front().expect("a receipt");
            oldest.await.expect("OK");
        }
        let body = i.to_string();
        let receipt = producer.publish_queued(&q, body.as_bytes()).await;
        receipts.push_back(receipt.expect("queued"));
    }
    for receipt in receipts {
        receipt.await.expect("OK");
    }
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..1000 {
        let message = recv(&consumer).await;
        assert!(seen.insert(body(&message)), "delivered twice");
        message.finish().await.expect("FIN");
    }
    let expected: std::collections::BTreeSet<String> = (0..1000).map(|i| i.to_string()).collect();
    assert_eq!(seen, expected);
    consumer.stop().await;
    producer.close().await;
}

/// What a receipt reports: bad input is refused before anything is queued; the server's
/// refusal comes through the refused publish's own receipt; the publish queued right after
/// it either went out on the refused connection and fails with it (the server closes after a
/// fatal error), or found it closed already and was queued on a fresh one: whichever, its
/// receipt says `Ok` exactly when the server stored it. The next publish reconnects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_publishes_report_refusals_and_closed_connections() {
    let s = server(Extensions::None).await;
    let t = topic("t");
    let producer = Producer::new(ProducerConfig {
        nsqd: vec![s.tcp_addr().to_string()],
        conn: conn_config(),
        max_msg_size: 2 * 1024 * 1024,
        ..ProducerConfig::default()
    })
    .expect("producer");
    for (topic, body) in [("bad topic", &b"x"[..]), (t.as_str(), b"")] {
        assert!(
            matches!(
                producer.publish_queued(topic, body).await,
                Err(Error::Invalid(_))
            ),
            "{topic:?}"
        );
    }
    let too_big = vec![b'x'; 1024 * 1024 + 1];
    let before = producer
        .publish_queued(&t, b"before")
        .await
        .expect("queued");
    let refused = producer.publish_queued(&t, &too_big).await.expect("queued");
    let behind = producer
        .publish_queued(&t, b"behind")
        .await
        .expect("queued");
    before.await.expect("answered before the refusal");
    match within("the refusal", refused).await {
        Err(Error::Server { error, .. }) => assert_eq!(error.code, "E_BAD_MESSAGE"),
        other => panic!("expected E_BAD_MESSAGE, got {other:?}"),
    }
    let behind = within("the publish behind it", behind).await;
    assert!(
        behind.as_ref().map_or_else(Error::is_transient, |()| true),
        "{behind:?}"
    );
    let again = producer.publish_queued(&t, b"again").await.expect("queued");
    again.await.expect("a fresh connection");
    let stored = 2 + u64::from(behind.is_ok());
    assert_eq!(
        topic_stats(&s, &t).await["message_count"],
        stored,
        "before, again, and behind if its receipt said so ({behind:?})"
    );
    producer.close().await;
    assert!(matches!(
        producer.publish_queued(&t, b"x").await,
        Err(Error::Closed(_))
    ));
}

/// A server that negotiates, reads `publishes` PUB commands (of topic `t`) without
/// answering any, then closes the connection.
async fn closing_server(publishes: usize) -> std::net::SocketAddr {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                if socket.read(&mut buf).await.unwrap_or(0) == 0 {
                    return;
                }
                let ok = [&6u32.to_be_bytes()[..], &0u32.to_be_bytes(), b"OK"].concat();
                if socket.write_all(&ok).await.is_err() {
                    return;
                }
                let mut seen = Vec::new();
                while seen.windows(6).filter(|w| w == b"PUB t\n").count() < publishes {
                    match socket.read(&mut buf).await {
                        Ok(n) if n > 0 => seen.extend_from_slice(&buf[..n]),
                        _ => return,
                    }
                }
            });
        }
    });
    addr
}

/// Receipts of publishes written on a connection that then closes all fail, with a
/// transient error, instead of waiting: none says `Ok`, and none is retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_publishes_fail_with_their_closed_connection() {
    let producer = producer_timing_out(closing_server(3).await, Duration::from_secs(10));
    let mut receipts = Vec::new();
    for body in ["a", "b", "c"] {
        receipts.push(
            producer
                .publish_queued("t", body.as_bytes())
                .await
                .expect("queued"),
        );
    }
    for receipt in receipts {
        let result = within("a receipt on a closed connection", receipt).await;
        assert!(
            result.as_ref().is_err_and(Error::is_transient),
            "{result:?}"
        );
    }
}

/// A receipt whose reply never comes fails with the watchdog's timeout, once: unlike
/// `publish`, it is not retried on a fresh connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_queued_publish_times_out_once() {
    let producer = producer_timing_out(stuck_server().await, Duration::from_millis(1000));
    let started = Instant::now();
    let mut receipts = Vec::new();
    for _ in 0..3 {
        receipts.push(producer.publish_queued("t", b"x").await.expect("queued"));
    }
    for receipt in receipts {
        let result = receipt.await;
        assert!(is_reply_timeout(&result), "{result:?}");
    }
    // One timeout (1 s, checked every 250 ms); a retry would have taken a second one.
    let elapsed = started.elapsed();
    assert!(elapsed >= Duration::from_millis(1000), "{elapsed:?}");
    assert!(
        elapsed < Duration::from_millis(1900),
        "one timeout, not two: {elapsed:?}"
    );
}
