//! Protocol edges the client must get right: the server's `max_msg_timeout` caps what the
//! client asks for, MPUB is all or nothing, a server that stops reading fails a publish within
//! the write timeout, and a consumer of one partition hears only that partition. The tests
//! that need server options (or the test server's own refusals) are `fixture_` tests; the
//! write-timeout ones use a listener of their own that never reads.

mod common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use msgstream_nsq::conn::Conn;
use msgstream_nsq::{ConnConfig, Consumer, Error, Producer, ProducerConfig};
use msgstream_nsq_testd::{Extensions, Options, TestServer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn start(options: Options) -> TestServer {
    common::fixture_server_with(options).await
}

/// `/stats` `message_count` of `topic` on `partition` (every message ever stored there), or
/// `None` when the server has no such topic.
async fn stored(server: &TestServer, topic: &str, partition: Option<u32>) -> Option<u64> {
    let (status, body) = http(server.http_addr(), "GET", "/stats?format=json", b"").await;
    assert_eq!(status, 200);
    let stats = unwrap_data(serde_json::from_slice(&body).expect("stats json"));
    stats["topics"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["topic_name"] == topic)
        .find(|t| partition.is_none_or(|p| t["topic_partition"].as_str() == Some(&p.to_string())))
        .and_then(|t| t["message_count"].as_u64())
}

/// The server's message timeout as the client negotiates it when configured to ask for
/// `asked`.
async fn negotiate(server: &TestServer, asked: Option<Duration>) -> Result<Conn, Error> {
    let config = ConnConfig {
        msg_timeout: asked,
        ..conn_config()
    };
    Conn::connect(
        &server.tcp_addr().to_string(),
        &config,
        None,
        false,
        |_, _| {},
    )
    .await
}

// ---------------------------------------------------------------------------------------------
// 1. max_msg_timeout

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixture_a_msg_timeout_above_the_servers_max_is_capped_at_the_max() {
    let s = start(Options {
        msg_timeout: Duration::from_secs(1),
        max_msg_timeout: Duration::from_secs(3),
        ..Options::default()
    })
    .await;
    // nsqd refuses the IDENTIFY itself; the client connects anyway, at the maximum.
    let capped = negotiate(&s, Some(Duration::from_secs(60)))
        .await
        .expect("connects although the server refuses 60 s");
    assert_eq!(capped.negotiated.max_msg_timeout, Duration::from_secs(3));
    assert_eq!(capped.negotiated.msg_timeout, Duration::from_secs(3));
    // Within the range: exactly what was asked; nothing asked: the server's default.
    let within_range = negotiate(&s, Some(Duration::from_secs(2)))
        .await
        .expect("2 s");
    assert_eq!(within_range.negotiated.msg_timeout, Duration::from_secs(2));
    let default = negotiate(&s, None).await.expect("default");
    assert_eq!(default.negotiated.msg_timeout, Duration::from_secs(1));
    // Below the server's minimum is a configuration error the client does not paper over.
    match negotiate(&s, Some(Duration::from_millis(500))).await {
        Err(Error::Server { error, .. }) => {
            assert_eq!(error.code, "E_BAD_BODY");
            assert!(error.text.contains("msg timeout"), "{}", error.text);
        }
        other => panic!("expected E_BAD_BODY, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixture_a_server_whose_default_is_its_max_grants_the_max() {
    let s = start(Options {
        msg_timeout: Duration::from_secs(2),
        max_msg_timeout: Duration::from_secs(2),
        ..Options::default()
    })
    .await;
    let conn = negotiate(&s, Some(Duration::from_secs(30)))
        .await
        .expect("connects");
    assert_eq!(conn.negotiated.msg_timeout, Duration::from_secs(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixture_producers_and_consumers_asking_above_the_max_run_at_the_max() {
    let max = Duration::from_secs(3);
    let s = start(Options {
        msg_timeout: Duration::from_secs(1),
        max_msg_timeout: max,
        ..Options::default()
    })
    .await;
    let mut config = consumer_config(&[&s], "capped", "c");
    config.conn.msg_timeout = Some(Duration::from_secs(600));
    config.max_attempts = 0;
    let consumer = Consumer::connect(config).await.expect("consumer connects");
    let producer = Producer::new(ProducerConfig {
        nsqd: vec![s.tcp_addr().to_string()],
        conn: ConnConfig {
            msg_timeout: Some(Duration::from_secs(600)),
            ..conn_config()
        },
        ..ProducerConfig::default()
    })
    .expect("producer");
    producer.publish("capped", b"held").await.expect("publish");
    let first = recv(&consumer).await;
    let delivered = Instant::now();
    assert_eq!(first.attempts(), 1);
    // Left unanswered, it comes back once the capped timeout (not the 1 s default, not the
    // 600 s asked for) runs out.
    let again = recv(&consumer).await;
    let held = delivered.elapsed();
    assert_eq!((body(&again), again.attempts()), ("held".to_string(), 2));
    assert!(held >= max - Duration::from_secs(1), "{held:?}");
    again.finish().await.expect("FIN");
    // The first delivery timed out on the server; answering it settles the consumer's count.
    first.finish().await.expect("FIN of the timed-out delivery");
    consumer.stop().await;
}

// ---------------------------------------------------------------------------------------------
// 4. MPUB is atomic

/// The bytes of `MPUB topic` with `bodies`.
fn mpub(topic: &str, bodies: &[&[u8]]) -> Vec<u8> {
    let mut command = format!("MPUB {topic}\n").into_bytes();
    let total: usize = 4 + bodies.iter().map(|b| 4 + b.len()).sum::<usize>();
    command.extend_from_slice(&(total as u32).to_be_bytes());
    command.extend_from_slice(&(bodies.len() as u32).to_be_bytes());
    for body in bodies {
        command.extend_from_slice(&(body.len() as u32).to_be_bytes());
        command.extend_from_slice(body);
    }
    command
}

/// Sends the magic, IDENTIFY and `command` on a fresh socket; returns the frames that come
/// back (type and data) until the server closes or answers `OK`.
async fn raw_command(server: &TestServer, command: &[u8]) -> Vec<(i32, Vec<u8>)> {
    let mut socket = tokio::net::TcpStream::connect(server.tcp_addr())
        .await
        .expect("connect");
    let identify = br#"{"feature_negotiation":false}"#;
    let mut out = b"  V2IDENTIFY\n".to_vec();
    out.extend_from_slice(&(identify.len() as u32).to_be_bytes());
    out.extend_from_slice(identify);
    out.extend_from_slice(command);
    socket.write_all(&out).await.expect("write");
    let mut frames = Vec::new();
    loop {
        let mut head = [0u8; 8];
        if within("a frame", socket.read_exact(&mut head))
            .await
            .is_err()
        {
            return frames;
        }
        let size = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
        let kind = i32::from_be_bytes([head[4], head[5], head[6], head[7]]);
        let mut data = vec![0u8; size - 4];
        within("frame data", socket.read_exact(&mut data))
            .await
            .expect("frame data");
        // The first OK answers IDENTIFY.
        let answered = kind == 0 && data == b"OK" && !frames.is_empty();
        frames.push((kind, data));
        if answered {
            return frames;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixture_the_server_refuses_an_mpub_with_one_bad_body_whole() {
    let s = start(Options {
        max_msg_size: 16,
        ..Options::default()
    })
    .await;
    assert_eq!(
        http(s.http_addr(), "POST", "/topic/create?topic=m", b"")
            .await
            .0,
        200
    );
    let big = [b'x'; 17];
    for (bodies, text) in [
        (
            [&b"one"[..], b"", b"three"],
            "MPUB invalid message(1) body size 0",
        ),
        ([&b"one"[..], b"two", &big], "MPUB message too big 17 > 16"),
    ] {
        let frames = raw_command(&s, &mpub("m", &bodies)).await;
        assert_eq!(frames[0], (0, b"OK".to_vec()), "IDENTIFY answered");
        let refusal = format!("E_BAD_MESSAGE {text}").into_bytes();
        assert_eq!(frames[1..], [(1, refusal)], "refused, then closed");
        assert_eq!(stored(&s, "m", None).await, Some(0), "nothing of the batch");
    }
    // The same check sees a batch that is stored.
    let frames = raw_command(&s, &mpub("m", &[b"one", b"two", b"three"])).await;
    assert_eq!(frames.last(), Some(&(0, b"OK".to_vec())));
    assert_eq!(stored(&s, "m", None).await, Some(3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixture_a_batch_the_server_refuses_is_an_error_and_none_of_it_is_delivered() {
    // The server's max_msg_size is below the producer's, so the producer sends the batch.
    let s = start(Options {
        max_msg_size: 16,
        ..Options::default()
    })
    .await;
    let consumer = Consumer::connect(consumer_config(&[&s], "batch", "c"))
        .await
        .expect("consumer");
    let producer = producer(&[&s]);
    let bodies = [
        Bytes::from_static(b"first"),
        Bytes::from(vec![b'x'; 17]),
        Bytes::from_static(b"third"),
    ];
    match producer.multi_publish("batch", None, &bodies).await {
        Err(Error::Server { error, .. }) => {
            assert_eq!(error.code, "E_BAD_MESSAGE");
            assert!(!Error::Server {
                addr: String::new(),
                error
            }
            .is_transient());
        }
        other => panic!("expected E_BAD_MESSAGE, got {other:?}"),
    }
    // The producer reconnects; what follows is the first thing stored and delivered.
    producer.publish("batch", b"after").await.expect("publish");
    let message = recv(&consumer).await;
    assert_eq!(body(&message), "after");
    message.finish().await.expect("FIN");
    assert_eq!(stored(&s, "batch", None).await, Some(1));
    consumer.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixture_a_batch_with_an_empty_body_is_refused_before_sending() {
    let s = start(Options::default()).await;
    let consumer = Consumer::connect(consumer_config(&[&s], "local", "c"))
        .await
        .expect("consumer");
    let producer = producer(&[&s]);
    let with_empty = [
        Bytes::from_static(b"first"),
        Bytes::new(),
        Bytes::from_static(b"third"),
    ];
    let too_big = [
        Bytes::from_static(b"first"),
        Bytes::from(vec![b'x'; 1024 * 1024 + 1]),
    ];
    for bodies in [&with_empty[..], &too_big[..], &[]] {
        let refused = producer.multi_publish("local", None, bodies).await;
        assert!(matches!(refused, Err(Error::Invalid(_))), "{refused:?}");
    }
    producer.publish("local", b"after").await.expect("publish");
    let message = recv(&consumer).await;
    assert_eq!(body(&message), "after");
    message.finish().await.expect("FIN");
    assert_eq!(stored(&s, "local", None).await, Some(1));
    consumer.stop().await;
}

// ---------------------------------------------------------------------------------------------
// 5. Write timeout

/// A server that answers the magic and IDENTIFY with `OK` on every connection and then never
/// reads again (nor writes: no heartbeat, so only a deadline can end the client's wait). Its
/// small receive buffer makes the client's socket buffers fill soon.
async fn deaf_server() -> std::net::SocketAddr {
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket.set_recv_buffer_size(4096).expect("SO_RCVBUF");
    socket
        .bind("127.0.0.1:0".parse().expect("addr"))
        .expect("bind");
    let listener = socket.listen(16).expect("listen");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((mut socket, _)) = listener.accept().await {
            // Magic, "IDENTIFY\n", size, JSON.
            let mut head = [0u8; 4 + 9 + 4];
            if socket.read_exact(&mut head).await.is_err() {
                continue;
            }
            let size = u32::from_be_bytes([head[13], head[14], head[15], head[16]]);
            let mut identify = vec![0u8; size as usize];
            if socket.read_exact(&mut identify).await.is_err() {
                continue;
            }
            let _ = socket.write_all(b"\0\0\0\x06\0\0\0\0OK").await;
            held.push(socket);
        }
    });
    addr
}

/// A producer of the one nsqd at `addr` whose writes time out after `write_timeout` and whose
/// replies would only time out after 30 s.
fn producer_with_write_timeout(
    addr: std::net::SocketAddr,
    write_timeout: Duration,
    max_msg_size: usize,
) -> Producer {
    Producer::new(ProducerConfig {
        nsqd: vec![addr.to_string()],
        conn: ConnConfig {
            write_timeout,
            read_timeout: Duration::from_secs(30),
            ..conn_config()
        },
        max_msg_size,
        max_body_size: max_msg_size + 1024,
    })
    .expect("producer")
}

fn is_write_timeout<T: std::fmt::Debug>(result: &Result<T, Error>, timeout: Duration) -> bool {
    matches!(result, Err(Error::Timeout { what: "write", after, .. }) if *after == timeout)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publishes_to_a_server_that_stops_reading_fail_within_the_write_timeout() {
    let timeout = Duration::from_millis(500);
    let producer = producer_with_write_timeout(deaf_server().await, timeout, 1024 * 1024);
    let body = vec![b'x'; 1024 * 1024];
    let started = Instant::now();
    // 32 MiB queued: far more than the socket buffers hold.
    let mut receipts = Vec::new();
    for _ in 0..32 {
        receipts.push(
            producer
                .publish_queued("deaf", &body)
                .await
                .expect("queued"),
        );
    }
    for receipt in receipts {
        let result = within("a failed publish", receipt).await;
        assert!(is_write_timeout(&result, timeout), "{result:?}");
    }
    // Failed by the write timeout, long before the 30 s reply timeout.
    let elapsed = started.elapsed();
    assert!(elapsed < timeout + Duration::from_secs(3), "{elapsed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publish_to_a_server_that_stops_reading_fails_with_a_write_timeout() {
    let timeout = Duration::from_millis(500);
    let size = 32 * 1024 * 1024;
    let producer = producer_with_write_timeout(deaf_server().await, timeout, size);
    let started = Instant::now();
    let result = within(
        "a failed publish",
        producer.publish("deaf", &vec![b'x'; size]),
    )
    .await;
    assert!(is_write_timeout(&result, timeout), "{result:?}");
    // Each nsqd is tried twice (a fresh connection the second time): two write timeouts.
    let elapsed = started.elapsed();
    assert!(
        elapsed < 2 * timeout + Duration::from_secs(3),
        "{elapsed:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// 6. SUB with a partition

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixture_a_consumer_of_one_partition_gets_only_that_partitions_messages() {
    let s = start(Options {
        extensions: Extensions::Partitions,
        ..Options::default()
    })
    .await;
    create_youzan_topic(&s, "parts", 2).await;
    let mut config = consumer_config(&[&s], "parts", "one");
    config.partition = Some(1);
    config.max_in_flight = 10;
    let consumer = Consumer::connect(config).await.expect("consumer");
    let producer = producer(&[&s]);
    for (partition, body) in [
        (0, "zero-a"),
        (1, "one-a"),
        (0, "zero-b"),
        (1, "one-b"),
        (0, "zero-c"),
        (1, "one-end"),
    ] {
        producer
            .publish_to("parts", partition, body.as_bytes())
            .await
            .expect("publish");
    }
    // Partition 1's messages in order, and nothing of partition 0 before the last of them.
    for want in ["one-a", "one-b", "one-end"] {
        let message = recv(&consumer).await;
        assert_eq!(body(&message), want);
        assert_eq!(message.origin().partition, Some(1));
        message.finish().await.expect("FIN");
    }
    assert!(consumer.try_recv().await.is_none());
    // Partition 0 holds its messages, and the consumer never subscribed there.
    assert_eq!(stored(&s, "parts", Some(0)).await, Some(3));
    assert_eq!(
        channel_stats(&s, "parts", Some(0), "one").await,
        serde_json::Value::Null
    );
    assert_eq!(
        client_count(&channel_stats(&s, "parts", Some(1), "one").await),
        1
    );
    consumer.stop().await;
}
