//! Helpers shared by the integration tests: servers, configs, waits, and `/stats` reads.
//!
//! [`server`] is an nsqd the test may share: the already running server named by
//! `MSGSTREAM_NSQ_NSQD` (and `MSGSTREAM_NSQ_NSQD_HTTP`) when `MSGSTREAM_NSQ_EXTENSIONS` says it
//! speaks the extensions asked for, else a fresh in-process test server. Such tests name their
//! topics with [`topic`], so they share a long-lived server with other tests and earlier runs.
//! [`fixture_server`] is always a fresh test server, for the tests named `fixture_…` that drop
//! connections, set server options, start several servers or a lookupd, or check the test
//! server's own behaviour; with the variables set it fails the test, naming the way out
//! (`-- --skip fixture_`).
#![allow(dead_code)]

use std::future::Future;
use std::net::SocketAddr;
use std::sync::OnceLock;
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

/// The already running server of `MSGSTREAM_NSQ_*` (read by the test server crate, which the
/// conformance harness shares).
pub use msgstream_nsq_testd::ExternalServer as External;

/// The external server, if the variables name one; a malformed variable fails the test. The
/// first call says on stderr which tests use it.
pub fn external() -> Option<&'static External> {
    static EXTERNAL: OnceLock<Result<Option<External>, String>> = OnceLock::new();
    let external = EXTERNAL.get_or_init(|| {
        let external = External::from_env();
        if let Ok(Some(e)) = &external {
            use std::io::Write;
            let http = match e.nsqd_http.first() {
                Some(http) => format!("HTTP {http}"),
                None => "no HTTP address (tests that use it fail)".to_string(),
            };
            let _ = writeln!(
                std::io::stderr(),
                "msgstream-nsq tests: extensions={} tests use the running nsqd {} ({http}); \
                 the other mode's use in-process test servers; fixture_ tests fail (skip them \
                 with `-- --skip fixture_`)",
                extensions_name(e.extensions),
                e.nsqd[0],
            );
        }
        external
    });
    match external {
        Ok(external) => external.as_ref(),
        Err(message) => panic!("{message}"),
    }
}

fn extensions_name(extensions: Extensions) -> &'static str {
    match extensions {
        Extensions::None => "none",
        Extensions::Partitions => "partitions",
    }
}

/// The addresses of one nsqd: a [`Server`] or a [`TestServer`].
pub trait Nsqd {
    /// Its TCP address.
    fn tcp_addr(&self) -> SocketAddr;
    /// Its HTTP address.
    fn http_addr(&self) -> SocketAddr;
}

impl Nsqd for TestServer {
    fn tcp_addr(&self) -> SocketAddr {
        TestServer::tcp_addr(self)
    }

    fn http_addr(&self) -> SocketAddr {
        TestServer::http_addr(self)
    }
}

/// An nsqd a test may share with others: the external one or a test server of its own.
pub enum Server {
    /// The first nsqd of `MSGSTREAM_NSQ_NSQD` (and of `MSGSTREAM_NSQ_NSQD_HTTP`).
    External {
        /// TCP address.
        tcp: SocketAddr,
        /// HTTP address, when given.
        http: Option<SocketAddr>,
    },
    /// A fresh in-process test server.
    Fixture(TestServer),
}

impl Server {
    /// Its TCP address.
    pub fn tcp_addr(&self) -> SocketAddr {
        match self {
            Server::External { tcp, .. } => *tcp,
            Server::Fixture(server) => server.tcp_addr(),
        }
    }

    /// Its HTTP address; fails the test if the external server's was not given.
    pub fn http_addr(&self) -> SocketAddr {
        match self {
            Server::External {
                http: Some(http), ..
            } => *http,
            Server::External { http: None, .. } => panic!(
                "this test uses nsqd's HTTP API: set MSGSTREAM_NSQ_NSQD_HTTP to the running \
                 nsqd's HTTP address"
            ),
            Server::Fixture(server) => server.http_addr(),
        }
    }
}

impl Nsqd for Server {
    fn tcp_addr(&self) -> SocketAddr {
        Server::tcp_addr(self)
    }

    fn http_addr(&self) -> SocketAddr {
        Server::http_addr(self)
    }
}

