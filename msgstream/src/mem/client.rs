//! `MemoryClient` and its producer.

use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::sync::Arc;

use async_trait::async_trait;

use super::broker::{MemoryBroker, Stored};
use super::consumer::MemoryConsumer;
use super::reader::MemoryReader;
use super::BACKEND;
use crate::mq::{
    validate_channel_name, Capabilities, Client, Consumer, ConsumerOptions, InitialPosition,
    MessageId, Producer, ProducerMessage, Reader, ReaderOptions, Sending, SubscriptionInfo,
};
use crate::{Error, Result};

/// A client of a [`MemoryBroker`].
#[derive(Debug, Clone)]
pub struct MemoryClient {
    pub(super) broker: Arc<MemoryBroker>,
    pub(super) closed: Arc<AtomicBool>,
}

impl Default for MemoryClient {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryClient {
    /// A client of a new, empty broker.
    pub fn new() -> Self {
        Self::with_broker(MemoryBroker::new())
    }

    /// A client of an existing broker (to simulate a process restart in tests).
    pub fn with_broker(broker: Arc<MemoryBroker>) -> Self {
        MemoryClient {
            broker,
            closed: Arc::new(AtomicBool::new(false)),
        }
    }

    pub(super) fn check_open(&self) -> Result<()> {
        if self.closed.load(AtomicOrdering::Acquire) {
            Err(Error::Closed("memory client"))
        } else {
            Ok(())
        }
    }
}

/// Decodes the 8-byte big-endian form of an in-memory id.
pub(super) fn decode_id(id: &MessageId) -> Result<u64> {
    id.as_u64().ok_or_else(|| {
        Error::Decode(format!(
            "memory message id must be 8 bytes, got {}",
            id.as_bytes().len()
        ))
    })
}

#[async_trait]
impl Client for MemoryClient {
    fn backend_name(&self) -> &'static str {
        BACKEND
    }

    async fn create_producer(&self, topic: &str) -> Result<Box<dyn Producer>> {
        self.check_open()?;
        validate_channel_name("channel", topic)?;
        self.broker.with_topic(topic, |_| ());
        Ok(Box::new(MemoryProducer {
            client: self.clone(),
            topic: topic.to_string(),
            closed: AtomicBool::new(false),
        }))
    }

    async fn subscribe(&self, options: ConsumerOptions) -> Result<Box<dyn Consumer>> {
        self.check_open()?;
        validate_channel_name("channel", &options.topic)?;
        validate_channel_name("subscription", &options.subscription)?;
        let at_time = match options.initial_position {
            InitialPosition::Timestamp(timestamp) => {
                let at = self.message_id_at_time(&options.topic, timestamp).await?;
                decode_id(&at.id)? + u64::from(!at.inclusive)
            }
            _ => 0,
        };
        let (cursor, notify) = self.broker.with_topic(&options.topic, |t| {
            if !t.live.insert(options.subscription.clone()) {
                return Err(Error::SubscriptionBusy {
                    topic: options.topic.clone(),
                    subscription: options.subscription.clone(),
                });
            }
            let start = match options.initial_position {
                InitialPosition::Earliest => 0,
                InitialPosition::Latest => t.log.len() as u64,
                InitialPosition::Timestamp(_) => at_time,
            };
            let cursor = *t
                .cursors
                .entry(options.subscription.clone())
                .or_insert(start);
            Ok((cursor, t.notify.clone()))
        })?;
        Ok(Box::new(MemoryConsumer::new(
            self.clone(),
            options,
            cursor,
            notify,
        )))
    }

    async fn create_reader(&self, options: ReaderOptions) -> Result<Box<dyn Reader>> {
        self.check_open()?;
        validate_channel_name("channel", &options.topic)?;
        let start = decode_id(&options.start)?;
        self.broker
            .with_topic(&options.topic, |t| t.check_id(&options.topic, start))?;
        let cursor = if options.inclusive {
            start
        } else {
            start.saturating_add(1)
        };
        let notify = self.broker.with_topic(&options.topic, |t| t.notify.clone());
        Ok(Box::new(MemoryReader::new(
            self.clone(),
            options.topic,
            cursor,
            notify,
        )))
    }

