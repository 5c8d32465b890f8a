//! Helpers shared by the integration tests: servers, configs, waits, and `/stats` reads.
#![allow(dead_code)]

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use msgstream_nsq::{ConnConfig, Consumer, ConsumerConfig, Message, Producer, ProducerConfig};
use msgstream_nsq_testd::{Extensions, Options, TestServer};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Longest wait for any event in a test.
pub const WAIT: Duration = Duration::from_secs(15);

/// Awaits `fut` or fails the test naming `what`.
pub async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, fut)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

/// Polls `check` every 10 ms until it holds (for server-side state that has no event).
pub async fn eventually(what: &str, mut check: impl AsyncFnMut() -> bool) {
    within(what, async {
        while !check().await {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
}

pub async fn server(extensions: Extensions) -> TestServer {
    TestServer::start(Options {
        extensions,
        ..Options::default()
    })
    .await
    .expect("test server")
}

/// Fast heartbeats and a 1 s message timeout, so timeouts show up quickly.
pub fn conn_config() -> ConnConfig {
    ConnConfig {
        heartbeat_interval: Duration::from_secs(1),
        msg_timeout: Some(Duration::from_secs(1)),
        read_timeout: Duration::from_secs(5),
        ..ConnConfig::default()
    }
}

pub fn consumer_config(servers: &[&TestServer], topic: &str, channel: &str) -> ConsumerConfig {
    let mut config = ConsumerConfig::new(topic, channel);
    config.nsqd = servers.iter().map(|s| s.tcp_addr().to_string()).collect();
    config.nsqd_http = servers.iter().map(|s| s.http_addr().to_string()).collect();
    config.conn = conn_config();
    config.reconnect_interval = Duration::from_millis(50);
    config.default_requeue_delay = Duration::ZERO;
    config.backoff.multiplier = Duration::from_millis(5);
    config.backoff.max = Duration::from_millis(100);
    config
}

pub fn producer(servers: &[&TestServer]) -> Producer {
    Producer::new(ProducerConfig {
        nsqd: servers.iter().map(|s| s.tcp_addr().to_string()).collect(),
        conn: conn_config(),
        ..ProducerConfig::default()
    })
    .expect("producer")
}

pub async fn recv(consumer: &Consumer) -> Message {
    within("a message", consumer.recv())
        .await
        .expect("consumer still running")
}

pub fn body(message: &Message) -> String {
    String::from_utf8_lossy(message.body()).into_owned()
}

/// `GET`/`POST` over HTTP/1.1, returning status and body.
pub async fn http(addr: SocketAddr, method: &str, target: &str, body: &[u8]) -> (u16, Vec<u8>) {
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connect http");
    let head = format!(
        "{method} {target} HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.expect("write");
    stream.write_all(body).await.expect("write");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.expect("read");
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("head");
    let status = String::from_utf8_lossy(&raw[9..12])
        .parse()
        .expect("status");
    (status, raw[end + 4..].to_vec())
}

/// The `/stats` entry of one channel of `topic` on `partition`.
pub async fn channel_stats(
    server: &TestServer,
    topic: &str,
    partition: Option<u32>,
    channel: &str,
) -> Value {
    let (_, body) = http(server.http_addr(), "GET", "/stats?format=json", b"").await;
    let stats: Value = serde_json::from_slice(&body).expect("stats json");
    stats["topics"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["topic_name"] == topic)
        .filter(|t| {
            partition.is_none_or(|p| {
                t["topic_partition"].as_str().and_then(|s| s.parse().ok()) == Some(p)
            })
        })
        .flat_map(|t| t["channels"].as_array().cloned().unwrap_or_default())
        .find(|c| c["channel_name"] == channel)
        .unwrap_or(Value::Null)
}
