//! [`RocketMqClient`]: the `msgstream::mq::Client` of a RocketMQ cluster.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use msgstream::mq::{
    Capabilities, Client, Consumer, ConsumerOptions, MessageId, Ordering as Order, Producer,
    Reader, ReaderOptions, SubscriptionInfo,
};
use msgstream::{Error, Result};
use tokio::sync::watch;

use super::{
    broker_name, channel_name, offset_of, RocketMqConsumer, RocketMqProducer, RocketMqReader,
};
use crate::admin::Admin;
use crate::namespace::Namespace;
use crate::producer::Producer as RawProducer;
use crate::{MessageQueue, RocketMqConfig, BACKEND};

/// Topics the brokers create for themselves, never channels.
const SYSTEM_TOPICS: &[&str] = &[
    "TBW102",
    "SCHEDULE_TOPIC_XXXX",
    "OFFSET_MOVED_EVENT",
    "SELF_TEST_TOPIC",
    "BenchmarkTest",
    "TRANS_CHECK_MAX_TIME_TOPIC",
    "DefaultCluster",
];

/// What the client and everything it created share.
pub(crate) struct Shared {
    pub config: RocketMqConfig,
    pub admin: Admin,
    pub namespace: Namespace,
    pub producer: RawProducer,
    /// (channel, subscription) pairs with a live consumer: subscriptions are exclusive per
    /// client (RocketMQ itself would share the queue between them).
    pub active: Mutex<HashSet<(String, String)>>,
    closed: AtomicBool,
    pub closing: watch::Sender<bool>,
}

impl Shared {
    pub fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed("rocketmq client"));
        }
        Ok(())
    }

    /// Creates the channel's topic (one queue) unless it exists; returns its only queue.
    pub async fn ensure_topic(&self, topic: &str) -> Result<MessageQueue> {
        let wrapped = self.namespace.wrap(topic);
        let route = match self.admin.namesrv.route(&wrapped).await {
            Ok(route) => route,
            Err(crate::Error::TopicNotFound(_)) => {
                self.admin.create_topic(&wrapped, 1).await?;
                self.admin.namesrv.route(&wrapped).await?
            }
            Err(e) => return Err(e.into()),
        };
        route
            .read_queues
            .first()
            .cloned()
            .ok_or_else(|| crate::Error::TopicNotFound(wrapped).into())
    }

    /// The broker-side group of a subscription.
    pub fn group(&self, subscription: &str) -> Result<String> {
        broker_name("subscription", subscription)
            .map(|name| format!("{}{name}", self.config.group_prefix))
    }
}

/// The mq client over a RocketMQ cluster. Capabilities: everything, strictly ordered
/// (a channel is a topic with one queue).
#[derive(Clone)]
pub struct RocketMqClient {
    shared: Arc<Shared>,
}

impl RocketMqClient {
    /// Connects to the name servers of `config` and checks that a broker is registered.
    pub async fn connect(config: RocketMqConfig) -> Result<RocketMqClient> {
        let timeout = Duration::from_millis(config.send_timeout_ms.max(1));
        let admin = Admin::connect(config.name_servers.clone(), timeout)?;
        if admin.namesrv.masters().await?.is_empty() {
            return Err(Error::transient(
                BACKEND,
                "the name servers know no broker yet",
            ));
        }
        let namespace = Namespace::new(&config.namespace);
        let producer = RawProducer::new(admin.clone(), "msgstream-producer", namespace.clone(), 2);
        Ok(RocketMqClient {
            shared: Arc::new(Shared {
                config,
                admin,
                namespace,
                producer,
                active: Mutex::default(),
                closed: AtomicBool::new(false),
                closing: watch::channel(false).0,
            }),
        })
    }

    /// The administrative client underneath (offsets, groups, topics).
    pub fn admin(&self) -> &Admin {
        &self.shared.admin
    }

    /// Deletes a subscription: its consumer group and committed offsets. Idempotent.
    pub async fn delete_subscription(&self, topic: &str, subscription: &str) -> Result<()> {
        self.shared.check_open()?;
        broker_name("topic", topic)?;
        let group = self
            .shared
            .namespace
            .wrap(&self.shared.group(subscription)?);
        Ok(self.shared.admin.delete_group(&group).await?)
    }

