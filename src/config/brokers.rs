//! `[rocketmq]` and `[nsq]`: the sections of the two networked backends.
//!
//! They are plain settings of the facade, parsed whether or not the backend is compiled in, so
//! a config file stays valid across builds; the factory maps them onto each backend's own
//! config type.

use std::path::PathBuf;

use serde::Deserialize;

/// `[rocketmq]`: a RocketMQ cluster reached through its name servers.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RocketmqSection {
    /// Name servers, `host:port`; tried in turn when one fails.
    pub name_servers: Vec<String>,
    /// Namespace prefixed to every topic and group (`ns%name`); empty for none.
    pub namespace: String,
    /// Prefix of the consumer group that backs each subscription.
    pub group_prefix: String,
    /// Timeout of sends and other requests, in milliseconds.
    pub send_timeout_ms: u64,
    /// Messages per pull request.
    pub poll_batch: u32,
    /// How often offsets staged by stream commits and not yet flushed are persisted to the
    /// broker, in milliseconds (plain acks and commits persist at once).
    pub persist_interval_ms: u64,
    /// Period of the heartbeat on every broker connection, in milliseconds.
    pub heartbeat_interval_ms: u64,
    /// How long a heartbeat (or the probe of a connection a request timed out on) may take
    /// before the connection is judged dead, in milliseconds.
    pub probe_timeout_ms: u64,
    /// Bodies longer than this are sent zlib-compressed, as the Java client does; 0 = never.
    pub compress_over_bytes: usize,
    /// Largest message body sent or accepted after decompression, in bytes.
    pub max_message_bytes: usize,
}

impl Default for RocketmqSection {
    fn default() -> Self {
        RocketmqSection {
            name_servers: vec!["127.0.0.1:9876".into()],
            namespace: String::new(),
            group_prefix: String::new(),
            send_timeout_ms: 3000,
            poll_batch: 32,
            persist_interval_ms: 1000,
            heartbeat_interval_ms: 10_000,
            probe_timeout_ms: 3000,
            compress_over_bytes: 4 * 1024,
            max_message_bytes: 4 * 1024 * 1024,
        }
    }
}

/// Which NSQ server flavour `[nsq]` talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NsqExtensions {
    /// Upstream nsqd: no offsets (no seek, readers or latest id), best-effort order.
    #[default]
    None,
    /// Servers with partitions and offsets (the Youzan extensions): seek, readers, latest id and
    /// strict order.
    Partitions,
}

/// What a message in an NSQ consumer's spool survives before it is FINed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NsqSpoolSync {
    /// Written to the OS: survives the process dying, not a power loss.
    #[default]
    Buffered,
    /// `fdatasync`ed before the FIN, once per message: survives a power loss.
    SyncData,
}

/// `[nsq]`: NSQ-protocol servers.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NsqSection {
    /// nsqd TCP addresses, `host:port`.
    pub nsqd: Vec<String>,
    /// The HTTP address of each nsqd, same order: needed to seek, read the latest id, list,
    /// delete and start a subscription at `latest`.
    pub nsqd_http: Vec<String>,
    /// nsqlookupd HTTP addresses; when set, consumers discover nsqds through them, and readers
    /// (with partitions) the nsqd holding their partition, so they need no `nsqd_http`.
    pub lookupd: Vec<String>,
    /// Most unacknowledged messages a consumer holds.
    pub max_in_flight: u32,
    /// Deliveries after which a message is given up; 0 never gives up.
    pub max_attempts: u16,
    /// Requeue delay per attempt, in milliseconds.
    pub requeue_delay_ms: u64,
    /// Server flavour.
    pub extensions: NsqExtensions,
    /// The partition channels live in (with `extensions = "partitions"`).
    pub partition: u32,
    /// The nsqds form a Youzan cluster (with its coordinator; needs `extensions =
    /// "partitions"` and `lookupd`): topics are created and deleted through lookupd, each
    /// partition is used on its leader, and a partition without a leader is waited for.
    pub cluster: bool,
    /// Partitions of the topics the client creates in a cluster.
    pub partitions: u32,
    /// Copies of each partition of the topics the client creates in a cluster.
    pub replicas: u32,
    /// Whether the client creates missing topics (a missing one is an unknown channel
    /// otherwise).
    pub create_topics: bool,
    /// How long to wait for a partition's leader in a cluster, in milliseconds.
    pub leader_wait_ms: u64,
    /// Where consumers that read one message in flight at a time (the timetick stream's, on
    /// upstream nsqd or without `nsqd_http`) keep FINed messages until they are acked; a
    /// restart replays them from here.
    pub spool_dir: PathBuf,
    /// What a spooled message survives before it is FINed.
    pub spool_sync: NsqSpoolSync,
    /// How often nsqd flushes what it buffered for a consumer, in milliseconds (nsqd accepts
    /// 25 to 30000); 0: no buffering, each delivery written at once.
    pub output_buffer_timeout_ms: u64,
}

impl Default for NsqSection {
    fn default() -> Self {
        NsqSection {
            nsqd: vec!["127.0.0.1:4150".into()],
            nsqd_http: Vec::new(),
            lookupd: Vec::new(),
            max_in_flight: 256,
            max_attempts: 0,
            requeue_delay_ms: 1000,
            extensions: NsqExtensions::None,
            partition: 0,
            cluster: false,
            partitions: 1,
            replicas: 1,
            create_topics: true,
            leader_wait_ms: 30_000,
            spool_dir: PathBuf::from("./data/nsq-spool"),
            spool_sync: NsqSpoolSync::Buffered,
            output_buffer_timeout_ms: 0,
        }
    }
}
