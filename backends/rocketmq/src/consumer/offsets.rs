//! The group's consume offsets in memory (next offset to consume per queue), and which of them
//! still need persisting to the broker.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::admin::Admin;
use crate::error::Result;
use crate::protocol::route::MessageQueue;

#[derive(Debug, Default, Clone, Copy)]
struct Entry {
    offset: i64,
    dirty: bool,
}

/// In-memory offsets; persisted on an interval, on demand and at shutdown.
#[derive(Debug, Default)]
pub struct OffsetStore {
    entries: Mutex<HashMap<MessageQueue, Entry>>,
}

impl OffsetStore {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<MessageQueue, Entry>> {
        msgstream::sync::lock(&self.entries)
    }

    /// The in-memory offset of `mq`.
    pub fn get(&self, mq: &MessageQueue) -> Option<i64> {
        self.lock().get(mq).map(|e| e.offset)
    }

    /// Sets the offset of `mq`; `persist` marks it for the next persist.
    pub fn set(&self, mq: &MessageQueue, offset: i64, persist: bool) {
        let mut entries = self.lock();
        let entry = entries.entry(mq.clone()).or_default();
        entry.offset = offset;
        entry.dirty |= persist;
    }

    /// Moves the offset of `mq` forward to `offset` (never backwards); marks it for persisting.
    pub fn advance(&self, mq: &MessageQueue, offset: i64) {
        let mut entries = self.lock();
        let entry = entries.entry(mq.clone()).or_default();
        if offset >= entry.offset {
            entry.offset = offset;
            entry.dirty = true;
        }
    }

    /// Forgets `mq` (after it was allocated to another consumer), returning its offset if it
    /// still needed persisting.
    pub fn remove(&self, mq: &MessageQueue) -> Option<i64> {
        self.lock().remove(mq).filter(|e| e.dirty).map(|e| e.offset)
    }

    /// Sends every unpersisted offset to the broker. Offsets that fail stay marked.
    pub async fn persist(&self, admin: &Admin, group: &str) -> Result<()> {
        let dirty: Vec<(MessageQueue, i64)> = self
            .lock()
            .iter()
            .filter(|(_, e)| e.dirty)
            .map(|(q, e)| (q.clone(), e.offset))
            .collect();
        let mut first_error = None;
        for (mq, offset) in dirty {
            match admin.update_consumer_offset(group, &mq, offset).await {
                Ok(()) => {
                    if let Some(e) = self.lock().get_mut(&mq).filter(|e| e.offset == offset) {
                        e.dirty = false;
                    }
                }
                Err(e) => {
                    tracing::debug!(queue = %mq, error = %e, "persisting a rocketmq offset failed");
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}
