//! `NsqClient`: the `msgstream::mq::Client` of the NSQ backend.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use msgstream::mq::{
    validate_channel_name, Capabilities, Client, Consumer, ConsumerOptions, InitialPosition,
    Leases, MessageId, Ordering as Order, Producer, Reader, ReaderOptions, SubscriptionInfo,
    Timestamps,
};
use msgstream::sync::lock;
use msgstream::{Error, Result};

use super::admin::Admin;
use super::cluster::Cluster;
use super::consumer::NsqConsumer;
use super::ordered::OrderedConsumer;
use super::producer::NsqProducer;
use super::reader::NsqReader;
use super::spooled::SpooledConsumer;
use super::{map_err, Position, BACKEND};
use crate::codec::{validate_name, ConsumeOffset};
use crate::config::{Extensions, NsqConfig};
use crate::conn::{Conn, ConnConfig, OutputBuffer};
use crate::consumer::{Consumer as NsqPush, ConsumerConfig, SubscribeMode};
use crate::producer::{Producer as NsqPublisher, ProducerConfig};
use crate::spool::Spool;

/// What the client and everything it created share.
pub(crate) struct Shared {
    pub config: NsqConfig,
    pub producer: NsqPublisher,
    pub admin: Admin,
    /// The Youzan cluster's side (`cluster = true`): topics through lookupd, publishes to
    /// the partition's leader.
    pub cluster: Option<Cluster>,
    /// Live consumers by (topic, subscription): subscriptions are exclusive per client; each
    /// consumer holds its lease until closed or dropped.
    leases: Leases,
    /// Topics known to exist in the configured partition (extensions on).
    created: Mutex<HashSet<String>>,
    closed: AtomicBool,
}

impl Shared {
    pub(crate) fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            Err(Error::Closed("nsq client"))
        } else {
            Ok(())
        }
    }

    /// The partition every channel lives in, when the server has partitions.
    pub(crate) fn partition(&self) -> Option<u32> {
        (self.config.extensions == Extensions::Partitions).then_some(self.config.partition)
    }

    /// Whether the server starts channels at consume offsets (`virtual_queue:`, `msgcount:`,
    /// `timestamp:`): only a Youzan nsqd with its coordinator (`cluster = true`). A standalone
    /// one refuses them ("Not supported while coordinator disabled", transcript Y8 72-77,
    /// 87-89) and so does `/message/get`, which reads the coordinator's log index.
    pub(crate) fn offsets(&self) -> bool {
        self.partition().is_some() && self.cluster.is_some()
    }

    /// What this configuration can do. Seek and the latest id need consume offsets (a Youzan
    /// cluster) and nsqd's HTTP API (`nsqd_http`); a reader needs the offsets and the HTTP API
    /// of the nsqd holding the partition, which lookupd can name instead of `nsqd_http`.
    pub(crate) fn capabilities(&self) -> Capabilities {
        let admin = self.admin.available();
        let offsets = self.offsets();
        let mut caps = Capabilities::ALL;
        caps.seek = offsets && admin;
        caps.readers = offsets && (admin || self.admin.locates());
        caps.latest_id = offsets && admin;
        caps.durable_subscriptions = true;
        caps.delete_subscriptions = admin;
        caps.delete_topics = admin || self.cluster.is_some();
        caps.seek_time =
            caps.readers && caps.latest_id && self.config.timestamps != Timestamps::Opaque;
        // A standalone Youzan nsqd requeues a closed connection's messages in no fixed order
        // (Y8 127-129) and cannot restart a channel at its confirmed offset to restore it.
        caps.ordering = if offsets {
            Order::Strict
        } else {
            Order::BestEffort
        };
        caps
    }

    /// Whether a consumer asking for order gets an [`OrderedConsumer`]: with consume offsets
    /// (its reading channel starts at one, its commit point is one) and `nsqd_http`.
    /// Elsewhere (upstream, a standalone Youzan nsqd) it gets a [`SpooledConsumer`] (one in
    /// flight, a local spool as the commit point).
    pub(crate) fn orders_on_request(&self) -> bool {
        self.offsets() && self.admin.available()
    }

    /// Creates the topic in the configured partition once per client (the fork does not
    /// create topics on first use): through lookupd in a cluster (see [`Cluster`]), with
    /// `INTERNAL_CREATE_TOPIC` on a standalone nsqd.
    async fn ensure_topic(&self, topic: &str) -> Result<()> {
        let Some(partition) = self.partition() else {
            return Ok(());
        };
        if lock(&self.created).contains(topic) {
            return Ok(());
        }
        match &self.cluster {
            Some(cluster) => cluster.ensure_topic(topic).await?,
            None => self
                .producer
                .create_topic(topic, partition)
                .await
                .map_err(map_err)?,
        }
        lock(&self.created).insert(topic.to_string());
        Ok(())
    }

    /// Starts a push consumer; in a cluster, once the partition's leader took its SUB (see
    /// [`Cluster::await_leader`]).
    pub(crate) async fn connect_push(&self, config: ConsumerConfig) -> Result<NsqPush> {
        let topic = config.topic.clone();
        let consumer = NsqPush::connect(config).await.map_err(map_err)?;
        if let Some(cluster) = &self.cluster {
            cluster.await_leader(&consumer, &topic).await?;
        }
        Ok(consumer)
    }

    /// The consumer settings for one subscription, starting at `offset` when given.
    pub(crate) fn consumer_config(
        &self,
        topic: &str,
        channel: &str,
        offset: Option<ConsumeOffset>,
    ) -> ConsumerConfig {
        let c = &self.config;
        let mut config = ConsumerConfig::new(topic, channel);
        config.nsqd = if c.lookupd.is_empty() {
            c.nsqd.clone()
        } else {
            Vec::new()
        };
        config.nsqd_http = c.nsqd_http.clone();
        config.lookupd = c.lookupd.clone();
        config.partition = self.partition();
        config.mode = if self.partition().is_some() {
            SubscribeMode::Advanced
        } else {
            SubscribeMode::Plain
        };
        config.offset = offset;
        config.max_in_flight = c.max_in_flight.max(1);
        config.max_attempts = c.max_attempts;
        config.default_requeue_delay = std::time::Duration::from_millis(c.requeue_delay_ms);
        config.conn.output_buffer = match c.output_buffer_timeout_ms {
            0 => OutputBuffer::Off,
            ms => OutputBuffer::FlushEvery(std::time::Duration::from_millis(ms)),
        };
        config
    }
}

