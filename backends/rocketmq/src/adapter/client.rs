//! [`RocketMqClient`]: the `msgstream::mq::Client` of a RocketMQ cluster.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use msgstream::mq::{
    Capabilities, Client, Consumer, ConsumerOptions, InitialPosition, Leases, MessageId, Producer,
    Reader, ReaderOptions, SubscriptionInfo, Timestamps,
};
use msgstream::sync::lock;
use msgstream::{Error, Result};
use tokio::sync::watch;

use super::{
    broker_name, channel_name, offset_of, RocketMqConsumer, RocketMqProducer, RocketMqReader,
};
use crate::admin::Admin;
use crate::namespace::Namespace;
use crate::producer::Producer as RawProducer;
use crate::{MessageQueue, RocketMqConfig, BACKEND};

/// Longest consumer group name.
const MAX_GROUP: usize = 255;

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
    /// Consumers with acks staged and not yet flushed.
    pub staged: Arc<super::staged::Staged>,
    /// (channel, subscription) pairs with a live consumer: subscriptions are exclusive per
    /// client (RocketMQ cannot tell one process about another's consumers).
    pub leases: Leases,
    closed: AtomicBool,
    pub closing: watch::Sender<bool>,
    /// Per broker-side topic, the offset after the newest message this client's producers
    /// had acknowledged. The broker indexes a stored message into its queue asynchronously,
    /// so right after a send its max offset can lag behind what was acknowledged.
    produced: Mutex<HashMap<String, i64>>,
}

