//! The four traits a backend implements.
//!
//! Delivery guarantees, stated once for every backend:
//! - **Order**: within one channel, `recv` and `Reader::next` return messages in id order on a
//!   backend with [`super::Ordering::Strict`]; ids returned by one producer increase.
//! - **At least once**: a message that was received but not acked is delivered again to the same
//!   subscription after the consumer is closed and the subscription re-subscribed.
//! - **Acks** are cumulative on strictly ordered backends: acking a message records that it and
//!   everything before it in the channel was processed. An ack never silently does nothing: it
//!   succeeds or returns an error saying why (stale delivery, closed consumer, …).
//! - **Exclusive subscriptions**: at most one live consumer per (channel, subscription); a second
//!   `subscribe` is `Error::SubscriptionBusy` until the first is closed or dropped. Brokers that
//!   cannot enforce this across processes enforce it per client and say so in their docs.
//! - **Cancel safety**: dropping a pending `recv()` / `next()` future loses no message.

use std::sync::Arc;

use async_trait::async_trait;

use super::{
    scan_to_time, Capabilities, ConsumerOptions, Message, MessageId, ProducerMessage,
    ReaderOptions, Sending, SubscriptionInfo, TimePosition,
};
use crate::Result;

/// A connection to one backend: the factory of producers, consumers and readers.
#[async_trait]
pub trait Client: Send + Sync {
    /// Backend name, as in config files (`"rocksmq"`, `"memory"`, …).
    fn backend_name(&self) -> &'static str;

    /// A producer appending to `topic`, creating the topic if the backend needs that.
    async fn create_producer(&self, topic: &str) -> Result<Box<dyn Producer>>;

    /// A consumer of one subscription on one channel.
    async fn subscribe(&self, options: ConsumerOptions) -> Result<Box<dyn Consumer>>;

    /// A non-durable reader. `Error::Unsupported` where `capabilities().readers` is false.
    async fn create_reader(&self, options: ReaderOptions) -> Result<Box<dyn Reader>>;

    /// An id that, used inclusively, starts before every message of any channel.
    fn earliest_message_id(&self) -> MessageId;

    /// Parses the serialized form of an id of this backend; bytes of the wrong shape are
    /// `Error::Decode`.
    fn message_id_from_bytes(&self, bytes: &[u8]) -> Result<MessageId>;

    /// What this backend supports.
    fn capabilities(&self) -> Capabilities;

    /// Channels the backend holds, sorted. `Error::Unsupported` where the broker cannot list them.
    async fn list_topics(&self) -> Result<Vec<String>> {
        Err(crate::Error::Unsupported {
            backend: self.backend_name(),
            what: "listing topics",
        })
    }

    /// An estimate of the bytes `topic` takes in the backend's storage (for display, such as the
    /// admin page's size column). `Error::Unsupported` where the backend cannot tell.
    async fn topic_size_bytes(&self, topic: &str) -> Result<u64> {
        let _ = topic;
        Err(crate::Error::Unsupported {
            backend: self.backend_name(),
            what: "channel sizes",
        })
    }

    /// Subscriptions of `topic`, sorted by name, with their lag where the backend can tell.
    async fn list_subscriptions(&self, topic: &str) -> Result<Vec<SubscriptionInfo>> {
        let _ = topic;
        Err(crate::Error::Unsupported {
            backend: self.backend_name(),
            what: "listing subscriptions",
        })
    }

    /// Deletes a subscription and its stored position (Milvus's disposer). Idempotent: deleting
    /// a subscription that does not exist succeeds. A subscription with a live consumer is
    /// `Error::SubscriptionBusy`. `Error::Unsupported` where
    /// `capabilities().delete_subscriptions` is false.
    async fn delete_subscription(&self, topic: &str, subscription: &str) -> Result<()> {
        let _ = (topic, subscription);
        Err(crate::Error::Unsupported {
            backend: self.backend_name(),
            what: "deleting subscriptions",
        })
    }