/// The external server if it speaks `extensions` as one nsqd, else a fresh test server. An
/// external Youzan *cluster* (`MSGSTREAM_NSQ_CLUSTER=true`) is no single nsqd: the tests that
/// speak to one nsqd get a standalone test server, and the adapter's tests use the cluster
/// through [`partitions_config`].
pub async fn server(extensions: Extensions) -> Server {
    match external() {
        Some(e) if e.extensions == extensions && !e.cluster => Server::External {
            tcp: e.nsqd[0],
            http: e.nsqd_http.first().copied(),
        },
        _ => Server::Fixture(
            start(Options {
                extensions,
                ..Options::default()
            })
            .await,
        ),
    }
}

/// The adapter's config for the Youzan extensions: the external cluster's when
/// `MSGSTREAM_NSQ_CLUSTER=true` (every nsqd, the lookupd, `cluster = true`; channels in
/// partition 0 of topics of two partitions that the client creates through the lookupd),
/// else one for `server` (a standalone nsqd, topics created with `INTERNAL_CREATE_TOPIC`).
pub fn partitions_config(server: &Server) -> msgstream_nsq::NsqConfig {
    let strings = |addrs: &[SocketAddr]| addrs.iter().map(|a| a.to_string()).collect();
    match external().filter(|e| e.cluster) {
        Some(e) => msgstream_nsq::NsqConfig {
            nsqd: strings(&e.nsqd),
            nsqd_http: strings(&e.nsqd_http),
            lookupd: strings(&e.lookupd),
            extensions: msgstream_nsq::Extensions::Partitions,
            cluster: true,
            partitions: 2,
            ..msgstream_nsq::NsqConfig::default()
        },
        None => msgstream_nsq::NsqConfig {
            nsqd: vec![server.tcp_addr().to_string()],
            nsqd_http: vec![server.http_addr().to_string()],
            extensions: msgstream_nsq::Extensions::Partitions,
            ..msgstream_nsq::NsqConfig::default()
        },
    }
}

/// Creates partitions `0..partitions` of `topic` on a standalone Youzan nsqd with the
/// client's own `INTERNAL_CREATE_TOPIC` (no test-server-only HTTP endpoint).
pub async fn create_youzan_topic<S: Nsqd>(server: &S, topic: &str, partitions: u32) {
    let producer = producer(&[server]);
    for partition in 0..partitions {
        producer
            .create_topic(topic, partition)
            .await
            .expect("INTERNAL_CREATE_TOPIC");
    }
    producer.close().await;
}

/// A fresh test server with default options, for a `fixture_` test.
pub async fn fixture_server(extensions: Extensions) -> TestServer {
    fixture_server_with(Options {
        extensions,
        ..Options::default()
    })
    .await
}

/// A fresh test server with `options`, for a `fixture_` test: fails the test when the
/// variables name an external server, which cannot stand in for it.
pub async fn fixture_server_with(options: Options) -> TestServer {
    if external().is_some() {
        panic!(
            "this test needs the in-process test server (it drops connections, sets server \
             options, starts several servers or a lookupd, or checks the test server's own \
             behaviour); run it without MSGSTREAM_NSQ_NSQD or skip it with `-- --skip fixture_`"
        );
    }
    start(options).await
}

async fn start(options: Options) -> TestServer {
    TestServer::start(options).await.expect("test server")
}