    /// Deletes a channel's topic on every broker and name server. Idempotent.
    pub async fn delete_topic(&self, topic: &str) -> Result<()> {
        self.shared.check_open()?;
        let wrapped = self.shared.namespace.wrap(&broker_name("topic", topic)?);
        Ok(self.shared.admin.delete_topic(&wrapped).await?)
    }
}

#[async_trait]
impl Client for RocketMqClient {
    fn backend_name(&self) -> &'static str {
        BACKEND
    }

    async fn create_producer(&self, topic: &str) -> Result<Box<dyn Producer>> {
        self.shared.check_open()?;
        let name = broker_name("topic", topic)?;
        self.shared.ensure_topic(&name).await?;
        Ok(Box::new(RocketMqProducer::new(
            self.shared.clone(),
            topic.to_owned(),
            name,
        )))
    }

    async fn subscribe(&self, options: ConsumerOptions) -> Result<Box<dyn Consumer>> {
        self.shared.check_open()?;
        Ok(Box::new(
            RocketMqConsumer::open(self.shared.clone(), options).await?,
        ))
    }

    async fn create_reader(&self, options: ReaderOptions) -> Result<Box<dyn Reader>> {
        self.shared.check_open()?;
        Ok(Box::new(
            RocketMqReader::open(self.shared.clone(), options).await?,
        ))
    }

    fn earliest_message_id(&self) -> MessageId {
        MessageId::from_u64(0)
    }

    fn message_id_from_bytes(&self, bytes: &[u8]) -> Result<MessageId> {
        let id = MessageId::from_backend_bytes(bytes);
        offset_of(&id)?;
        Ok(id)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            ordering: Order::Strict,
            ..Capabilities::ALL
        }
    }

    async fn list_topics(&self) -> Result<Vec<String>> {
        self.shared.check_open()?;
        let brokers = self.shared.admin.namesrv.masters().await?;
        let mut topics: Vec<String> = self
            .shared
            .admin
            .namesrv
            .all_topics()
            .await?
            .into_iter()
            .filter(|t| !SYSTEM_TOPICS.contains(&t.as_str()) && !brokers.contains_key(t))
            .filter(|t| !t.to_ascii_lowercase().starts_with("rmq_sys_"))
            .filter_map(|t| self.shared.namespace.unwrap(&t).and_then(channel_name))
            .collect();
        topics.sort();
        topics.dedup();
        Ok(topics)
    }

    async fn list_subscriptions(&self, topic: &str) -> Result<Vec<SubscriptionInfo>> {
        self.shared.check_open()?;
        let wrapped = self.shared.namespace.wrap(&broker_name("topic", topic)?);
        let groups = match self.shared.admin.groups_of_topic(&wrapped).await {
            Ok(groups) => groups,
            Err(crate::Error::TopicNotFound(_)) => return Ok(Vec::new()),
            Err(e) => return Err(e.into()),
        };
        let route = self.shared.admin.namesrv.route(&wrapped).await?;
        let mut out = Vec::new();
        for group in groups {
            let Some(name) = self
                .shared
                .namespace
                .unwrap(&group)
                .and_then(|g| g.strip_prefix(self.shared.config.group_prefix.as_str()))
                .and_then(channel_name)
            else {
                continue;
            };
            let mut lag = Some(0u64);
            for mq in &route.read_queues {
                let max = self.shared.admin.max_offset(mq).await?;
                let committed = self.shared.admin.query_consumer_offset(&group, mq).await?;
                lag = lag
                    .zip(committed)
                    .map(|(l, c)| l + u64::try_from(max - c).unwrap_or(0));
            }
            out.push(SubscriptionInfo { name, lag });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    async fn close(&self) {
        self.shared.closed.store(true, Ordering::Release);
        self.shared.closing.send_replace(true);
        self.shared.admin.remoting.close();
    }
}

impl Shared {
    /// Claims `(channel, subscription)` for one consumer.
    pub fn claim(&self, channel: &str, subscription: &str) -> Result<()> {
        let mut active = self.active.lock().unwrap_or_else(|p| p.into_inner());
        if !active.insert((channel.to_owned(), subscription.to_owned())) {
            return Err(Error::InvalidArgument(format!(
                "subscription {subscription:?} of channel {channel:?} already has a live consumer on this client"
            )));
        }
        Ok(())
    }

    /// Releases a claim made by [`Shared::claim`].
    pub fn release(&self, channel: &str, subscription: &str) {
        self.active
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&(channel.to_owned(), subscription.to_owned()));
    }
}