fn validate(kind: &str, name: &str) -> Result<()> {
    validate_channel_name(kind, name)?;
    if !validate_name(name) {
        return Err(Error::InvalidArgument(format!(
            "{kind} name {name:?} is longer than nsqd's 64 characters"
        )));
    }
    Ok(())
}

/// The NSQ backend's client.
#[derive(Clone)]
pub struct NsqClient {
    shared: Arc<Shared>,
}

impl NsqClient {
    /// Checks the configuration and that at least one nsqd answers the handshake.
    pub async fn connect(config: NsqConfig) -> Result<NsqClient> {
        if config.nsqd.is_empty() {
            return Err(Error::InvalidArgument(
                "[nsq] nsqd: at least one address is needed".into(),
            ));
        }
        if !config.nsqd_http.is_empty() && config.nsqd_http.len() != config.nsqd.len() {
            return Err(Error::InvalidArgument(
                "[nsq] nsqd_http: one HTTP address per nsqd address, in the same order".into(),
            ));
        }
        if config.cluster
            && (config.extensions != Extensions::Partitions || config.lookupd.is_empty())
        {
            return Err(Error::InvalidArgument(
                "[nsq] cluster = true needs extensions = \"partitions\" and the cluster's lookupd"
                    .into(),
            ));
        }
        let conn = ConnConfig::default();
        let mut reached = None;
        let mut last = None;
        for addr in &config.nsqd {
            match Conn::connect(addr, &conn, None, false, |_, _| {}).await {
                Ok(c) => {
                    c.close().await;
                    reached = Some(());
                    break;
                }
                Err(e) => last = Some(e),
            }
        }
        if reached.is_none() {
            return Err(last.map_or_else(|| Error::transient(BACKEND, "no nsqd"), map_err));
        }
        let producer = NsqPublisher::new(ProducerConfig {
            nsqd: config.nsqd.clone(),
            conn,
            ..ProducerConfig::default()
        })
        .map_err(map_err)?;
        let admin = Admin {
            http: config.nsqd_http.clone(),
            partition: (config.extensions == Extensions::Partitions).then_some(config.partition),
            lookupd: config.lookupd.clone(),
            coordinator: config.cluster,
        };
        let cluster = config
            .cluster
            .then(|| Cluster::new(&config, ConnConfig::default()));
        Ok(NsqClient {
            shared: Arc::new(Shared {
                config,
                producer,
                admin,
                cluster,
                leases: Leases::new(),
                created: Mutex::default(),
                closed: AtomicBool::new(false),
            }),
        })
    }

