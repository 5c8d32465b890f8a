//! A delivered message and its responses (FIN, REQ, TOUCH), written straight to the
//! connection it came from, and the delivery that makes one.
//!
//! Guarantees: a message is answered at most once (later FIN/REQ are no-ops returning `Ok`);
//! TOUCH works until it is answered; answering a message whose connection is gone is an error
//! (the server will redeliver it), never a silent success.
//!
//! Why the consumer engine is not on this path: a message goes from the connection's reader
//! straight to the application's queue, and its answer straight into the connection's write
//! buffer, with the in-flight count kept in atomics (`Source`). Routing each message and each
//! answer through the engine task would cost two more task wake-ups per message. The engine
//! hears of an answer only when it can change something: a backoff signal, or any answer while
//! it backs off or stops (`Shared::report`).

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::mpsc;

use crate::backoff::Signal;
use crate::codec::{Command, MsgId, RawMessage};
use crate::conn::Writer;
use crate::consumer_config::ConsumerConfig;
use crate::error::{Error, Result};
use crate::stats::Counters;

/// Which connection a message came from: nsqd address and partition.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Origin {
    /// nsqd TCP address.
    pub addr: Arc<str>,
    /// Youzan partition, if the subscription named one.
    pub partition: Option<u32>,
}

/// What the consumer engine hears when a message is answered (see [`Shared::report`]).
#[derive(Debug)]
pub(crate) struct Answered {
    pub origin: Origin,
    pub signal: Signal,
}

/// Hands an answer to the consumer's engine. The engine's event type is its own: messages
/// reach it only through this, so they need not know the engine.
pub(crate) type ToEngine = Box<dyn Fn(Answered) + Send + Sync>;

/// What every delivery of one consumer shares with its engine.
pub(crate) struct Shared {
    pub config: Arc<ConsumerConfig>,
    pub counters: Arc<Counters>,
    /// Puts an answer on the engine's event queue, where answers join its timers in the order
    /// they happen (a failure sent during a backoff pause must reach the engine before the
    /// pause's end, or it would count).
    to_engine: ToEngine,
    /// Set by the engine while every answer matters to it: backing off (a FIN lowers the
    /// level) or stopping (the last answer closes a drained connection).
    listening: AtomicBool,
    /// Origin of [`Source::last_active`].
    epoch: Instant,
}

impl Shared {
    pub(crate) fn new(
        config: Arc<ConsumerConfig>,
        counters: Arc<Counters>,
        to_engine: ToEngine,
    ) -> Shared {
        Shared {
            config,
            counters,
            to_engine,
            listening: AtomicBool::new(false),
            epoch: Instant::now(),
        }
    }

    /// Tells the engine of an answer it needs. A FIN or a REQ without backoff while the engine
    /// neither backs off nor stops changes nothing there (the backoff state machine ignores
    /// them at level 0), so it is not sent: an answer that read `listening` false is one the
    /// engine would have handled before whatever made it listen.
    ///
    /// `Counters::backoff_pending` is read before `listening`, the reverse of the order the engine
    /// writes them in (`listening` first, then the pending count down): read the other way,
    /// an answer could miss both a backoff signal still pending when it read `listening` and
    /// the `listening` that handling it set.
    fn report(&self, origin: &Origin, signal: Signal) {
        let needed = signal == Signal::Backoff
            || self.counters.backoff_pending.load(Ordering::SeqCst) > 0
            || self.listening.load(Ordering::SeqCst);
        if !needed {
            return;
        }
        if signal == Signal::Backoff {
            self.counters.backoff_pending.fetch_add(1, Ordering::SeqCst);
        }
        (self.to_engine)(Answered {
            origin: origin.clone(),
            signal,
        });
    }

    /// The engine sets whether it needs every answer (backing off or stopping).
    pub(crate) fn listen(&self, listening: bool) {
        self.listening.store(listening, Ordering::SeqCst);
    }

    /// The engine handled a backoff signal (after updating [`Shared::listen`]).
    pub(crate) fn backoff_handled(&self) {
        self.counters.backoff_pending.fetch_sub(1, Ordering::SeqCst);
    }

    fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// How long ago `source` was last active.
    pub(crate) fn idle(&self, source: &Source) -> Duration {
        let last = source.last_active.load(Ordering::Relaxed);
        Duration::from_nanos(self.now().saturating_sub(last))
    }

    /// Marks `source` active now (it got a message, an answer or a RDY).
    pub(crate) fn touch(&self, source: &Source) {
        source.last_active.store(self.now(), Ordering::Relaxed);
    }

