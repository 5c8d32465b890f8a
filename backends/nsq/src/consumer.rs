//! The push consumer (go-nsq's model, with the Youzan extensions): configuration, the public
//! handle, and statistics. The connection management lives in the private `engine` module.
//!
//! Guarantees: never more messages in flight than `max_in_flight` over all connections; a
//! message attempted more than `max_attempts` times is given to the failed-message callback and
//! FINed, never handed to the application; [`Consumer::stop`] answers or waits for every
//! in-flight message before closing its connections, so nothing acknowledged is lost and nothing
//! unacknowledged is dropped without the server knowing to redeliver it.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch, Mutex};

use crate::backoff::BackoffConfig;
use crate::codec::{validate_name, ConsumeOffset, RawMessage};
use crate::conn::ConnConfig;
use crate::engine::{Command, Engine};
use crate::error::{Error, Result};
use crate::message::Message;

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

    fn validate(&self) -> Result<()> {
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

/// Counters since the consumer started.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub received: AtomicU64,
    pub finished: AtomicU64,
    pub requeued: AtomicU64,
    pub failed: AtomicU64,
    pub connections: AtomicU64,
    /// Notified whenever a connection was subscribed.
    pub connected: tokio::sync::Notify,
    pub reconnects: AtomicU64,
    pub backoff_level: AtomicU64,
    /// Messages delivered and not yet taken by the application: while any wait, answers are
    /// left to gather into one write (see `Message::send`).
    pub waiting: AtomicU64,
    /// Backoff signals sent to the engine and not yet handled: answers sent meanwhile must
    /// follow them, as they would if the engine already listened (see `Shared::report`), and
    /// [`Consumer::recv`] lets the engine handle them first.
    pub backoff_pending: AtomicU32,
}

/// A snapshot of [`Consumer::stats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stats {
    /// Messages received.
    pub received: u64,
    /// Messages FINed (including those given up after `max_attempts`).
    pub finished: u64,
    /// Messages requeued.
    pub requeued: u64,
    /// Messages given up after `max_attempts`.
    pub failed: u64,
    /// Open connections.
    pub connections: u64,
    /// Connections re-established after a drop.
    pub reconnects: u64,
    /// Current backoff level (0: not backing off).
    pub backoff_level: u64,
}

/// Most yields [`Consumer::recv`] waits for the engine to handle a backoff signal.
const SETTLE_YIELDS: usize = 1000;

/// A running consumer.
pub struct Consumer {
    commands: mpsc::UnboundedSender<Command>,
    deliveries: Mutex<mpsc::UnboundedReceiver<Message>>,
    counters: Arc<Counters>,
    stopped: watch::Receiver<bool>,
}

impl Consumer {
    /// Starts consuming: connects to every configured nsqd and polls lookupd. Fails when a
    /// directly configured nsqd refuses the subscription (bad name, missing topic partition,
    /// AUTH) or when none of them can be reached and there is no lookupd.
    pub async fn connect(config: ConsumerConfig) -> Result<Consumer> {
        config.validate()?;
        let (out_tx, out_rx) = mpsc::unbounded_channel();
        let counters = Arc::new(Counters::default());
        let (stopped_tx, stopped) = watch::channel(false);
        let (commands, ready) = Engine::start(config, out_tx, counters.clone(), stopped_tx);
        ready.await.map_err(|_| Error::Closed("consumer"))??;
        Ok(Consumer {
            commands,
            deliveries: Mutex::new(out_rx),
            counters,
            stopped,
        })
    }

    /// The next message; `None` once the consumer has stopped and every delivered message
    /// was taken. Cancel-safe.
    pub async fn recv(&self) -> Option<Message> {
        self.backoff_settled().await;
        // Uncontended (one application task receiving) the lock is taken without building
        // and polling the acquire future, most of the cost of a lock per message.
        let mut deliveries = match self.deliveries.try_lock() {
            Ok(deliveries) => deliveries,
            Err(_) => self.deliveries.lock().await,
        };
        let message = deliveries.recv().await;
        drop(deliveries);
        self.taken(message)
    }

