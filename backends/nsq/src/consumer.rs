//! The push consumer (go-nsq's model, with the Youzan extensions): configuration, the public
//! handle, and statistics. The connection management lives in the private `engine` module.
//!
//! Guarantees: never more messages in flight than `max_in_flight` over all connections; a
//! message attempted more than `max_attempts` times is given to the failed-message callback and
//! FINed, never handed to the application; [`Consumer::stop`] answers or waits for every
//! in-flight message before closing its connections, so nothing acknowledged is lost and nothing
//! unacknowledged is dropped without the server knowing to redeliver it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch, Mutex};

pub use crate::consumer_config::{ConsumerConfig, FailedCallback, SubscribeMode};
use crate::engine::{Command, Engine};
use crate::error::{Error, Result};
use crate::message::Message;
use crate::stats::Counters;
pub use crate::stats::Stats;

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

    /// Moves the channel of every partition this consumer reads to `offset`, on a Youzan
    /// cluster: [`ConsumeOffset::Timestamp`]`(secs)` continues at the first message published
    /// at or after `secs` (seconds since the epoch; a time after the last message means only
    /// new ones), [`ConsumeOffset::VirtualQueue`] at a stored position, and
    /// [`ConsumeOffset::Latest`] at the end. The connections stay: the server moves them with
    /// the channel, so every consumer of the channel continues from there. Messages taken
    /// before the seek and not yet finished are forgotten by the server (finishing one fails);
    /// deliveries already on their way may still arrive.
    ///
    /// Errors: [`Error::Unsupported`] from a standalone Youzan nsqd (no coordinator, no commit
    /// log to search) or an upstream nsqd (no consume offsets), or when an nsqd's HTTP address
    /// is unknown (configure `nsqd_http` or use lookupd); [`Error::NoServer`] while no
    /// connection is subscribed.
    ///
    /// [`ConsumeOffset::Timestamp`]: crate::ConsumeOffset::Timestamp
    /// [`ConsumeOffset::VirtualQueue`]: crate::ConsumeOffset::VirtualQueue
    /// [`ConsumeOffset::Latest`]: crate::ConsumeOffset::Latest
    pub async fn seek(&self, offset: crate::ConsumeOffset) -> Result<()> {
        let (answer, answered) = tokio::sync::oneshot::channel();
        self.commands
            .send(Command::Seek(offset, answer))
            .map_err(|_| Error::Closed("consumer"))?;
        answered.await.map_err(|_| Error::Closed("consumer"))?
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