/// A topic name no other test, run or process uses (tests on a shared server need one).
pub fn topic(prefix: &str) -> String {
    msgstream::testkit::unique(prefix)
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

pub fn consumer_config<S: Nsqd>(servers: &[&S], topic: &str, channel: &str) -> ConsumerConfig {
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

pub fn producer<S: Nsqd>(servers: &[&S]) -> Producer {
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

/// `GET`/`POST` over HTTP/1.1, returning status and body (de-chunked: nsqd's Go server
/// sends a large `/stats` in chunks).
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
    let chunked = String::from_utf8_lossy(&raw[..end]).lines().any(|line| {
        let line = line.to_ascii_lowercase();
        line.starts_with("transfer-encoding:") && line.contains("chunked")
    });
    let body = &raw[end + 4..];
    (
        status,
        if chunked {
            dechunk(body)
        } else {
            body.to_vec()
        },
    )
}

/// The data of a chunked HTTP body.
fn dechunk(mut body: &[u8]) -> Vec<u8> {
    let mut data = Vec::new();
    loop {
        let line_end = body
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("chunk size line");
        let size_text = String::from_utf8_lossy(&body[..line_end]);
        let size_text = size_text.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_text, 16).expect("chunk size");
        if size == 0 {
            return data;
        }
        let start = line_end + 2;
        data.extend_from_slice(&body[start..start + size]);
        body = &body[start + size + 2..];
    }
}

/// The `/stats` (JSON) of the nsqd whose HTTP address is `http_addr`, unwrapped from the
/// fork's `{"status_code","status_txt","data"}`.
pub async fn stats_at(http_addr: SocketAddr) -> Value {
    let (_, body) = http(http_addr, "GET", "/stats?format=json", b"").await;
    unwrap_data(serde_json::from_slice(&body).expect("stats json"))
}

/// A Youzan reply's `data`, or the reply itself when it is not wrapped.
pub fn unwrap_data(reply: Value) -> Value {
    match reply {
        Value::Object(mut map) if map.contains_key("status_code") && map.contains_key("data") => {
            map.remove("data").unwrap_or(Value::Null)
        }
        other => other,
    }
}

/// A channel's consumers in `/stats`: nsqd 1.3.0's `client_count`, the fork's `client_num`.
pub fn client_count(channel: &Value) -> Value {
    channel
        .get("client_count")
        .or_else(|| channel.get("client_num"))
        .cloned()
        .unwrap_or(Value::Null)
}

/// The `/stats` entries of `topic` on `partition` (every partition when `None`).
pub fn topic_entries(stats: &Value, topic: &str, partition: Option<u32>) -> Vec<Value> {
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
        .cloned()
        .collect()
}

/// The `/stats` entry of `topic` (its first partition's, with the extensions), or `Null`.
pub async fn topic_stats(server: &impl Nsqd, topic: &str) -> Value {
    let stats = stats_at(server.http_addr()).await;
    topic_entries(&stats, topic, None)
        .into_iter()
        .next()
        .unwrap_or(Value::Null)
}

/// The `/stats` entry of one channel of `topic` on `partition`.
pub async fn channel_stats(
    server: &impl Nsqd,
    topic: &str,
    partition: Option<u32>,
    channel: &str,
) -> Value {
    channel_stats_at(server.http_addr(), topic, partition, channel).await
}

/// [`channel_stats`] of the nsqd whose HTTP address is `http_addr`.
pub async fn channel_stats_at(
    http_addr: SocketAddr,
    topic: &str,
    partition: Option<u32>,
    channel: &str,
) -> Value {
    let stats = stats_at(http_addr).await;
    topic_entries(&stats, topic, partition)
        .into_iter()
        .flat_map(|t| t["channels"].as_array().cloned().unwrap_or_default())
        .find(|c| c["channel_name"] == channel)
        .unwrap_or(Value::Null)
}

/// The next message of an mq consumer, within [`WAIT`].
pub async fn recv_mq(consumer: &mut Box<dyn msgstream::mq::Consumer>) -> msgstream::mq::Message {
    within("a message", consumer.recv())
        .await
        .expect("recv")
        .expect("open")
}

/// Publishes `m<from>` … `m<from + count - 1>` through the mq adapter; returns their ids.
pub async fn publish_mq(
    client: &msgstream_nsq::NsqClient,
    topic: &str,
    from: usize,
    count: usize,
) -> Vec<msgstream::mq::MessageId> {
    use msgstream::mq::{Client, ProducerMessage};
    let producer = client.create_producer(topic).await.expect("producer");
    producer
        .send_batch(
            (from..from + count)
                .map(|i| ProducerMessage::new(format!("m{i}")))
                .collect(),
        )
        .await
        .expect("publish")
}

/// A Youzan cluster (an in-process `TestCluster`) of one coordinator-mode nsqd per partition
/// of `topic`, created through its lookupd: partition p is led by `nsqds()[p]`. The server
/// for tests of consume offsets, which a standalone Youzan nsqd refuses ("Not supported while
/// coordinator disabled", transcript Y8).
pub async fn offsets_cluster(topic: &str, partitions: u32) -> msgstream_nsq_testd::TestCluster {
    let cluster = msgstream_nsq_testd::TestCluster::start(msgstream_nsq_testd::ClusterOptions {
        nsqds: partitions.max(1) as usize,
        ..msgstream_nsq_testd::ClusterOptions::default()
    })
    .await
    .expect("test cluster");
    let (status, body) = http(
        cluster.lookupd_http_addr(),
        "POST",
        &format!("/topic/create?topic={topic}&partition_num={partitions}&replicator=1"),
        b"",
    )
    .await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    for partition in 0..partitions {
        eventually("the partition's leader", async || {
            cluster.leader_of(topic, partition) == Some(partition as usize)
        })
        .await;
    }
    cluster
}