    fn spool_holds_data(&self, options: &ConsumerOptions) -> bool {
        Spool::exists_with_data(
            &self.shared.config.spool_dir,
            &options.topic,
            &options.subscription,
        )
    }

    /// Where a subscription starts: its own position if the channel exists, else the
    /// initial position (as an offset with extensions, by emptying a new channel without).
    async fn start(&self, options: &ConsumerOptions) -> Result<Option<ConsumeOffset>> {
        let admin = &self.shared.admin;
        if !admin.available() {
            return match options.initial_position {
                InitialPosition::Earliest => Ok(None),
                InitialPosition::Latest => Err(Error::Unsupported {
                    backend: BACKEND,
                    what: "starting a subscription at Latest without nsqd_http",
                }),
                InitialPosition::Timestamp(_) => Err(Error::Unsupported {
                    backend: BACKEND,
                    what: "seeking by time",
                }),
            };
        }
        let channels = admin.channels(&options.topic).await?.unwrap_or_default();
        if channels.iter().any(|c| c.name == options.subscription) {
            if !self.shared.offsets() {
                return Ok(None);
            }
            // Resuming with offsets: restart at the confirmed offset, in order. Left alone, the
            // server would hand a killed consumer's unfinished messages back only when they
            // time out, after newer ones and in no order. The wait makes sure no earlier
            // consumer of this subscription still holds messages the restart would skip.
            admin
                .wait_until_unsubscribed(&options.topic, &options.subscription)
                .await?;
            let confirmed = admin
                .confirmed_offset(&options.topic, &options.subscription)
                .await?;
            if confirmed.is_none() {
                tracing::warn!(
                    topic = %options.topic,
                    subscription = %options.subscription,
                    "nsqd reports no confirmed offset (depth_size); resuming where the server \
                     continues, which may deliver a killed consumer's unfinished messages late"
                );
            }
            return Ok(confirmed.map(ConsumeOffset::VirtualQueue));
        }
        match (self.shared.partition(), options.initial_position) {
            (Some(partition), InitialPosition::Timestamp(ts)) if self.capabilities().seek_time => {
                let at = self.message_id_at_time(&options.topic, ts).await?;
                let offset = admin
                    .start_offset(&options.topic, partition, &at.id, at.inclusive)
                    .await?;
                Ok(Some(ConsumeOffset::VirtualQueue(offset)))
            }
            (_, InitialPosition::Timestamp(_)) => Err(Error::Unsupported {
                backend: BACKEND,
                what: "seeking by time",
            }),
            // A standalone Youzan nsqd has no `virtual_queue:0`; a new channel gets the topic's
            // earlier messages only as its first channel (Y8 63), as upstream nsqd does.
            (Some(_), InitialPosition::Earliest) if !self.shared.offsets() => Ok(None),
            (Some(_), InitialPosition::Earliest) => Ok(Some(ConsumeOffset::VirtualQueue(0))),
            // In a cluster the consumer dials once lookupd named the leader, after `subscribe`
            // returned: `special:-1` then would skip what was published meanwhile. The end
            // now is the Latest the caller asked for.
            (Some(_), InitialPosition::Latest) if self.shared.cluster.is_some() => Ok(Some(
                ConsumeOffset::VirtualQueue(admin.partition_end(&options.topic).await?),
            )),
            (Some(_), InitialPosition::Latest) => Ok(Some(ConsumeOffset::Latest)),
            (None, InitialPosition::Earliest) => Ok(None),
            (None, InitialPosition::Latest) => {
                admin
                    .create_empty_channel(&options.topic, &options.subscription)
                    .await?;
                Ok(None)
            }
        }
    }
}

