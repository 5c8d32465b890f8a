//! [`RocketMqConfig`]: what the facade's config file sets for this backend.

/// RocketMQ's default `maxMessageSize` (brokers and the Java client): 4 MiB.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;

/// The Java client's default `compressMsgBodyOverHowmuch`: 4 KiB.
pub const DEFAULT_COMPRESS_OVER_BYTES: usize = 4 * 1024;

/// Connection settings of the RocketMQ backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RocketMqConfig {
    /// Name servers, `host:port`; tried in turn when one fails.
    pub name_servers: Vec<String>,
    /// Namespace prefixed to every topic and group (`ns%name`); empty for none.
    pub namespace: String,
    /// Prefix of the consumer group that backs each subscription.
    pub group_prefix: String,
    /// Timeout of sends and other requests, ms.
    pub send_timeout_ms: u64,
    /// Messages per pull request.
    pub poll_batch: u32,
    /// How often offsets staged by stream commits and not yet flushed are persisted to the
    /// broker, ms (a plain ack and a commit's flush persist at once).
    pub persist_interval_ms: u64,
    /// Bodies longer than this are sent zlib-compressed (as the Java client does); `0` turns
    /// compression off.
    pub compress_over_bytes: usize,
    /// Largest message body sent or accepted (decompressed), bytes.
    pub max_message_bytes: usize,
}

impl Default for RocketMqConfig {
    fn default() -> Self {
        RocketMqConfig {
            name_servers: vec!["127.0.0.1:9876".to_owned()],
            namespace: String::new(),
            group_prefix: String::new(),
            send_timeout_ms: 3000,
            poll_batch: 32,
            persist_interval_ms: 1000,
            compress_over_bytes: DEFAULT_COMPRESS_OVER_BYTES,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
        }
    }
}
