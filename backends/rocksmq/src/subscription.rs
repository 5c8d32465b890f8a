//! Engine-level cursors: a consumer group's [`Subscription`] and a non-durable [`TopicReader`].
//!
//! Both read in id order and wait for new messages through the writer's notification (no
//! polling). Every method that can wait is cancel-safe: the cursor only moves in the synchronous
//! read that follows a completed wait, so dropping a pending future loses nothing.

use std::sync::Arc;

use msgstream::Result;

use crate::read::{Cursor, StoredMessage};
use crate::topics::TopicState;
use crate::Rocksmq;

/// One consumer of a consumer group: a read cursor starting at the group's committed position.
///
/// The cursor itself is in memory; what survives a restart is the committed position, moved by
/// [`Subscription::ack`] and [`Subscription::seek`]. Unacknowledged messages are delivered again
/// to the next subscription of the group (at least once). Several subscriptions of one group each
/// read from the committed position on their own; acks are cumulative maxima.
#[derive(Debug)]
pub struct Subscription {
    engine: Rocksmq,
    group: String,
    cursor: Cursor,
}

impl Subscription {
    pub(crate) fn new(engine: Rocksmq, group: String, cursor: Cursor) -> Subscription {
        Subscription {
            engine,
            group,
            cursor,
        }
    }

    /// The topic consumed.
    pub fn topic(&self) -> &str {
        &self.cursor.topic.name
    }

    /// The state of the topic consumed, as it was when the subscription was made.
    pub(crate) fn topic_state(&self) -> &Arc<TopicState> {
        &self.cursor.topic
    }

    /// The consumer group.
    pub fn group(&self) -> &str {
        &self.group
    }

    /// The id the next consumed message will have at least.
    pub fn position(&self) -> u64 {
        self.cursor.next
    }

    /// Up to `n` messages after the cursor, in id order, without waiting (empty if none).
    pub fn consume(&mut self, n: usize) -> Result<Vec<StoredMessage>> {
        let mut out = Vec::new();
        self.cursor
            .read(&self.engine.inner.store, n, &mut out, |message| message)?;
        Ok(out)
    }

    /// Waits for at least one message, then returns up to `n`. Cancel-safe.
    pub async fn next_batch(&mut self, n: usize) -> Result<Vec<StoredMessage>> {
        self.next_batch_with(n, |message| message).await
    }

    /// [`Subscription::next_batch`], building each message with `make` as it is read.
    pub(crate) async fn next_batch_with<T>(
        &mut self,
        n: usize,
        make: impl FnMut(StoredMessage) -> T,
    ) -> Result<Vec<T>> {
        self.cursor
            .next_batch(&self.engine.inner.store, n, make)
            .await
    }

    /// Acknowledges `id` and everything before it (see [`Rocksmq::ack`]).
    pub fn ack(&self, id: u64) -> Result<()> {
        self.engine.ack(self.topic(), &self.group, id)
    }

    /// Moves the group and this cursor to `id` (inclusive), durably; backwards is allowed.
    pub fn seek(&mut self, id: u64) -> Result<()> {
        self.engine.seek(self.topic(), &self.group, id)?;
        self.cursor.next = id;
        Ok(())
    }

    /// Moves the group and this cursor past every message produced so far.
    pub fn seek_to_latest(&mut self) -> Result<()> {
        self.cursor.next = self.engine.seek_to_latest(self.topic(), &self.group)?;
        Ok(())
    }
}

/// A non-durable cursor over one topic.
#[derive(Debug)]
pub struct TopicReader {
    engine: Rocksmq,
    cursor: Cursor,
}

impl TopicReader {
    pub(crate) fn new(engine: Rocksmq, cursor: Cursor) -> TopicReader {
        TopicReader { engine, cursor }
    }

    /// The topic read.
    pub fn topic(&self) -> &str {
        &self.cursor.topic.name
    }

    /// The id the next message will have at least.
    pub fn position(&self) -> u64 {
        self.cursor.next
    }

    /// Up to `n` messages after the cursor, without waiting.
    pub fn read(&mut self, n: usize) -> Result<Vec<StoredMessage>> {
        self.read_with(n, |message| message)
    }

    /// Waits for at least one message, then returns up to `n`. Cancel-safe.
    pub async fn next_batch(&mut self, n: usize) -> Result<Vec<StoredMessage>> {
        self.next_batch_with(n, |message| message).await
    }

    /// [`TopicReader::read`], building each message with `make` as it is read.
    pub(crate) fn read_with<T>(
        &mut self,
        n: usize,
        make: impl FnMut(StoredMessage) -> T,
    ) -> Result<Vec<T>> {
        let mut out = Vec::new();
        self.cursor
            .read(&self.engine.inner.store, n, &mut out, make)?;
        Ok(out)
    }

    /// [`TopicReader::next_batch`], building each message with `make` as it is read.
    pub(crate) async fn next_batch_with<T>(
        &mut self,
        n: usize,
        make: impl FnMut(StoredMessage) -> T,
    ) -> Result<Vec<T>> {
        self.cursor
            .next_batch(&self.engine.inner.store, n, make)
            .await
    }

    /// Moves the cursor so that the next message is the first with id ≥ `id`.
    pub fn seek(&mut self, id: u64) {
        self.cursor.next = id;
    }
}
