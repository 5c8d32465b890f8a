//! [`RocksmqClient`]: the `msgstream::mq::Client` of the embedded queue.

use async_trait::async_trait;
use msgstream::mq::{
    validate_channel_name, Capabilities, Client, Consumer, ConsumerOptions, MessageId, Producer,
    Reader, ReaderOptions, SubscriptionInfo,
};
use msgstream::Result;

use super::{checked_position, engine_id, RocksmqConsumer, RocksmqProducer, RocksmqReader};
use crate::{Rocksmq, RocksmqOptions};

/// The mq client over one embedded queue. Capabilities: everything, strictly ordered.
#[derive(Debug, Clone)]
pub struct RocksmqClient {
    engine: Rocksmq,
}

impl RocksmqClient {
    /// Opens (or creates) the queue at `options.path`; see [`Rocksmq::open`].
    pub fn open(options: RocksmqOptions) -> Result<RocksmqClient> {
        Ok(RocksmqClient {
            engine: Rocksmq::open(options)?,
        })
    }

    /// [`RocksmqClient::open`] on a blocking thread: opening recovers every topic's tail from
    /// disk, which must not stall an async worker (or a whole `current_thread` runtime).
    pub async fn connect(options: RocksmqOptions) -> Result<RocksmqClient> {
        tokio::task::spawn_blocking(move || RocksmqClient::open(options))
            .await
            .map_err(|e| msgstream::Error::backend("rocksmq", format!("opening failed: {e}")))?
    }

    /// The engine, for what the mq traits do not cover (retention, group administration).
    pub fn engine(&self) -> &Rocksmq {
        &self.engine
    }
}

#[async_trait]
impl Client for RocksmqClient {
    fn backend_name(&self) -> &'static str {
        crate::store::BACKEND
    }

    async fn create_producer(&self, topic: &str) -> Result<Box<dyn Producer>> {
        let state = self.engine.topic_or_create(topic)?;
        Ok(Box::new(RocksmqProducer::new(self.engine.clone(), state)))
    }

    async fn subscribe(&self, options: ConsumerOptions) -> Result<Box<dyn Consumer>> {
        validate_channel_name("topic", &options.topic)?;
        validate_channel_name("subscription", &options.subscription)?;
        self.engine.create_topic(&options.topic)?;
        let lease = self
            .engine
            .inner
            .leases
            .take(&options.topic, &options.subscription)?;
        self.engine.create_group_if_missing(
            &options.topic,
            &options.subscription,
            options.initial_position,
        )?;
        let subscription = self
            .engine
            .subscribe(&options.topic, &options.subscription)?;
        Ok(Box::new(RocksmqConsumer::new(
            self.engine.clone(),
            subscription,
            options.buffer,
            lease,
        )))
    }

    async fn create_reader(&self, options: ReaderOptions) -> Result<Box<dyn Reader>> {
        self.engine.create_topic(&options.topic)?;
        let from = checked_position(
            &self.engine,
            &options.topic,
            &options.start,
            options.inclusive,
        )?;
        let reader = self.engine.reader(&options.topic, from)?;
        Ok(Box::new(RocksmqReader::new(self.engine.clone(), reader)))
    }

    fn earliest_message_id(&self) -> MessageId {
        MessageId::from_u64(0)
    }

    fn message_id_from_bytes(&self, bytes: &[u8]) -> Result<MessageId> {
        let id = MessageId::from_backend_bytes(bytes);
        engine_id(&id)?;
        Ok(id)
    }

    fn capabilities(&self) -> Capabilities {
        let mut caps = Capabilities::ALL;
        caps.seek_time = false;
        caps
    }

    async fn list_topics(&self) -> Result<Vec<String>> {
        self.engine.topics()
    }

    async fn topic_size_bytes(&self, topic: &str) -> Result<u64> {
        validate_channel_name("topic", topic)?;
        if !self.engine.topic_exists(topic)? {
            return Err(msgstream::Error::UnknownChannel {
                channel: topic.to_string(),
            });
        }
        self.engine.topic_size_bytes(topic)
    }

    async fn list_subscriptions(&self, topic: &str) -> Result<Vec<SubscriptionInfo>> {
        validate_channel_name("topic", topic)?;
        if !self.engine.topic_exists(topic)? {
            return Ok(Vec::new());
        }
        Ok(self
            .engine
            .consumer_groups(topic)?
            .into_iter()
            .map(|group| SubscriptionInfo {
                name: group.name,
                lag: Some(group.lag),
            })
            .collect())
    }

    async fn delete_subscription(&self, topic: &str, subscription: &str) -> Result<()> {
        validate_channel_name("topic", topic)?;
        validate_channel_name("subscription", subscription)?;
        self.engine
            .inner
            .leases
            .check_free(topic, Some(subscription))?;
        if !self.engine.topic_exists(topic)?
            || !self.engine.consumer_group_exists(topic, subscription)?
        {
            return Ok(());
        }
        self.engine.destroy_consumer_group(topic, subscription)
    }

    async fn delete_topic(&self, topic: &str) -> Result<()> {
        validate_channel_name("topic", topic)?;
        self.engine.inner.leases.check_free(topic, None)?;
        if !self.engine.topic_exists(topic)? {
            return Ok(());
        }
        // Deleting compacts the topic's range away: disk work, off the async workers.
        let (engine, topic) = (self.engine.clone(), topic.to_string());
        tokio::task::spawn_blocking(move || engine.destroy_topic(&topic))
            .await
            .map_err(|e| msgstream::Error::backend("rocksmq", format!("deleting failed: {e}")))?
    }

    async fn close(&self) {
        // Closing syncs the WAL: disk work, off the async workers.
        let engine = self.engine.clone();
        if tokio::task::spawn_blocking(move || engine.close())
            .await
            .is_err()
        {
            tracing::warn!("rocksmq: closing the database panicked");
        }
    }
}

impl From<Rocksmq> for RocksmqClient {
    fn from(engine: Rocksmq) -> Self {
        RocksmqClient { engine }
    }
}