    /// Deletes a channel with its messages and subscriptions. Idempotent: deleting a channel that
    /// does not exist succeeds. A channel with a live consumer is `Error::SubscriptionBusy`.
    /// `Error::Unsupported` where `capabilities().delete_topics` is false.
    async fn delete_topic(&self, topic: &str) -> Result<()> {
        let _ = topic;
        Err(crate::Error::Unsupported {
            backend: self.backend_name(),
            what: "deleting topics",
        })
    }

    /// Where a time search of `topic` for `timestamp` starts reading: an id `L` such that no
    /// message before `L` has a timestamp ≥ `timestamp` (timestamps as defined in
    /// [`crate::mq::time`]), so reading from `L` inclusively loses no message at or after that
    /// time. The closer `L` is to the first such message, the shorter the scan that
    /// [`Client::message_id_at_time`] adds; each backend's docs say how close its index gets
    /// and when its answer is a lower bound at all (a broker that indexes its own clock needs
    /// [`crate::mq::Timestamps::Hybrid`]). A channel with no message at or after the time may
    /// answer an id past its newest message. `Error::Unsupported` where
    /// `capabilities().seek_time` is false (the default).
    async fn time_lower_bound(&self, topic: &str, timestamp: u64) -> Result<MessageId> {
        let _ = (topic, timestamp);
        Err(crate::Error::Unsupported {
            backend: self.backend_name(),
            what: "seeking by time",
        })
    }

    /// The first message of `topic` (in channel order) whose timestamp is ≥ `timestamp`, as of
    /// the call: [`Client::time_lower_bound`], then a forward scan decoding each message
    /// ([`crate::mq::scan_to_time`]). When no message has such a timestamp yet, the position
    /// reads from the first message produced after the call. Exact on every backend whose
    /// lower bound is one; `Error::Unsupported` where `capabilities().seek_time` is false.
    async fn message_id_at_time(&self, topic: &str, timestamp: u64) -> Result<TimePosition> {
        let bound = self.time_lower_bound(topic, timestamp).await?;
        scan_to_time(self, topic, bound, timestamp).await
    }

    /// A reader of `topic` starting at the first message with timestamp ≥ `timestamp`
    /// ([`Client::message_id_at_time`]): what a message browser uses to show a channel from a
    /// time. `Error::Unsupported` where `capabilities().seek_time` or `readers` is false.
    async fn create_reader_at_time(&self, topic: &str, timestamp: u64) -> Result<Box<dyn Reader>> {
        let position = self.message_id_at_time(topic, timestamp).await?;
        self.create_reader(position.reader_options(topic)).await
    }

    /// Closes the client; every later call on it or on what it created returns `Error::Closed`.
    async fn close(&self);
}

/// Acks deliveries of one consumer from another task while that consumer waits in `recv`.
///
/// The streams receive on one task and commit when the application has had a pack, on its
/// own task; an acker lets them do that without a round trip through the receiving task. It
/// follows the consumer's rules exactly: an ack of an older delivery (before a seek) is
/// `Error::StaleDelivery`, an ack after the consumer closed is `Error::Closed`.
#[async_trait]
pub trait Acker: Send + Sync {
    /// Same as [`Consumer::ack`] on the consumer this acker belongs to.
    async fn ack(&self, message: &Message) -> Result<()>;

    /// Checks the ack of `message` as [`Acker::ack`] does, but may leave it to be made durable
    /// by a later [`Acker::flush`]: a commit over many channels of one client then costs the
    /// backend one write instead of one per channel. Until that flush returns, the ack may be
    /// lost with the process (the message is delivered again: at least once, never a skip).
    /// The default acks at once, leaving `flush` nothing to do.
    async fn stage(&self, message: &Message) -> Result<()> {
        self.ack(message).await
    }

    /// Makes every ack staged through this acker durable, in one write with those staged
    /// through other ackers of the same client where the backend can. Returns once they would
    /// survive this process dying, or the error that kept them from it (they stay staged, and
    /// the next flush tries again).
    async fn flush(&self) -> Result<()> {
        Ok(())
    }
}