impl Shared {
    pub fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed("rocketmq client"));
        }
        Ok(())
    }

    /// Creates the channel's topic unless it exists: one queue on one broker, the first by
    /// name (strict order needs a single queue). Returns the queue producers and consumers of
    /// the channel use: the first readable one, should the topic exist with more.
    pub async fn ensure_topic(&self, topic: &str) -> Result<MessageQueue> {
        let wrapped = self.namespace.wrap(topic);
        let route = match self.admin.namesrv.route(&wrapped).await {
            Ok(route) => route,
            Err(crate::Error::TopicNotFound(_)) => {
                self.admin.create_topic_on(&wrapped, 1, 1).await?;
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

    /// Records that the message at `offset` of `queue` was acknowledged to a producer.
    pub fn produced(&self, queue: &MessageQueue, offset: i64) {
        let mut produced = lock(&self.produced);
        let next = produced.entry(queue.topic.clone()).or_default();
        *next = (*next).max(offset + 1);
    }

    /// The offset after the newest message of `queue`: the broker's max offset, or further
    /// where this client's producers were acknowledged more.
    pub async fn max_offset(&self, queue: &MessageQueue) -> Result<i64> {
        let broker = self.admin.max_offset(queue).await?;
        let produced = lock(&self.produced).get(&queue.topic).copied();
        Ok(broker.max(produced.unwrap_or(0)))
    }

    /// The broker-side group of a subscription of the channel whose topic is `topic`:
    /// `<prefix><topic>%<subscription>`. One group per (channel, subscription), so deleting a
    /// subscription deletes nothing of another channel; `%` cannot occur in channel names, so
    /// the name parses back unambiguously.
    pub fn group(&self, topic: &str, subscription: &str) -> Result<String> {
        let group = format!(
            "{}{topic}%{}",
            self.config.group_prefix,
            broker_name("subscription", subscription)?
        );
        if self.namespace.wrap(&group).len() > MAX_GROUP {
            return Err(Error::InvalidArgument(format!(
                "consumer group {group:?} is longer than RocketMQ's {MAX_GROUP} bytes"
            )));
        }
        Ok(group)
    }

    /// The subscription a broker-side group of `topic` stands for, if it is one of ours.
    fn subscription_of(&self, topic: &str, group: &str) -> Option<String> {
        self.namespace
            .unwrap(group)?
            .strip_prefix(self.config.group_prefix.as_str())?
            .strip_prefix(topic)?
            .strip_prefix('%')
            .and_then(channel_name)
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
        let options = crate::remoting::RemotingOptions::from(&config.connection);
        let admin = Admin::connect_with(config.name_servers.clone(), timeout, options)?;
        if admin.namesrv.masters().await?.is_empty() {
            return Err(Error::transient(
                BACKEND,
                "the name servers know no broker yet",
            ));
        }
        let namespace = Namespace::new(&config.namespace);
        let producer = RawProducer::new(admin.clone(), "msgstream-producer", namespace.clone(), 2)
            .compress_over(config.compress_over_bytes)
            .max_message_bytes(config.max_message_bytes);
        Ok(RocketMqClient {
            shared: Arc::new(Shared {
                config,
                admin,
                namespace,
                producer,
                staged: Arc::default(),
                leases: Leases::default(),
                closed: AtomicBool::new(false),
                closing: watch::channel(false).0,
                produced: Mutex::default(),
            }),
        })
    }

    /// The administrative client underneath (offsets, groups, topics).
    pub fn admin(&self) -> &Admin {
        &self.shared.admin
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
        let queue = self.shared.ensure_topic(&name).await?;
        Ok(Box::new(RocketMqProducer::new(
            self.shared.clone(),
            topic.to_owned(),
            name,
            queue,
        )))
    }

    async fn subscribe(&self, options: ConsumerOptions) -> Result<Box<dyn Consumer>> {
        self.shared.check_open()?;
        // Where a new subscription at a time starts, searched before it exists (an existing
        // subscription ignores it and resumes from its committed offset).
        let at_time = match options.initial_position {
            InitialPosition::Timestamp(timestamp) => {
                let at = self.message_id_at_time(&options.topic, timestamp).await?;
                Some(offset_of(&at.id)? + i64::from(!at.inclusive))
            }
            _ => None,
        };
        Ok(Box::new(
            RocketMqConsumer::open(self.shared.clone(), options, at_time).await?,
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
        let mut caps = Capabilities::ALL;
        caps.seek_time = matches!(self.shared.config.timestamps, Timestamps::Hybrid { .. });
        caps
    }

    /// The queue offset of the first message the broker stored at or after the time's
    /// physical part less the clock slack (`SEARCH_OFFSET_BY_TIMESTAMP`, see
    /// [`Timestamps::broker_search_ms`] for why that is a lower bound); the max offset when it
    /// stored none since. `Unsupported` unless timestamps are hybrid.
    async fn time_lower_bound(&self, topic: &str, timestamp: u64) -> Result<MessageId> {
        self.shared.check_open()?;
        let Some(search_ms) = self.shared.config.timestamps.broker_search_ms(timestamp) else {
            return Err(Error::Unsupported {
                backend: BACKEND,
                what: "seeking by time (needs [stream] timestamps = \"hybrid\")",
            });
        };
        let queue = self
            .shared
            .ensure_topic(&broker_name("topic", topic)?)
            .await?;
        let search_ms = i64::try_from(search_ms).unwrap_or(i64::MAX);
        let offset = self.shared.admin.search_offset(&queue, search_ms).await?;
        let min = self.shared.admin.min_offset(&queue).await?;
        Ok(super::id_of(offset.max(min)))
    }

    async fn delete_subscription(&self, topic: &str, subscription: &str) -> Result<()> {
        self.shared.check_open()?;
        let group = self
            .shared
            .group(&broker_name("topic", topic)?, subscription)?;
        self.shared.leases.check_free(topic, Some(subscription))?;
        Ok(self
            .shared
            .admin
            .delete_group(&self.shared.namespace.wrap(&group))
            .await?)
    }

    async fn delete_topic(&self, topic: &str) -> Result<()> {
        self.shared.check_open()?;
        let name = broker_name("topic", topic)?;
        self.shared.leases.check_free(topic, None)?;
        let wrapped = self.shared.namespace.wrap(&name);
        let groups = match self.shared.admin.groups_of_topic(&wrapped).await {
            Ok(groups) => groups,
            Err(crate::Error::TopicNotFound(_)) => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        for group in groups {
            if self.shared.subscription_of(&name, &group).is_some() {
                self.shared.admin.delete_group(&group).await?;
            }
        }
        Ok(self.shared.admin.delete_topic(&wrapped).await?)
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
        let name = broker_name("topic", topic)?;
        let wrapped = self.shared.namespace.wrap(&name);
        let groups = match self.shared.admin.groups_of_topic(&wrapped).await {
            Ok(groups) => groups,
            Err(crate::Error::TopicNotFound(_)) => return Ok(Vec::new()),
            Err(e) => return Err(e.into()),
        };
        let route = self.shared.admin.namesrv.route(&wrapped).await?;
        let mut out = Vec::new();
        for group in groups {
            let Some(sub) = self.shared.subscription_of(&name, &group) else {
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
            out.push(SubscriptionInfo { name: sub, lag });
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
