//! The queue between pumps and their stream: bounded in messages, moved in batches.
//!
//! A pump hands over what one receive gave it as one batch, and the stream takes a whole batch
//! at a time, so the channel's send, receive and wake-up are paid per batch, not per message.
//! The bound stays one of messages, as `StreamOptions::buffer` promises: a pump sends only as
//! many messages as there is room for (at least one, as soon as there is room for one), and a
//! message keeps its room until the stream has taken it out of its batch. So at any moment the
//! messages queued or waiting in the stream's current batch number at most the capacity, as
//! they did in a queue of single messages; and a message queues as soon as it would have in
//! one (a tick waited for by a capped channel, say).
//!
//! The stream frees the room of taken messages lazily: always before it waits for anything
//! ([`QueueReader::recv`], or explicitly through [`QueueReader::release`]), so a pump never
//! waits for room that the stream only holds while it is busy.

use std::collections::VecDeque;
use std::sync::Arc;

use tokio::sync::{mpsc, AcquireError, Semaphore};

use super::pump::Delivered;

/// The sending side, one clone per pump.
#[derive(Clone)]
pub(crate) struct Queue {
    tx: mpsc::UnboundedSender<Vec<Delivered>>,
    room: Arc<Semaphore>,
}

/// The receiving side, owned by the stream.
pub(crate) struct QueueReader {
    rx: mpsc::UnboundedReceiver<Vec<Delivered>>,
    room: Arc<Semaphore>,
    capacity: usize,
    /// The batch being taken, message by message.
    batch: std::vec::IntoIter<Delivered>,
    /// Messages taken whose room is not yet freed.
    taken: usize,
}

/// A queue with room for `capacity` messages (at least one).
pub(crate) fn queue(capacity: usize) -> (Queue, QueueReader) {
    let capacity = capacity.clamp(1, Semaphore::MAX_PERMITS);
    let (tx, rx) = mpsc::unbounded_channel();
    let room = Arc::new(Semaphore::new(capacity));
    (
        Queue {
            tx,
            room: room.clone(),
        },
        QueueReader {
            rx,
            room,
            capacity,
            batch: Vec::new().into_iter(),
            taken: 0,
        },
    )
}

/// The reader is gone: nothing more can be sent.
#[derive(Debug)]
pub(crate) struct Gone;

impl From<AcquireError> for Gone {
    fn from(_: AcquireError) -> Self {
        Gone
    }
}

impl Queue {
    /// Waits for room for at least one message, then sends from the front of `pending` as many
    /// as there is room for; returns what was sent, for the caller to look at (the messages
    /// themselves are gone). Cancel-safe: nothing leaves `pending` before the room is taken,
    /// and nothing is awaited after.
    pub(crate) async fn send(&self, pending: &mut VecDeque<Delivered>) -> Result<Sent, Gone> {
        if pending.is_empty() {
            return Ok(Sent::default());
        }
        self.room.acquire().await?.forget();
        let mut count = 1;
        let more = pending.len() - 1;
        let free = self.room.available_permits().min(more);
        if free > 0 {
            // Another pump of a shared queue may take the room first: then send only one.
            if let Ok(permits) = self
                .room
                .try_acquire_many(u32::try_from(free).unwrap_or(u32::MAX))
            {
                count += permits.num_permits();
                permits.forget();
            }
        }
        // All of it (the usual case) moves nothing: the deque is a received batch's `Vec`.
        let batch: Vec<Delivered> = if count >= pending.len() {
            Vec::from(std::mem::take(pending))
        } else {
            pending.drain(..count).collect()
        };
        let sent = Sent::of(&batch);
        self.tx.send(batch).map_err(|_| Gone)?;
        Ok(sent)
    }

    /// Room for how many messages there is now (another pump of a shared queue may take it).
    pub(crate) fn room(&self) -> usize {
        self.room.available_permits()
    }

    /// Sends `batch` whole, waiting for room for all of it (for the few events that end a
    /// channel).
    pub(crate) async fn send_all(&self, batch: Vec<Delivered>) -> Result<(), Gone> {
        let need = u32::try_from(batch.len()).unwrap_or(u32::MAX);
        self.room.acquire_many(need).await?.forget();
        self.tx.send(batch).map_err(|_| Gone)
    }
}

/// What a [`Queue::send`] sent.
#[derive(Debug, Default)]
pub(crate) struct Sent {
    /// Timeticks among the messages.
    pub(crate) ticks: u64,
    /// Whether the last event ends the channel.
    pub(crate) closed: bool,
}

impl Sent {
    fn of(batch: &[Delivered]) -> Self {
        Sent {
            ticks: batch.iter().filter(|d| d.is_tick()).count() as u64,
            closed: batch.last().is_some_and(Delivered::is_closed),
        }
    }
}

impl QueueReader {
    /// The next message of the current batch, without waiting.
    #[inline]
    pub(crate) fn try_next(&mut self) -> Option<Delivered> {
        let next = self.batch.next();
        self.taken += usize::from(next.is_some());
        next
    }

    /// The next message, waiting for a batch when the current one is used up. `None` once
    /// every sender is gone and everything was taken. Cancel-safe.
    pub(crate) async fn recv(&mut self) -> Option<Delivered> {
        loop {
            if let Some(next) = self.try_next() {
                return Some(next);
            }
            self.release();
            self.batch = self.rx.recv().await?.into_iter();
        }
    }

    /// Frees the room of the messages taken so far.
    pub(crate) fn release(&mut self) {
        if self.taken > 0 {
            self.room.add_permits(self.taken);
            self.taken = 0;
        }
    }

    /// Messages queued or still in the current batch (what the stream holds before reading).
    pub(crate) fn held(&self) -> usize {
        self.capacity
            .saturating_sub(self.room.available_permits())
            .saturating_sub(self.taken)
    }
}

impl Drop for QueueReader {
    fn drop(&mut self) {
        // Pumps waiting for room learn that no one will read what they send.
        self.room.close();
    }
}
