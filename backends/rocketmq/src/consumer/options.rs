//! Options of the lite pull consumer.

use std::time::Duration;

/// Where a group with no committed offset for a queue starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ConsumeFrom {
    /// The oldest stored message.
    First,
    /// Only messages stored from now on (retry topics still start at their first message).
    #[default]
    Last,
    /// The first message stored at or after this time (ms since the epoch).
    Timestamp(i64),
}

/// How messages of a subscribed topic are filtered on the broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    /// Every message.
    All,
    /// Messages with one of these tags.
    Tags(Vec<String>),
}

impl Selector {
    /// The broker's expression: `*` or `a||b` (no spaces: the rust broker does not trim them).
    pub fn expression(&self) -> String {
        match self {
            Selector::All => "*".to_owned(),
            Selector::Tags(tags) => tags.join("||"),
        }
    }

    /// Whether a message with `tag` passes (the broker filters by hash code only).
    pub fn matches(&self, tag: Option<&str>) -> bool {
        match self {
            Selector::All => true,
            Selector::Tags(tags) => tag.is_some_and(|t| tags.iter().any(|x| x == t)),
        }
    }

    /// Parses `*` or `a || b`.
    pub fn parse(expression: &str) -> Selector {
        let tags: Vec<String> = expression
            .split("||")
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_owned)
            .collect();
        if tags.is_empty() || tags.iter().any(|t| t == "*") {
            Selector::All
        } else {
            Selector::Tags(tags)
        }
    }
}

/// Everything configurable about a [`super::LitePullConsumer`].
#[derive(Debug, Clone)]
pub struct ConsumerOptions {
    /// Consumer group (application-side name; the namespace is added).
    pub group: String,
    /// Start of queues the group never committed an offset for.
    pub consume_from: ConsumeFrom,
    /// Messages per pull request.
    pub pull_batch: u32,
    /// How long the broker may hold a pull when there is nothing new.
    pub long_poll: Duration,
    /// Buffered batches per queue before its fetching pauses.
    pub queue_buffer: usize,
    /// Buffered batches in total before all fetching pauses.
    pub total_buffer: usize,
    /// How often in-memory offsets are persisted to the broker.
    pub persist_interval: Duration,
    /// How often queues are re-allocated (also on membership change).
    pub rebalance_interval: Duration,
    /// How often the consumer announces itself to the brokers.
    pub heartbeat_interval: Duration,
    /// Reconsumptions before a message goes to the dead-letter queue.
    pub max_reconsume_times: i32,
    /// Delay level of sent-back messages; 0 lets the broker pick (3 + reconsume times).
    pub retry_delay_level: i32,
    /// Timeout of ordinary requests.
    pub request_timeout: Duration,
    /// Largest message body accepted, after decompression: a compressed body inflating past
    /// it is a corrupt record, not an allocation (RocketMQ's `maxMessageSize`).
    pub max_message_bytes: usize,
}

impl ConsumerOptions {
    /// Defaults for `group`.
    pub fn new(group: impl Into<String>) -> Self {
        ConsumerOptions {
            group: group.into(),
            consume_from: ConsumeFrom::default(),
            pull_batch: 32,
            long_poll: Duration::from_secs(15),
            queue_buffer: 4,
            total_buffer: 64,
            persist_interval: Duration::from_secs(5),
            rebalance_interval: Duration::from_secs(20),
            heartbeat_interval: Duration::from_secs(10),
            max_reconsume_times: 16,
            retry_delay_level: 0,
            request_timeout: Duration::from_secs(3),
            max_message_bytes: crate::config::DEFAULT_MAX_MESSAGE_BYTES,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors() {
        assert_eq!(Selector::parse("*"), Selector::All);
        assert_eq!(Selector::parse(""), Selector::All);
        let s = Selector::parse("a || b");
        assert_eq!(s.expression(), "a||b");
        assert!(s.matches(Some("b")) && !s.matches(Some("c")) && !s.matches(None));
        assert!(Selector::All.matches(None));
    }
}