    fn earliest_message_id(&self) -> MessageId {
        MessageId::from_u64(0)
    }

    fn message_id_from_bytes(&self, bytes: &[u8]) -> Result<MessageId> {
        let id = MessageId::from_backend_bytes(bytes);
        decode_id(&id)?;
        Ok(id)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::ALL
    }

    async fn time_lower_bound(&self, topic: &str, timestamp: u64) -> Result<MessageId> {
        self.check_open()?;
        validate_channel_name("channel", topic)?;
        let first = self
            .broker
            .with_existing(topic, |t| t.time_lower_bound(timestamp));
        Ok(MessageId::from_u64(first.unwrap_or(0)))
    }

    async fn list_topics(&self) -> Result<Vec<String>> {
        self.check_open()?;
        let mut names: Vec<String> = self.broker.topics().keys().cloned().collect();
        names.sort();
        Ok(names)
    }

    async fn list_subscriptions(&self, topic: &str) -> Result<Vec<SubscriptionInfo>> {
        self.check_open()?;
        let topics = self.broker.topics();
        let t = topics.get(topic).ok_or_else(|| Error::NotSubscribed {
            channel: topic.to_string(),
        })?;
        let len = t.log.len() as u64;
        let mut subs: Vec<SubscriptionInfo> = t
            .cursors
            .iter()
            .map(|(name, cursor)| SubscriptionInfo {
                name: name.clone(),
                lag: Some(len.saturating_sub(*cursor)),
            })
            .collect();
        subs.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(subs)
    }

    async fn delete_subscription(&self, topic: &str, subscription: &str) -> Result<()> {
        self.check_open()?;
        validate_channel_name("channel", topic)?;
        validate_channel_name("subscription", subscription)?;
        self.broker
            .with_existing(topic, |t| {
                if t.live.contains(subscription) {
                    return Err(Error::SubscriptionBusy {
                        topic: topic.to_string(),
                        subscription: subscription.to_string(),
                    });
                }
                t.cursors.remove(subscription);
                Ok(())
            })
            .unwrap_or(Ok(()))
    }

    async fn delete_topic(&self, topic: &str) -> Result<()> {
        self.check_open()?;
        validate_channel_name("channel", topic)?;
        self.broker.remove_topic(topic)
    }

    async fn close(&self) {
        self.closed.store(true, AtomicOrdering::Release);
        self.broker.wake_all();
    }
}

/// Appends to one in-memory topic.
#[derive(Debug)]
struct MemoryProducer {
    client: MemoryClient,
    topic: String,
    closed: AtomicBool,
}

#[async_trait]
impl Producer for MemoryProducer {
    fn topic(&self) -> &str {
        &self.topic
    }

    fn send(&self, message: ProducerMessage) -> Sending<'_> {
        Sending::new(async move {
            let mut ids = self.send_batch(vec![message]).await?;
            ids.pop()
                .ok_or_else(|| Error::backend(BACKEND, "batch of one returned no id"))
        })
    }

    async fn send_batch(&self, messages: Vec<ProducerMessage>) -> Result<Vec<MessageId>> {
        self.client.check_open()?;
        if self.closed.load(AtomicOrdering::Acquire) {
            return Err(Error::Closed("memory producer"));
        }
        self.client.broker.with_topic(&self.topic, |t| {
            let first = t.log.len() as u64;
            let ids = (first..first + messages.len() as u64)
                .map(MessageId::from_u64)
                .collect();
            for m in messages {
                let stored = Stored {
                    payload: m.payload,
                    properties: m.properties,
                };
                t.push(stored, m.timestamp);
            }
            t.notify.notify_waiters();
            Ok(ids)
        })
    }

    async fn close(&self) {
        self.closed.store(true, AtomicOrdering::Release);
    }
}