    /// Hands a message read on `source` to the application (`out`), or, past `max_attempts`,
    /// to the failed callback and FIN; with nobody reading any more it is requeued at once so
    /// the server redelivers it elsewhere. Runs on the connection's reader task.
    pub(crate) fn deliver(
        self: &Arc<Self>,
        source: &Arc<Source>,
        writer: &Arc<Writer>,
        raw: RawMessage,
        out: &mpsc::UnboundedSender<Message>,
    ) {
        self.counters.received.fetch_add(1, Ordering::Relaxed);
        self.counters.waiting.fetch_add(1, Ordering::SeqCst);
        // Activity only matters while nothing is in flight (see `Engine::redistribute`), so
        // the clock is read when the count leaves or reaches zero, not for every message.
        if source.in_flight.fetch_add(1, Ordering::SeqCst) == 0 {
            self.touch(source);
        }
        let max_attempts = self.config.max_attempts;
        let give_up = max_attempts > 0 && raw.attempts > max_attempts;
        if give_up {
            if let Some(callback) = &self.config.on_failed {
                callback(&raw);
            }
            self.counters.failed.fetch_add(1, Ordering::Relaxed);
        }
        source.writer.get_or_init(|| writer.clone());
        let message = Message {
            raw,
            source: source.clone(),
            answered: AtomicBool::new(false),
            auto_response: AtomicBool::new(true),
        };
        if give_up {
            self.counters.waiting.fetch_sub(1, Ordering::SeqCst);
            if let Err(e) = message.answer(Command::Fin(&message.raw.id), Signal::Resume, false) {
                tracing::debug!("FIN of a failed message: {e}");
            }
            return;
        }
        if let Err(returned) = out.send(message) {
            self.counters.waiting.fetch_sub(1, Ordering::SeqCst);
            let message = returned.0;
            let command = Command::Req(&message.raw.id, 0);
            if let Err(e) = message.answer(command, Signal::Continue, true) {
                tracing::debug!("REQ of a message nobody reads: {e}");
            }
        }
    }
}

/// One connection's side of its messages: where they came from and how many are unanswered.
///
/// It also carries what the connection's messages need to answer (the consumer's [`Shared`]
/// and the connection's writer), so a message holds one shared reference instead of three:
/// each one is a reference count updated on the reader's thread and again on the
/// application's, for every message.
pub(crate) struct Source {
    pub origin: Origin,
    in_flight: AtomicU32,
    /// Nanoseconds since [`Shared::epoch`].
    last_active: AtomicU64,
    shared: Arc<Shared>,
    /// Set by the first delivery (the writer exists only once the connection does).
    writer: OnceLock<Arc<Writer>>,
    /// The connection's negotiated message timeout, set once it is connected.
    msg_timeout: OnceLock<Duration>,
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Source")
            .field("origin", &self.origin)
            .field("in_flight", &self.in_flight)
            .finish_non_exhaustive()
    }
}

impl Source {
    pub(crate) fn new(origin: Origin, shared: Arc<Shared>) -> Source {
        Source {
            origin,
            in_flight: AtomicU32::new(0),
            last_active: AtomicU64::new(0),
            shared,
            writer: OnceLock::new(),
            msg_timeout: OnceLock::new(),
        }
    }

    /// Records the connection's negotiated message timeout (before any delivery).
    pub(crate) fn set_msg_timeout(&self, msg_timeout: Duration) {
        let _ = self.msg_timeout.set(msg_timeout);
    }

    /// Messages delivered and not answered yet.
    pub(crate) fn in_flight(&self) -> u32 {
        self.in_flight.load(Ordering::SeqCst)
    }
}

/// A message delivered by a [`crate::Consumer`].
pub struct Message {
    raw: RawMessage,
    source: Arc<Source>,
    answered: AtomicBool,
    auto_response: AtomicBool,
}

impl std::fmt::Debug for Message {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Message")
            .field("raw", &self.raw)
            .field("origin", &self.source.origin)
            .field("answered", &self.answered)
            .finish_non_exhaustive()
    }
}

impl Message {
    /// The server's id.
    pub fn id(&self) -> MsgId {
        self.raw.id
    }

    /// The payload.
    pub fn body(&self) -> &Bytes {
        &self.raw.body
    }

    /// 1 on first delivery, +1 per redelivery.
    pub fn attempts(&self) -> u16 {
        self.raw.attempts
    }

