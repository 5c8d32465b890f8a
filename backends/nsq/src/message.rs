//! A delivered message and its responses (FIN, REQ, TOUCH), written straight to the
//! connection it came from.
//!
//! Guarantees: a message is answered at most once (later FIN/REQ are no-ops returning `Ok`);
//! TOUCH works until it is answered; answering a message whose connection is gone is an error
//! (the server will redeliver it), never a silent success.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc;

use crate::backoff::Signal;
use crate::codec::{Command, MsgId, RawMessage};
use crate::conn::Writer;
use crate::error::{Error, Result};

/// Which connection a message came from: nsqd address and partition, plus the generation of
/// that connection (a reconnect is a new generation).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Origin {
    /// nsqd TCP address.
    pub addr: Arc<str>,
    /// Youzan partition, if the subscription named one.
    pub partition: Option<u32>,
}

/// What the consumer engine hears when a message is answered.
#[derive(Debug)]
pub(crate) struct Answered {
    pub origin: Origin,
    pub generation: u64,
    pub signal: Signal,
    pub requeued: bool,
}

/// A message delivered by a [`crate::Consumer`].
#[derive(Debug)]
pub struct Message {
    raw: RawMessage,
    origin: Origin,
    generation: u64,
    writer: Arc<Writer>,
    answered_tx: mpsc::UnboundedSender<Answered>,
    answered: AtomicBool,
    auto_response: AtomicBool,
    default_requeue_delay: Duration,
    max_requeue_delay: Duration,
}

impl Message {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        raw: RawMessage,
        origin: Origin,
        generation: u64,
        writer: Arc<Writer>,
        answered_tx: mpsc::UnboundedSender<Answered>,
        default_requeue_delay: Duration,
        max_requeue_delay: Duration,
    ) -> Message {
        Message {
            raw,
            origin,
            generation,
            writer,
            answered_tx,
            answered: AtomicBool::new(false),
            auto_response: AtomicBool::new(true),
            default_requeue_delay,
            max_requeue_delay,
        }
    }

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
        &self.origin
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
            .await
    }

    /// Waits until this message's answer (and everything queued before it on its connection)
    /// is written to the socket: after that, the server gets it even if this process dies.
    pub async fn flush(&self) -> Result<()> {
        self.writer
            .flush()
            .await
            .map_err(|_| Error::Closed("the connection this message came from"))
    }

    /// REQ: deliver again after `delay`, or after `default × attempts` (capped) when `None`.
    /// Signals the consumer to back off.
    pub async fn requeue(&self, delay: Option<Duration>) -> Result<()> {
        self.requeue_with(delay, Signal::Backoff).await
    }

    /// REQ without backing off the consumer.
    pub async fn requeue_without_backoff(&self, delay: Option<Duration>) -> Result<()> {
        self.requeue_with(delay, Signal::Continue).await
    }

    async fn requeue_with(&self, delay: Option<Duration>, signal: Signal) -> Result<()> {
        let delay = delay.unwrap_or_else(|| self.auto_delay());
        let ms = delay.as_millis() as u64;
        self.answer(Command::Req(&self.raw.id, ms), signal, true)
            .await
    }

    /// The automatic requeue delay: `default × attempts`, capped at the maximum.
    pub fn auto_delay(&self) -> Duration {
        self.default_requeue_delay
            .saturating_mul(u32::from(self.raw.attempts))
            .min(self.max_requeue_delay)
    }

    /// TOUCH: resets the server's timeout for this message. A no-op once answered.
    pub async fn touch(&self) -> Result<()> {
        if self.is_answered() {
            return Ok(());
        }
        self.writer.send(Command::Touch(&self.raw.id)).await
    }

    async fn answer(&self, command: Command<'_>, signal: Signal, requeued: bool) -> Result<()> {
        if self.answered.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let sent = self.writer.send(command).await;
        if sent.is_err() {
            self.answered.store(false, Ordering::Release);
            return sent.map_err(|_| Error::Closed("the connection this message came from"));
        }
        let _ = self.answered_tx.send(Answered {
            origin: self.origin.clone(),
            generation: self.generation,
            signal,
            requeued,
        });
        Ok(())
    }
}
