//! The queue between pumps and their stream: bounded in deliveries, moved in batches.
//!
//! A pump hands over what one receive gave it in one send (its batches, see [`super::batch`]),
//! and the stream takes a whole batch at a time, so the channel's send, receive and wake-up
//! are paid per receive and per batch, not per message. The bound stays one of messages, as
//! `StreamOptions::buffer` promises: a pump sends only as many deliveries as there is room for
//! (at least one, as soon as there is room for one, splitting a batch if it must), and they keep
//! their room until the stream has taken their batch (or, for what it puts back with
//! [`QueueReader::unread`], until it takes them again). So at any moment the messages queued
//! number at most the capacity, as they did in a queue of single messages; and a message
//! queues as soon as it would have in one (a tick waited for by a capped channel, say).
//!
//! The stream frees the room of taken deliveries lazily: always before it waits for anything
//! ([`QueueReader::recv`], or explicitly through [`QueueReader::release`]), so a pump never
//! waits for room that the stream only holds while it is busy.

use std::collections::VecDeque;
use std::sync::Arc;

use tokio::sync::{mpsc, AcquireError, Semaphore};

use super::batch::Batch;

/// The sending side, one clone per pump.
pub(crate) struct Queue<S> {
    tx: mpsc::UnboundedSender<Vec<Batch<S>>>,
    room: Arc<Semaphore>,
}

impl<S> Clone for Queue<S> {
    fn clone(&self) -> Self {
        Queue {
            tx: self.tx.clone(),
            room: self.room.clone(),
        }
    }
}

/// The receiving side, owned by the stream.
pub(crate) struct QueueReader<S> {
    rx: mpsc::UnboundedReceiver<Vec<Batch<S>>>,
    room: Arc<Semaphore>,
    capacity: usize,
    /// Batches received and not yet taken, in order.
    batches: VecDeque<Batch<S>>,
    /// Deliveries taken whose room is not yet freed.
    taken: usize,
}

/// A queue with room for `capacity` deliveries (at least one).
pub(crate) fn queue<S>(capacity: usize) -> (Queue<S>, QueueReader<S>) {
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
            batches: VecDeque::new(),
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

impl<S: Default> Queue<S> {
    /// Waits for room for at least one delivery, then sends from the front of `pending` as
    /// many as there is room for (whole batches, and the front part of the first that does not
    /// fit); returns what was sent, for the caller to look at (the batches themselves are
    /// gone). Cancel-safe: nothing leaves `pending` before the room is taken, and nothing is
    /// awaited after.
    pub(crate) async fn send(&self, pending: &mut VecDeque<Batch<S>>) -> Result<Sent, Gone> {
        let total: usize = pending.iter().map(Batch::len).sum();
        if total == 0 {
            pending.clear();
            return Ok(Sent::default());
        }
        self.room.acquire().await?.forget();
        let mut room = 1;
        let free = self.room.available_permits().min(total - 1);
        if free > 0 {
            // Another pump of a shared queue may take the room first: then send only one.
            if let Ok(permits) = self
                .room
                .try_acquire_many(u32::try_from(free).unwrap_or(u32::MAX))
            {
                room += permits.num_permits();
                permits.forget();
            }
        }
        let mut out = Vec::with_capacity(pending.len());
        while room > 0 {
            let Some(mut batch) = pending.pop_front() else {
                break;
            };
            let len = batch.len();
            if len > room {
                out.push(batch.split_front(room));
                pending.push_front(batch);
                break;
            }
            room -= len;
            if len > 0 {
                out.push(batch);
            }
        }
        let sent = Sent::of(&out);
        self.tx.send(out).map_err(|_| Gone)?;
        Ok(sent)
    }

    /// Room for how many deliveries there is now (another pump of a shared queue may take it).
    pub(crate) fn room(&self) -> usize {
        self.room.available_permits()
    }
}

/// What a [`Queue::send`] sent.
#[derive(Debug, Default)]
pub(crate) struct Sent {
    /// Timeticks among the messages.
    pub(crate) ticks: u64,
    /// Whether the last delivery ends the channel.
    pub(crate) closed: bool,
}

impl Sent {
    fn of<S>(batches: &[Batch<S>]) -> Self {
        Sent {
            ticks: batches.iter().map(|b| b.ticks as u64).sum(),
            closed: batches.last().is_some_and(|b| b.closed),
        }
    }
}

impl<S> QueueReader<S> {
    /// The next batch, without waiting; its deliveries count as taken.
    #[inline]
    pub(crate) fn try_next(&mut self) -> Option<Batch<S>> {
        if self.batches.is_empty() {
            if let Ok(batches) = self.rx.try_recv() {
                self.batches.extend(batches);
            }
        }
        let next = self.batches.pop_front();
        self.taken += next.as_ref().map_or(0, Batch::len);
        next
    }

    /// The next batch, waiting for one when none is queued. `None` once every sender is gone
    /// and everything was taken. Cancel-safe.
    pub(crate) async fn recv(&mut self) -> Option<Batch<S>> {
        loop {
            if let Some(next) = self.try_next() {
                return Some(next);
            }
            self.release();
            let batches = self.rx.recv().await?;
            self.batches.extend(batches);
        }
    }

    /// Puts back the untaken rest of the batch taken last: it comes first again, and its
    /// deliveries no longer count as taken.
    pub(crate) fn unread(&mut self, rest: Batch<S>) {
        self.taken = self.taken.saturating_sub(rest.len());
        self.batches.push_front(rest);
    }

    /// Frees the room of the deliveries taken so far.
    pub(crate) fn release(&mut self) {
        if self.taken > 0 {
            self.room.add_permits(self.taken);
            self.taken = 0;
        }
    }

    /// Deliveries queued or put back (what the stream holds before reading).
    pub(crate) fn held(&self) -> usize {
        self.capacity
            .saturating_sub(self.room.available_permits())
            .saturating_sub(self.taken)
    }
}

impl<S> Drop for QueueReader<S> {
    fn drop(&mut self) {
        // Pumps waiting for room learn that no one will read what they send.
        self.room.close();
    }
}
