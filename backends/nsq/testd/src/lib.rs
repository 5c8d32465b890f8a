//! # msgstream-nsq-testd
//!
//! An in-memory NSQ server for tests: protocol V2 as nsqd 1.3.0 speaks it (IDENTIFY
//! negotiation, SUB/PUB/MPUB/DPUB/RDY/FIN/REQ/TOUCH/CLS/NOP/AUTH, heartbeats with the
//! two-interval read deadline, message timeouts with redelivery, nsqd's error codes and which of
//! them close the connection, RDY never exceeded) and, with [`Extensions::Partitions`], the
//! Youzan extensions (partitions, `PUB_TRACE`, `SUB_ORDERED`, `SUB_ADVANCED` with consume
//! offsets, binary ids, offset/raw-size framing). The HTTP side serves `/ping`, `/info`,
//! `/pub`, `/mpub`, `/stats`, topic and channel create/delete (and, with the extensions,
//! `/channel/setoffset` and `/message/get`, whose count index agrees with `/stats`
//! `message_count`); [`TestLookupd`] serves
//! `/lookup` with the partition map over several servers.
//!
//! It is never more lenient than the real servers: what they refuse, it refuses with the same
//! code. It keeps everything in memory and binds loopback ports chosen by the OS.
#![deny(clippy::unwrap_used)]
#![warn(missing_docs)]

mod announce;
mod api;
mod cluster;
mod commands;
mod connections;
mod external;
mod heartbeat;
mod histogram;
mod http;
mod lookupd;
mod lookupd_upstream;
mod output;
mod stats;
mod stats_youzan;
mod store;
mod tcp;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use cluster::{ClusterOptions, TestCluster};
pub use external::ExternalServer;
pub use lookupd::TestLookupd;
use store::Store;

/// Which protocol the server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Extensions {
    /// Upstream nsqd 1.3.0: hex ids, DPUB, no partitions or offsets.
    #[default]
    None,
    /// The Youzan fork: partitions, PUB_TRACE, SUB_ORDERED, SUB_ADVANCED, binary ids; no DPUB;
    /// topics must be created (INTERNAL_CREATE_TOPIC or HTTP `/topic/create`).
    Partitions,
}

impl Extensions {
    pub(crate) fn partitions(self) -> bool {
        self == Extensions::Partitions
    }

    pub(crate) fn version(self) -> &'static str {
        match self {
            Extensions::None => "1.3.0",
            Extensions::Partitions => "0.3.7-HA.1.13.0",
        }
    }
}

/// Server limits and defaults; [`Default`] is nsqd's.
#[derive(Debug, Clone)]
pub struct Options {
    /// Protocol flavour.
    pub extensions: Extensions,
    /// Highest RDY a client may send.
    pub max_rdy_count: u32,
    /// Default message timeout.
    pub msg_timeout: Duration,
    /// Highest message timeout a client may negotiate.
    pub max_msg_timeout: Duration,
    /// Default heartbeat interval.
    pub heartbeat_interval: Duration,
    /// Largest message body.
    pub max_msg_size: usize,
    /// Largest MPUB body.
    pub max_body_size: usize,
    /// Largest REQ / DPUB delay.
    pub max_req_timeout: Duration,
    /// When set, clients must AUTH with this secret before SUB or PUB.
    pub auth_secret: Option<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            extensions: Extensions::None,
            max_rdy_count: 2500,
            msg_timeout: Duration::from_secs(60),
            max_msg_timeout: Duration::from_secs(15 * 60),
            heartbeat_interval: Duration::from_secs(30),
            max_msg_size: 1024 * 1024,
            max_body_size: 5 * 1024 * 1024,
            max_req_timeout: Duration::from_secs(3600),
            auth_secret: None,
        }
    }
}

/// State shared by every connection of one server.
pub(crate) struct Shared {
    pub options: Options,
    store: Mutex<Store>,
    next_client: AtomicU64,
    /// Bumped to drop every connection.
    pub drops: watch::Sender<u64>,
    pub tcp_addr: SocketAddr,
    pub http_addr: SocketAddr,
    /// Coordinator mode: the cluster this nsqd belongs to.
    pub cluster: Option<cluster::ClusterNode>,
    /// When the server started, in seconds since the epoch (`/info`, `/stats`).
    pub start_time: u64,
}

