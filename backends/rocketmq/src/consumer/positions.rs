//! Positions of a [`LitePullConsumer`]: offsets, seeks and pausing.

use super::LitePullConsumer;
use crate::error::{Error, Result};
use crate::protocol::route::MessageQueue;

impl LitePullConsumer {
    /// Sets the in-memory offset of `mq` (persisted with the next persist).
    pub fn update_offset(&self, mq: &MessageQueue, offset: i64) -> Result<()> {
        self.check_open()?;
        self.inner.offsets.set(mq, offset, true);
        Ok(())
    }

    /// Persists every changed offset now.
    pub async fn persist_offset(&self) -> Result<()> {
        self.check_open()?;
        self.inner
            .offsets
            .persist(&self.inner.admin, &self.inner.group)
            .await
    }

    /// Stores `offset` as the group's committed offset of `mq` on the broker now (one
    /// UPDATE_CONSUMER_OFFSET), leaving the in-memory position alone.
    pub async fn commit_offset(&self, mq: &MessageQueue, offset: i64) -> Result<()> {
        self.check_open()?;
        self.inner
            .admin
            .update_consumer_offset(&self.inner.group, mq, offset)
            .await
    }

    /// The group's offset of `mq`: in memory, else as committed on the broker.
    pub async fn current_offset(&self, mq: &MessageQueue) -> Result<Option<i64>> {
        self.check_open()?;
        match self.inner.offsets.get(mq) {
            Some(offset) => Ok(Some(offset)),
            None => {
                self.inner
                    .admin
                    .query_consumer_offset(&self.inner.group, mq)
                    .await
            }
        }
    }

    /// Moves `mq` (which must be assigned) to `offset` within `[min, max]`; buffered messages
    /// of the queue are dropped and fetching restarts there.
    pub async fn seek(&self, mq: &MessageQueue, offset: i64) -> Result<()> {
        self.check_assigned(mq)?;
        let (min, max) = (
            self.inner.admin.min_offset(mq).await?,
            self.inner.admin.max_offset(mq).await?,
        );
        if offset < min || offset > max {
            return Err(Error::InvalidArgument(format!(
                "offset {offset} of {mq} is outside [{min}, {max}]"
            )));
        }
        self.reposition(mq, offset)
    }

    fn check_assigned(&self, mq: &MessageQueue) -> Result<()> {
        self.check_open()?;
        if !self.inner.state().queues.contains_key(mq) {
            return Err(Error::IllegalState(format!(
                "queue {mq} is not assigned to this consumer (in subscribe mode it may be rebalancing)"
            )));
        }
        Ok(())
    }

    /// `seek` without the range check, for callers that checked against what they know
    /// better than the broker's (possibly lagging) max offset.
    pub(crate) fn reposition(&self, mq: &MessageQueue, offset: i64) -> Result<()> {
        self.check_assigned(mq)?;
        self.inner.offsets.set(mq, offset, true);
        self.inner.spawn_fetch(mq, offset);
        Ok(())
    }

    /// Seeks `mq` to its first stored message.
    pub async fn seek_to_begin(&self, mq: &MessageQueue) -> Result<()> {
        let min = self.inner.admin.min_offset(mq).await?;
        self.seek(mq, min).await
    }

    /// Seeks `mq` past its last message.
    pub async fn seek_to_end(&self, mq: &MessageQueue) -> Result<()> {
        let max = self.inner.admin.max_offset(mq).await?;
        self.seek(mq, max).await
    }

    /// The offset of the first message of `mq` stored at or after `timestamp_ms`.
    pub async fn offset_for_timestamp(&self, mq: &MessageQueue, timestamp_ms: i64) -> Result<i64> {
        self.check_open()?;
        self.inner.admin.search_offset(mq, timestamp_ms).await
    }

    /// Stops fetching `queues` (already buffered batches can still be polled).
    pub fn pause(&self, queues: &[MessageQueue]) {
        self.set_paused(queues, true);
    }

    /// Resumes fetching `queues`.
    pub fn resume(&self, queues: &[MessageQueue]) {
        self.set_paused(queues, false);
    }

    fn set_paused(&self, queues: &[MessageQueue], paused: bool) {
        let mut state = self.inner.state();
        for mq in queues {
            if paused {
                state.paused.insert(mq.clone());
            } else {
                state.paused.remove(mq);
            }
            if let Some(task) = state.queues.get(mq) {
                task.paused.send_replace(paused);
            }
        }
    }
}