    /// Waits (yielding, bounded) while a backoff signal is on its way to the engine, so that a
    /// failure pauses the consumer before the application takes the next message, as when
    /// every message passed through the engine. Without it a handler with messages queued
    /// kept the engine's task from running (a task woken from a worker waits in that worker's
    /// slot until the running one yields) and handled every message, redeliveries included,
    /// before the backoff began: then no message was left to test the waters with.
    async fn backoff_settled(&self) {
        for _ in 0..SETTLE_YIELDS {
            if self.counters.backoff_pending.load(Ordering::SeqCst) == 0 || self.is_stopped() {
                return;
            }
            tokio::task::yield_now().await;
        }
    }

    /// A message already received, without waiting.
    pub async fn try_recv(&self) -> Option<Message> {
        let message = self.deliveries.lock().await.try_recv().ok();
        self.taken(message)
    }

    fn taken(&self, message: Option<Message>) -> Option<Message> {
        if message.is_some() {
            self.counters.waiting.fetch_sub(1, Ordering::SeqCst);
        }
        message
    }

    /// Waits until the consumer has a subscribed connection, for at most `wait`; `false`
    /// when none came (the consumer keeps trying).
    pub async fn wait_connected(&self, wait: Duration) -> bool {
        let connected = async {
            loop {
                let notified = self.counters.connected.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                if self.counters.connections.load(Ordering::SeqCst) > 0 {
                    return;
                }
                notified.await;
            }
        };
        tokio::time::timeout(wait, connected).await.is_ok()
    }

    /// Changes `max_in_flight`; 0 pauses the consumer.
    pub fn set_max_in_flight(&self, max_in_flight: u32) {
        let _ = self.commands.send(Command::SetMaxInFlight(max_in_flight));
    }

    /// Counters.
    pub fn stats(&self) -> Stats {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Stats {
            received: get(&c.received),
            finished: get(&c.finished),
            requeued: get(&c.requeued),
            failed: get(&c.failed),
            connections: get(&c.connections),
            reconnects: get(&c.reconnects),
            backoff_level: get(&c.backoff_level),
        }
    }

    /// Graceful stop: CLS on every connection, wait for `CLOSE_WAIT`, wait until every
    /// in-flight message is answered, then close. Messages the application already took are
    /// its to answer; those still waiting to be taken (and any that arrive before
    /// `CLOSE_WAIT`) are requeued at once without backoff, so the server can hand them to
    /// another consumer. Returns once stopped (or after `stop_timeout`, when connections are
    /// closed regardless).
    pub async fn stop(&self) {
        let _ = self.commands.send(Command::Stop(None));
        let mut stopped = self.stopped.clone();
        let done = async move {
            let _ = stopped.wait_for(|s| *s).await;
        };
        tokio::pin!(done);
        loop {
            tokio::select! {
                _ = &mut done => return,
                message = self.recv() => match message {
                    Some(message) => {
                        if let Err(e) = message.requeue_without_backoff(Some(Duration::ZERO)).await {
                            tracing::debug!("requeue at stop: {e}");
                        }
                    }
                    None => return,
                },
            }
        }
    }

    /// Sends CLS on every connection and returns once it is written: from then on the server
    /// starts no new delivery to this consumer (frames already on the wire still arrive), so
    /// messages requeued afterwards go to other consumers, in the order requeued. Follow with
    /// [`Consumer::stop`].
    pub async fn stop_intake(&self) {
        let (sent, written) = tokio::sync::oneshot::channel();
        if self.commands.send(Command::Stop(Some(sent))).is_ok() {
            let _ = written.await;
        }
    }

    /// Whether the consumer has stopped.
    pub fn is_stopped(&self) -> bool {
        *self.stopped.borrow()
    }
}

impl Drop for Consumer {
    /// A consumer dropped without [`Consumer::stop`] still stops: CLS everywhere, messages
    /// nobody will take are requeued, connections close once what is in flight is answered
    /// (or after `stop_timeout`).
    fn drop(&mut self) {
        let _ = self.commands.send(Command::Stop(None));
    }
}