    /// Publish time, nanoseconds since the epoch.
    pub fn timestamp(&self) -> i64 {
        self.raw.timestamp
    }

    /// `(offset, raw_size)` on SUB_ADVANCED / SUB_ORDERED subscriptions.
    pub fn position(&self) -> Option<(u64, u32)> {
        self.raw.position
    }

    /// Where it came from.
    pub fn origin(&self) -> &Origin {
        &self.source.origin
    }

    /// How long the server waits for an answer (or a TOUCH) before it delivers this message
    /// again: its connection's negotiated message timeout.
    pub fn msg_timeout(&self) -> Option<Duration> {
        self.source.msg_timeout.get().copied()
    }

    /// Whether FIN or REQ was sent.
    pub fn is_answered(&self) -> bool {
        self.answered.load(Ordering::Acquire)
    }

    /// Stops a handler runner from answering this message itself: the application will call
    /// [`Message::finish`] or [`Message::requeue`] (for work that outlives the handler).
    pub fn disable_auto_response(&self) {
        self.auto_response.store(false, Ordering::Release);
    }

    pub(crate) fn auto_response(&self) -> bool {
        self.auto_response.load(Ordering::Acquire)
    }

    /// FIN: processed. Signals the consumer's backoff to resume.
    pub async fn finish(&self) -> Result<()> {
        self.answer(Command::Fin(&self.raw.id), Signal::Resume, false)
    }

    /// Waits until this message's answer (and everything queued before it on its connection)
    /// is written to the socket: after that, the server gets it even if this process dies.
    pub async fn flush(&self) -> Result<()> {
        self.writer()?
            .flush()
            .await
            .map_err(|_| Error::Closed("the connection this message came from"))
    }

    /// REQ: deliver again after `delay`, or after `default × attempts` (capped) when `None`.
    /// Signals the consumer to back off.
    pub async fn requeue(&self, delay: Option<Duration>) -> Result<()> {
        self.requeue_with(delay, Signal::Backoff)
    }

    /// REQ without backing off the consumer.
    pub async fn requeue_without_backoff(&self, delay: Option<Duration>) -> Result<()> {
        self.requeue_with(delay, Signal::Continue)
    }

    fn requeue_with(&self, delay: Option<Duration>, signal: Signal) -> Result<()> {
        let delay = delay.unwrap_or_else(|| self.auto_delay());
        let ms = delay.as_millis() as u64;
        self.answer(Command::Req(&self.raw.id, ms), signal, true)
    }

    /// The automatic requeue delay: `default × attempts`, capped at the maximum.
    pub fn auto_delay(&self) -> Duration {
        let config = &self.source.shared.config;
        config
            .default_requeue_delay
            .saturating_mul(u32::from(self.raw.attempts))
            .min(config.max_requeue_delay)
    }

    /// TOUCH: resets the server's timeout for this message. A no-op once answered.
    pub async fn touch(&self) -> Result<()> {
        if self.is_answered() {
            return Ok(());
        }
        self.send(Command::Touch(&self.raw.id))
    }

    /// Queues a response on the message's connection. While more messages wait for the
    /// application, their answers will follow and join one write; an answer to the last one
    /// (always the case at `max_in_flight` 1) is written at once, sparing the write task a
    /// wake-up.
    fn send(&self, command: Command<'_>) -> Result<()> {
        let writer = self.writer()?;
        if self.source.shared.counters.waiting.load(Ordering::SeqCst) == 0 {
            writer.queue_now(command)
        } else {
            writer.queue(command)
        }
    }

    fn writer(&self) -> Result<&Arc<Writer>> {
        self.source
            .writer
            .get()
            .ok_or(Error::Closed("the connection this message came from"))
    }

    /// Writes the answer and accounts for it: the in-flight count first, so the engine sees
    /// a drained connection once it hears the last answer (see [`Shared::report`]).
    fn answer(&self, command: Command<'_>, signal: Signal, requeued: bool) -> Result<()> {
        if self.answered.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        if self.send(command).is_err() {
            self.answered.store(false, Ordering::Release);
            return Err(Error::Closed("the connection this message came from"));
        }
        let shared = &self.source.shared;
        let counters = &shared.counters;
        let counter = if requeued {
            &counters.requeued
        } else {
            &counters.finished
        };
        counter.fetch_add(1, Ordering::Relaxed);
        if self.source.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
            shared.touch(&self.source);
        }
        shared.report(&self.source.origin, signal);
        Ok(())
    }
}
