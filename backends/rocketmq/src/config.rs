//! [`RocketMqConfig`]: what the facade's config file sets for this backend.

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
    /// How often acknowledged offsets are persisted to the broker, ms.
    pub persist_interval_ms: u64,
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
        }
    }
}
