//! What a push consumer subscribes to and how it behaves: [`ConsumerConfig`], with go-nsq's
//! defaults. Its own module because the consumer's engine and its messages read it too.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use crate::backoff::BackoffConfig;
use crate::codec::{validate_name, ConsumeOffset, RawMessage};
use crate::conn::ConnConfig;
use crate::error::{Error, Result};

/// How to subscribe on each connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SubscribeMode {
    /// `SUB` (upstream and Youzan).
    #[default]
    Plain,
    /// `SUB_ORDERED` (Youzan): one message at a time per partition, in offset order.
    Ordered,
    /// `SUB_ADVANCED` (Youzan): deliveries carry offset and raw size; may start at an offset.
    Advanced,
}

/// Called with a message that exceeded `max_attempts`, just before it is FINed.
pub type FailedCallback = Arc<dyn Fn(&RawMessage) + Send + Sync>;

/// Consumer settings; [`ConsumerConfig::new`] has go-nsq's defaults.
#[derive(Clone)]
pub struct ConsumerConfig {
    /// Topic.
    pub topic: String,
    /// NSQ channel.
    pub channel: String,
    /// nsqd TCP addresses to connect to directly.
    pub nsqd: Vec<String>,
    /// nsqlookupd HTTP addresses to discover nsqds from.
    pub lookupd: Vec<String>,
    /// Only this partition (Youzan); `None` takes every partition lookupd lists, or the
    /// server's default on directly configured nsqds.
    pub partition: Option<u32>,
    /// SUB, SUB_ORDERED or SUB_ADVANCED.
    pub mode: SubscribeMode,
    /// Where the channel starts (`SubscribeMode::Advanced` or `Ordered`), set over HTTP before
    /// the first subscribe of each partition.
    pub offset: Option<ConsumeOffset>,
    /// A start that follows consumption, for ephemeral channels (which a dropped connection
    /// deletes): every dial, the first and each reconnect, sets the channel to
    /// `virtual_queue:<value>` before subscribing, in place of `offset`. The owner advances it
    /// past each message it has taken.
    pub resume_at: Option<Arc<AtomicU64>>,
    /// The nsqd HTTP address of each entry of `nsqd` (same order), needed to set an offset on
    /// a partition (the server ignores the partition of `SUB_ADVANCED` with an offset).
    pub nsqd_http: Vec<String>,
    /// Most messages in flight over all connections.
    pub max_in_flight: u32,
    /// Deliveries after which a message goes to the failed callback (0: unlimited).
    pub max_attempts: u16,
    /// Requeue delay per attempt, for automatic requeues.
    pub default_requeue_delay: Duration,
    /// Cap of the automatic requeue delay.
    pub max_requeue_delay: Duration,
    /// Backoff on failures.
    pub backoff: BackoffConfig,
    /// How often lookupd is asked.
    pub lookupd_poll_interval: Duration,
    /// Fraction of the interval the first poll is delayed by at random.
    pub lookupd_poll_jitter: f64,
    /// Delay before reconnecting to a directly configured nsqd.
    pub reconnect_interval: Duration,
    /// How often RDY is redistributed when connections outnumber `max_in_flight`.
    pub rdy_redistribute_interval: Duration,
    /// A connection idle this long gives its RDY back for redistribution.
    pub low_rdy_idle_timeout: Duration,
    /// Longest graceful stop before connections are closed regardless.
    pub stop_timeout: Duration,
    /// Connection settings.
    pub conn: ConnConfig,
    /// Called for messages given up after `max_attempts`.
    pub on_failed: Option<FailedCallback>,
}

impl ConsumerConfig {
    /// Defaults for consuming `channel` of `topic`.
    pub fn new(topic: impl Into<String>, channel: impl Into<String>) -> Self {
        ConsumerConfig {
            topic: topic.into(),
            channel: channel.into(),
            nsqd: Vec::new(),
            lookupd: Vec::new(),
            partition: None,
            mode: SubscribeMode::Plain,
            offset: None,
            resume_at: None,
            nsqd_http: Vec::new(),
            max_in_flight: 1,
            max_attempts: 5,
            default_requeue_delay: Duration::from_secs(90),
            max_requeue_delay: Duration::from_secs(15 * 60),
            backoff: BackoffConfig::default(),
            lookupd_poll_interval: Duration::from_secs(60),
            lookupd_poll_jitter: 0.3,
            reconnect_interval: Duration::from_secs(1),
            rdy_redistribute_interval: Duration::from_secs(5),
            low_rdy_idle_timeout: Duration::from_secs(10),
            stop_timeout: Duration::from_secs(30),
            conn: ConnConfig::default(),
            on_failed: None,
        }
    }

    pub(crate) fn validate(&self) -> Result<()> {
        for (kind, name) in [("topic", &self.topic), ("channel", &self.channel)] {
            if !validate_name(name) {
                return Err(Error::Invalid(format!(
                    "{kind} name {name:?}: nsqd allows [.a-zA-Z0-9_-]{{1,64}}"
                )));
            }
        }
        if self.nsqd.is_empty() && self.lookupd.is_empty() {
            return Err(Error::Invalid(
                "a consumer needs nsqd or lookupd addresses".into(),
            ));
        }
        if self.max_in_flight == 0 {
            return Err(Error::Invalid("max_in_flight must be at least 1".into()));
        }
        if (self.offset.is_some() || self.resume_at.is_some()) && self.mode == SubscribeMode::Plain
        {
            return Err(Error::Invalid(
                "a consume offset needs SubscribeMode::Advanced or Ordered".into(),
            ));
        }
        Ok(())
    }
}
