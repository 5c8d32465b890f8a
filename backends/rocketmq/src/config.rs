//! [`RocketMqConfig`]: what the facade's config file sets for this backend.

use msgstream::mq::Timestamps;
use serde::Deserialize;

/// RocketMQ's default `maxMessageSize` (brokers and the Java client): 4 MiB.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;

/// The Java client's default `compressMsgBodyOverHowmuch`: 4 KiB.
pub const DEFAULT_COMPRESS_OVER_BYTES: usize = 4 * 1024;

/// Connection settings of the RocketMQ backend: the `[rocketmq]` section of a configuration
/// file, every key optional, unknown keys refused. The [`ConnectionConfig`] keys sit in the
/// same section (`heartbeat_interval_ms = …`), not in a table of their own.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
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
    /// How connections are kept alive and judged dead.
    #[serde(flatten)]
    pub connection: ConnectionConfig,
    /// Bodies longer than this are sent zlib-compressed (as the Java client does); `0` turns
    /// compression off.
    pub compress_over_bytes: usize,
    /// Largest message body sent or accepted (decompressed), bytes.
    pub max_message_bytes: usize,
    /// What message timestamps are: with [`Timestamps::Hybrid`], time searches use the
    /// broker's index of store times (see the crate README, "Seeking by time"); otherwise they
    /// are `Unsupported`. Not a key of `[rocketmq]`: the facade sets it from `[stream]
    /// timestamps` and `clock_slack_ms`, which every backend shares.
    #[serde(skip)]
    pub timestamps: Timestamps,
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
            connection: ConnectionConfig::default(),
            timestamps: Timestamps::Opaque,
        }
    }
}

/// Liveness of the connections to name servers and brokers (see the crate README, "what
/// survives what"). A request or heartbeat that times out makes the
/// connection suspect and sends a probe at once; the probe timing out too closes it. With the
/// defaults a half-open broker connection is closed within `heartbeat_interval_ms + 2 ×
/// probe_timeout_ms` = 16 s, and within `probe_timeout_ms` = 3 s of a request timing out.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct ConnectionConfig {
    /// Dial timeout, ms.
    pub connect_timeout_ms: u64,
    /// Period of the HEART_BEAT sent on every broker connection, ms (the Java client's is
    /// 30 s; shorter here, as it is also how a silent connection is found out).
    pub heartbeat_interval_ms: u64,
    /// How long a heartbeat, or the probe of a connection whose request timed out, may take
    /// before it counts as a failure, ms.
    pub probe_timeout_ms: u64,
    /// Longest a frame may take to be written to the socket before the connection is closed, ms.
    pub write_timeout_ms: u64,
    /// TCP keepalive idle time (and probe interval), ms; 0 leaves keepalive off.
    pub keepalive_ms: u64,
    /// Frames queued per connection for writing; further senders wait (within their timeout).
    pub queued_frames: usize,
    /// Delay before redialling after the first failed dial, ms; doubles per failure.
    pub reconnect_min_backoff_ms: u64,
    /// Longest delay between dials, ms. Each delay's upper half is randomised (jitter).
    pub reconnect_max_backoff_ms: u64,
}

impl Default for ConnectionConfig {
    fn default() -> Self {
        ConnectionConfig {
            connect_timeout_ms: 3000,
            heartbeat_interval_ms: 10_000,
            probe_timeout_ms: 3000,
            write_timeout_ms: 3000,
            keepalive_ms: 30_000,
            queued_frames: 1024,
            reconnect_min_backoff_ms: 100,
            reconnect_max_backoff_ms: 5000,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_section_with_its_connection_keys_and_names_unknown_keys() {
        let config: RocketMqConfig = serde_json::from_str(
            r#"{"name_servers":["a:1"],"poll_batch":8,"heartbeat_interval_ms":500,"probe_timeout_ms":200}"#,
        )
        .expect("config");
        assert_eq!((config.name_servers.len(), config.poll_batch), (1, 8));
        assert_eq!(config.connection.heartbeat_interval_ms, 500);
        assert_eq!(config.connection.probe_timeout_ms, 200);
        assert_eq!(
            config.connection.write_timeout_ms,
            ConnectionConfig::default().write_timeout_ms
        );
        for unknown in [r#"{"name_server":[]}"#, r#"{"heartbeat_ms":1}"#] {
            let error = serde_json::from_str::<RocketMqConfig>(unknown).expect_err(unknown);
            assert!(error.to_string().contains("unknown field"), "{error}");
        }
    }
}
