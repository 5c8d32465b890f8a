//! Shared state of the in-memory backend: topics, their messages and subscription cursors.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use tokio::sync::Notify;

use crate::mq::Properties;

/// One stored message; its id is its index in the topic.
#[derive(Debug, Clone)]
pub(super) struct Stored {
    pub payload: Bytes,
    pub properties: Properties,
}

/// One channel: its log, the acked cursor of each subscription, and a wake-up for waiters.
#[derive(Debug, Default)]
pub(super) struct Topic {
    pub log: Vec<Stored>,
    /// Per message, the largest timestamp ([`crate::mq::message_timestamp`]) of the log up to
    /// and including it: ordered, so a time search is a binary search over it.
    pub high_water: Vec<u64>,
    /// Subscription → index of the first message not yet acked.
    pub cursors: HashMap<String, u64>,
    /// Subscriptions that have a live consumer (subscriptions are exclusive).
    pub live: HashSet<String>,
    pub notify: Arc<Notify>,
}

impl Topic {
    /// Appends one message, keeping [`Topic::high_water`] beside the log. `timestamp` is the
    /// producer's ([`crate::mq::ProducerMessage::timestamp`], which the streams set); without
    /// one the payload is decoded for it, so the index stays exact for raw producers too.
    pub fn push(&mut self, message: Stored, timestamp: Option<u64>) {
        let before = self.high_water.last().copied().unwrap_or(0);
        let timestamp = timestamp
            .or_else(|| crate::mq::message_timestamp(&message.payload))
            .unwrap_or(0);
        self.high_water.push(before.max(timestamp));
        self.log.push(message);
    }

    /// The first message whose timestamp is ≥ `timestamp` (the first whose high-water mark
    /// reaches it), or the newest message when none is (0 for an empty topic): a lower bound
    /// that is exact or one message short of the answer.
    pub fn time_lower_bound(&self, timestamp: u64) -> u64 {
        let first = self.high_water.partition_point(|&high| high < timestamp);
        first.min(self.log.len().saturating_sub(1)) as u64
    }

    /// Checks that `id` names a message this topic holds, or the start of the topic: seeking or
    /// reading from anywhere past the newest message is `Error::PastEnd`.
    pub fn check_id(&self, name: &str, id: u64) -> crate::Result<()> {
        let len = self.log.len() as u64;
        if id == 0 || id < len {
            return Ok(());
        }
        Err(crate::Error::PastEnd {
            channel: name.to_string(),
            id: crate::mq::MessageId::from_u64(id),
            latest: len.checked_sub(1).map(crate::mq::MessageId::from_u64),
        })
    }
}

/// The process-local store behind one or more [`super::MemoryClient`]s.
#[derive(Debug, Default)]
pub struct MemoryBroker {
    topics: Mutex<HashMap<String, Topic>>,
}

impl MemoryBroker {
    /// An empty broker.
    pub fn new() -> Arc<Self> {
        Arc::new(MemoryBroker::default())
    }

    /// Locks the topic table (see [`crate::sync::lock`]).
    pub(super) fn topics(&self) -> MutexGuard<'_, HashMap<String, Topic>> {
        crate::sync::lock(&self.topics)
    }

    /// Runs `f` on `topic`, creating it if needed.
    pub(super) fn with_topic<R>(&self, topic: &str, f: impl FnOnce(&mut Topic) -> R) -> R {
        let mut topics = self.topics();
        f(topics.entry(topic.to_string()).or_default())
    }

    /// Runs `f` on `topic` if it exists.
    pub(super) fn with_existing<R>(
        &self,
        topic: &str,
        f: impl FnOnce(&mut Topic) -> R,
    ) -> Option<R> {
        self.topics().get_mut(topic).map(f)
    }

    /// Removes `topic` unless one of its subscriptions has a live consumer.
    pub(super) fn remove_topic(&self, topic: &str) -> crate::Result<()> {
        let mut topics = self.topics();
        if let Some(t) = topics.get(topic) {
            if let Some(busy) = t.live.iter().next() {
                return Err(crate::Error::SubscriptionBusy {
                    topic: topic.to_string(),
                    subscription: busy.clone(),
                });
            }
            t.notify.notify_waiters();
        }
        topics.remove(topic);
        Ok(())
    }

    /// Wakes every waiter of every topic (used on close).
    pub(super) fn wake_all(&self) {
        for topic in self.topics().values() {
            topic.notify.notify_waiters();
        }
    }
}