#[async_trait]
impl Client for NsqClient {
    fn backend_name(&self) -> &'static str {
        BACKEND
    }

    async fn create_producer(&self, topic: &str) -> Result<Box<dyn Producer>> {
        self.shared.check_open()?;
        validate("channel", topic)?;
        self.shared.ensure_topic(topic).await?;
        Ok(Box::new(NsqProducer {
            shared: self.shared.clone(),
            topic: topic.to_string(),
            closed: AtomicBool::new(false),
        }))
    }

    async fn subscribe(&self, options: ConsumerOptions) -> Result<Box<dyn Consumer>> {
        self.shared.check_open()?;
        validate("channel", &options.topic)?;
        validate("subscription", &options.subscription)?;
        // Held by the consumer from here; a failed start drops it with everything else.
        let lease = self
            .shared
            .leases
            .take(&options.topic, &options.subscription)?;
        let consumer = async {
            self.shared.ensure_topic(&options.topic).await?;
            let offset = self.start(&options).await?;
            if options.ordered && self.shared.orders_on_request() {
                let consumer =
                    OrderedConsumer::start(self.shared.clone(), &options, offset, lease).await?;
                return Ok::<Box<dyn Consumer>, Error>(Box::new(consumer));
            }
            // A spool with messages in it is read first, whoever subscribes: they were FINed
            // on the server and live nowhere else.
            if options.ordered || self.spool_holds_data(&options) {
                let consumer =
                    SpooledConsumer::start(self.shared.clone(), &options, offset, lease).await?;
                return Ok(Box::new(consumer));
            }
            let consumer = NsqConsumer::start(self.shared.clone(), &options, offset, lease).await?;
            Ok(Box::new(consumer))
        }
        .await;
        consumer
    }

    async fn create_reader(&self, options: ReaderOptions) -> Result<Box<dyn Reader>> {
        self.shared.check_open()?;
        validate("channel", &options.topic)?;
        if !self.capabilities().readers {
            return Err(Error::Unsupported {
                backend: BACKEND,
                what: "readers (need a Youzan cluster's consume offsets, and nsqd_http or lookupd)",
            });
        }
        self.shared.ensure_topic(&options.topic).await?;
        let reader = NsqReader::open(
            self.shared.clone(),
            &options.topic,
            &options.start,
            options.inclusive,
        )
        .await?;
        Ok(Box::new(reader))
    }

    /// A Youzan cluster's `timestamp:` offset read through a throw-away ephemeral channel (see
    /// the module `adapter::time_seek`).
    async fn time_lower_bound(&self, topic: &str, timestamp: u64) -> Result<MessageId> {
        self.shared.check_open()?;
        validate("channel", topic)?;
        if self.shared.capabilities().seek_time {
            self.shared.ensure_topic(topic).await?;
        }
        super::time_seek::time_lower_bound(&self.shared, topic, timestamp).await
    }

    fn earliest_message_id(&self) -> MessageId {
        match self.shared.partition() {
            Some(_) => Position {
                partition: 0,
                offset: 0,
                raw_size: 0,
            }
            .id(),
            None => MessageId::from_u64(0),
        }
    }

    fn message_id_from_bytes(&self, bytes: &[u8]) -> Result<MessageId> {
        let id = MessageId::from_backend_bytes(bytes);
        match self.shared.partition() {
            Some(_) => Position::parse(&id).map(|_| id),
            None if bytes.len() == 8 => Ok(id),
            None => Err(Error::Decode(format!(
                "an nsq message id is 8 bytes without extensions, got {}",
                bytes.len()
            ))),
        }
    }

    fn capabilities(&self) -> Capabilities {
        self.shared.capabilities()
    }

    async fn list_topics(&self) -> Result<Vec<String>> {
        self.shared.check_open()?;
        self.shared.admin.list_topics().await
    }

    async fn list_subscriptions(&self, topic: &str) -> Result<Vec<SubscriptionInfo>> {
        self.shared.check_open()?;
        let channels =
            self.shared
                .admin
                .channels(topic)
                .await?
                .ok_or_else(|| Error::UnknownChannel {
                    channel: topic.to_string(),
                })?;
        // Ephemeral channels are readers' and ordered consumers' reading channels, not
        // subscriptions (subscription names cannot hold a '#').
        Ok(channels
            .into_iter()
            .filter(|c| !c.name.ends_with("#ephemeral"))
            .map(|c| SubscriptionInfo {
                name: c.name,
                lag: Some(c.backlog),
            })
            .collect())
    }

    async fn delete_subscription(&self, topic: &str, subscription: &str) -> Result<()> {
        self.shared.check_open()?;
        self.shared.leases.check_free(topic, Some(subscription))?;
        self.shared
            .admin
            .delete_channel(topic, subscription)
            .await?;
        Spool::remove(&self.shared.config.spool_dir, topic, subscription)
    }

    async fn delete_topic(&self, topic: &str) -> Result<()> {
        self.shared.check_open()?;
        self.shared.leases.check_free(topic, None)?;
        match &self.shared.cluster {
            Some(cluster) => cluster.delete_topic(topic).await?,
            None => self.shared.admin.delete_topic(topic).await?,
        }
        lock(&self.shared.created).remove(topic);
        Spool::remove_topic(&self.shared.config.spool_dir, topic)?;
        Ok(())
    }

    async fn close(&self) {
        self.shared.closed.store(true, Ordering::Release);
        self.shared.producer.close().await;
        if let Some(cluster) = &self.shared.cluster {
            cluster.close().await;
        }
    }
}