impl Shared {
    /// Locks the store; a poisoned lock (a panicked connection task) still holds consistent
    /// plain data.
    pub(crate) fn store(&self) -> StoreGuard<'_> {
        StoreGuard(self.store.lock().unwrap_or_else(|p| p.into_inner()))
    }

    pub(crate) fn next_client(&self) -> u64 {
        self.next_client.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn pump(&self) {
        self.store().pump(std::time::Instant::now());
    }

    /// Appends `bodies` atomically to a partition that exists; returns id, offset and raw
    /// size of the last one.
    pub(crate) fn put(
        &self,
        topic: &str,
        partition: u32,
        bodies: Vec<Bytes>,
        visible_at: Option<std::time::Instant>,
        trace_id: u64,
    ) -> ([u8; 16], u64, u32) {
        let traced = bodies.into_iter().map(|b| (b, trace_id)).collect();
        self.put_traced(topic, partition, traced, visible_at)
            .pop()
            .unwrap_or(([0u8; 16], 0, 0))
    }

    /// As [`Shared::put`], each message with its own trace id, returning id, offset and raw
    /// size of every message.
    pub(crate) fn put_traced(
        &self,
        topic: &str,
        partition: u32,
        messages: Vec<(Bytes, u64)>,
        visible_at: Option<std::time::Instant>,
    ) -> Vec<([u8; 16], u64, u32)> {
        let (bodies, traces): (Vec<Bytes>, Vec<u64>) = messages.into_iter().unzip();
        let mut store = self.store();
        let ids: Vec<[u8; 16]> = if store.binary_ids {
            // The fork numbers messages per partition, from 2 with the coordinator (Y3, Y4)
            // and from 1 without (Y8), the partition in the bits above 50.
            let first = if self.cluster.is_some() { 2 } else { 1 };
            let part = store.partition_entry(topic, partition);
            traces
                .iter()
                .map(|trace_id| {
                    let sequence = first + part.ids_issued;
                    part.ids_issued += 1;
                    store::youzan_id(partition, sequence, *trace_id)
                })
                .collect()
        } else {
            traces.iter().map(|t| store.new_id(*t)).collect()
        };
        let mut receipts = Vec::with_capacity(ids.len());
        let part = store
            .topics
            .entry(topic.to_string())
            .or_default()
            .partitions
            .entry(partition)
            .or_default();
        let started = std::time::Instant::now();
        let sizes: Vec<usize> = bodies.iter().map(Bytes::len).collect();
        for (id, body) in ids.into_iter().zip(bodies) {
            let index = part.append(id, body, visible_at);
            let stored = &part.log[index];
            receipts.push((id, stored.offset, stored.raw_size));
        }
        part.writes.written(sizes, started.elapsed());
        store.pump(std::time::Instant::now());
        receipts
    }
}

/// The locked store. Releasing it announces the topics and channels that appeared or went
/// while it was held (what nsqd sends its lookupds), whichever code changed them.
pub(crate) struct StoreGuard<'a>(MutexGuard<'a, Store>);

impl std::ops::Deref for StoreGuard<'_> {
    type Target = Store;
    fn deref(&self) -> &Store {
        &self.0
    }
}

impl std::ops::DerefMut for StoreGuard<'_> {
    fn deref_mut(&mut self) -> &mut Store {
        &mut self.0
    }
}

impl Drop for StoreGuard<'_> {
    fn drop(&mut self) {
        let store = &mut *self.0;
        store.announcer.sync(&store.topics);
    }
}

/// Seconds since the epoch (0 if the clock is before it).
pub(crate) fn unix_seconds() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// nsqd's topic/channel name rule: `[.a-zA-Z0-9_-]{1,64}`, optionally `#ephemeral`.
pub(crate) fn valid_name(name: &str) -> bool {
    let base = name.strip_suffix("#ephemeral").unwrap_or(name);
    !base.is_empty()
        && name.len() <= 64
        && base
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// A running server; dropping it stops accepting and drops every connection.
pub struct TestServer {
    shared: Arc<Shared>,
    tasks: Vec<JoinHandle<()>>,
}

impl TestServer {
    /// Starts a server on free loopback ports.
    pub async fn start(options: Options) -> std::io::Result<TestServer> {
        Self::bind(options, "127.0.0.1:0", "127.0.0.1:0").await
    }

    /// Starts a server on the given addresses (port 0 = any free port).
    pub async fn bind(options: Options, tcp: &str, http: &str) -> std::io::Result<TestServer> {
        Self::bind_node(options, tcp, http, None).await
    }

    /// Starts a server, a node of `cluster` when given (coordinator mode).
    pub(crate) async fn bind_node(
        options: Options,
        tcp: &str,
        http: &str,
        cluster: Option<cluster::ClusterNode>,
    ) -> std::io::Result<TestServer> {
        let tcp = TcpListener::bind(tcp).await?;
        let http = TcpListener::bind(http).await?;
        let (drops, _) = watch::channel(0);
        let shared = Arc::new(Shared {
            store: Mutex::new(Store {
                binary_ids: options.extensions.partitions(),
                redeliver_behind: options.extensions == Extensions::None,
                ..Store::default()
            }),
            options,
            next_client: AtomicU64::new(1),
            drops,
            tcp_addr: tcp.local_addr()?,
            http_addr: http.local_addr()?,
            cluster,
            start_time: unix_seconds(),
        });
        let ticker = {
            let shared = shared.clone();
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(Duration::from_millis(10));
                loop {
                    tick.tick().await;
                    shared.pump();
                }
            })
        };
        let tasks = vec![
            tokio::spawn(tcp::serve(tcp, shared.clone())),
            tokio::spawn(http::serve(http, Arc::new(api::Nsqd(shared.clone())))),
            ticker,
        ];
        Ok(TestServer { shared, tasks })
    }

    /// The TCP (protocol V2) address.
    pub fn tcp_addr(&self) -> SocketAddr {
        self.shared.tcp_addr
    }

    /// The HTTP address.
    pub fn http_addr(&self) -> SocketAddr {
        self.shared.http_addr
    }

    /// Closes every client connection at once, without flushing; the server keeps accepting.
    pub fn drop_connections(&self) {
        self.shared.drops.send_modify(|generation| *generation += 1);
    }

    /// Number of connected clients that have subscribed.
    pub fn subscribed_clients(&self) -> usize {
        self.shared.store().clients.len()
    }

    pub(crate) fn shared(&self) -> Arc<Shared> {
        self.shared.clone()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
        self.drop_connections();
    }
}