/// Appends messages to one channel.
#[async_trait]
pub trait Producer: Send + Sync {
    /// The channel written to.
    fn topic(&self) -> &str;

    /// Appends one message; the returned future resolves to its id once the backend has
    /// acknowledged it.
    ///
    /// The send may start when called, before the future is first polled (the embedded queue
    /// writes an uncontended message right away and returns the answer ready; see [`Sending`]):
    /// a message handed to `send` may be written even if the future is dropped unpolled, and
    /// a dropped future never takes back a message already on its way.
    fn send(&self, message: ProducerMessage) -> Sending<'_>;

    /// Appends several messages in order; backends override this to write them in one batch.
    async fn send_batch(&self, messages: Vec<ProducerMessage>) -> Result<Vec<MessageId>> {
        let mut ids = Vec::with_capacity(messages.len());
        for message in messages {
            ids.push(self.send(message).await?);
        }
        Ok(ids)
    }

    /// Stops the producer; later sends return `Error::Closed`.
    async fn close(&self);
}

/// Receives the messages of one subscription on one channel.
#[async_trait]
pub trait Consumer: Send + Sync {
    /// The channel consumed.
    fn topic(&self) -> &str;

    /// The subscription name.
    fn subscription(&self) -> &str;

    /// The next message; waits for one. `Ok(None)` once the consumer is closed. Cancel-safe.
    async fn recv(&mut self) -> Result<Option<Message>>;

    /// Up to `max` messages: waits for the first, then adds those already available without
    /// waiting. Empty only once the consumer is closed. Cancel-safe like `recv`. Backends that
    /// fetch in batches override it, so a caller pays one call per batch, not per message.
    async fn recv_batch(&mut self, max: usize) -> Result<Vec<Message>> {
        let _ = max;
        Ok(self.recv().await?.into_iter().collect())
    }

    /// Records that `message` (and, on ordered backends, everything before it) was processed.
    /// A message of an earlier delivery (before a seek or reconnect) is `Error::StaleDelivery`.
    /// Returns once the acknowledgement would survive this process dying (it reached the broker
    /// or the embedded store's log), so a restarted consumer never gets it again. The one
    /// exception is a protocol that never confirms an ack (NSQ's FIN): there it returns once
    /// the ack is written to the socket, and a process killed before the broker read it gets
    /// those messages again (redelivery, never a loss); such a backend says so in its docs.
    /// A backend may also be *configured* to group acks and write them shortly after (rocksmq's
    /// `ack_group_ms`), with the same consequence for a process killed in that window.
    async fn ack(&self, message: &Message) -> Result<()>;

    /// A handle acking this consumer's deliveries from another task (see [`Acker`]).
    fn acker(&self) -> Arc<dyn Acker>;

    /// Moves the subscription so that the next message is the one at `id` (`inclusive`) or the
    /// one after it. Backwards is allowed. Messages received before the seek can no longer be
    /// acked. `Error::Unsupported` where `capabilities().seek` is false.
    async fn seek(&mut self, id: &MessageId, inclusive: bool) -> Result<()>;

    /// The id of the newest message in the channel, `None` for an empty channel.
    async fn latest_message_id(&self) -> Result<Option<MessageId>>;

    /// Stops delivery; acked positions stay committed. `recv` then returns `Ok(None)`.
    async fn close(&mut self);
}

/// A non-durable cursor over one channel.
#[async_trait]
pub trait Reader: Send + Sync {
    /// The channel read.
    fn topic(&self) -> &str;

    /// The next message; waits for one. Cancel-safe.
    async fn next(&mut self) -> Result<Message>;

    /// Whether a message is available now, without waiting for new ones.
    async fn has_next(&mut self) -> Result<bool>;

    /// Moves the cursor to `id` (`inclusive`) or just after it.
    async fn seek(&mut self, id: &MessageId, inclusive: bool) -> Result<()>;

    /// Closes the reader; later calls return `Error::Closed`.
    async fn close(&mut self);
}
