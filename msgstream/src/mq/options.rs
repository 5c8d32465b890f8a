//! Options for creating consumers and readers, and the channel-name rule.

use super::MessageId;
use crate::{Error, Result};

/// Where a *new* subscription starts. An existing subscription always resumes from its own
/// acked position, whatever this says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InitialPosition {
    /// From the oldest message the channel still holds.
    #[default]
    Earliest,
    /// Only messages produced after the subscription was created.
    Latest,
    /// From the first message whose timestamp is ≥ this one (timestamps and "first" as in
    /// [`crate::mq::time`]; the position [`crate::mq::Client::message_id_at_time`] answers at
    /// subscribe time). `Error::Unsupported` where `Capabilities::seek_time` is false.
    Timestamp(u64),
}

/// How to subscribe a consumer.
///
/// `#[non_exhaustive]`: build with [`ConsumerOptions::new`] and the `with_*` methods.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConsumerOptions {
    /// Channel (topic) to consume.
    pub topic: String,
    /// Subscription (consumer group) name; its position is durable where the backend says so.
    pub subscription: String,
    /// Start of a new subscription.
    pub initial_position: InitialPosition,
    /// How many received-but-not-yet-returned messages the consumer may hold in memory.
    pub buffer: usize,
    /// The consumer must see the channel strictly in the producer's order, even where that
    /// costs throughput: the timetick-aligned stream asks for it. A backend whose every
    /// consumer is strictly ordered ignores it; one that orders only on request (NSQ: ordered
    /// subscriptions of its partition extension, else one message in flight through a local
    /// spool) honours it, and says in its docs what it cannot guarantee.
    pub ordered: bool,
}

impl ConsumerOptions {
    /// Options with the default buffer (1024) starting at [`InitialPosition::Earliest`].
    pub fn new(topic: impl Into<String>, subscription: impl Into<String>) -> Self {
        ConsumerOptions {
            topic: topic.into(),
            subscription: subscription.into(),
            initial_position: InitialPosition::Earliest,
            buffer: 1024,
            ordered: false,
        }
    }

    /// Same options, holding at most `buffer` received messages in memory.
    pub fn with_buffer(mut self, buffer: usize) -> Self {
        self.buffer = buffer;
        self
    }

    /// Same options, starting a new subscription at `position`.
    pub fn with_initial_position(mut self, position: InitialPosition) -> Self {
        self.initial_position = position;
        self
    }

    /// Same options, asking for strict channel order (see [`ConsumerOptions::ordered`]).
    pub fn in_order(mut self) -> Self {
        self.ordered = true;
        self
    }
}

/// How to open a reader: a non-durable cursor starting at a message id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReaderOptions {
    /// Channel to read.
    pub topic: String,
    /// First message id (see `inclusive`); `Client::earliest_message_id` reads from the start.
    pub start: MessageId,
    /// Whether the message at `start` itself is returned.
    pub inclusive: bool,
}

/// One subscription of a channel, as listed by `Client::list_subscriptions`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriptionInfo {
    /// Subscription (consumer group) name.
    pub name: String,
    /// Messages in the channel after the subscription's acked position, where known.
    pub lag: Option<u64>,
}

/// Checks a channel (topic) or subscription name against the portable rule
/// `[A-Za-z0-9._-]{1,255}`. Backends apply stricter rules of their own on top.
pub fn validate_channel_name(kind: &str, name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::InvalidArgument(format!("{kind} name is empty")));
    }
    if name.len() > 255 {
        return Err(Error::InvalidArgument(format!(
            "{kind} name is {} bytes long, the limit is 255",
            name.len()
        )));
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(Error::InvalidArgument(format!(
            "{kind} name {name:?} contains {bad:?}; allowed are A-Z a-z 0-9 . _ -"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_names() {
        assert!(validate_channel_name("channel", "by-dev.rootcoord_dml_0").is_ok());
        for bad in ["", "a/b", "a b", "ü", &"x".repeat(256)] {
            assert!(matches!(
                validate_channel_name("channel", bad),
                Err(Error::InvalidArgument(_))
            ));
        }
    }
}
