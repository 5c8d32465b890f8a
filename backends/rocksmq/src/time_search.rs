//! Searching a topic by time through its sparse time index (see `crate::time_index`).

use msgstream::mq::message_timestamp;
use msgstream::Result;

use crate::codec::decode_u64;
use crate::keys::{time_mark_key, CF_META};
use crate::store::db_error;
use crate::time_index::{self, NOT_STARTED};
use crate::Rocksmq;

impl Rocksmq {
    /// Where a time search of `topic` for `timestamp` starts reading: an id such that no
    /// message before it has a timestamp ≥ `timestamp`
    /// ([`msgstream::mq::Client::time_lower_bound`]), at most one index block
    /// (256 ids) before the first message that has. Costs a binary search
    /// over the index marks (a RocksDB read per step) and nothing else.
    ///
    /// The answer is an id the topic holds, so a reader can start there: the oldest message
    /// while unindexed messages (written before this version had the index; see the README)
    /// remain, the newest message when no indexed message reaches the time, 0 for a topic
    /// holding no message.
    pub fn time_lower_bound(&self, topic: &str, timestamp: u64) -> Result<u64> {
        let state = self.topic(topic)?;
        let tail = state.tail();
        let Some(oldest) = self.oldest_message_id(topic)? else {
            return Ok(0);
        };
        let newest = tail.next_id.saturating_sub(1).max(oldest);
        if tail.time_from == NOT_STARTED || oldest < tail.time_from {
            return Ok(oldest);
        }
        let found = self.inner.store.with(|db| {
            let meta = db.cf(CF_META)?;
            time_index::first_block_reaching(oldest, newest, timestamp, |block| {
                let stored = db
                    .db
                    .get_pinned_cf(meta, time_mark_key(state.id, block))
                    .map_err(|e| db_error("reading the time index", e))?;
                // Missing (retention racing this search) or unreadable: the largest possible
                // mark keeps the answer a lower bound.
                Ok(stored
                    .and_then(|bytes| decode_u64("time index mark", &bytes).ok())
                    .unwrap_or(u64::MAX))
            })
        })?;
        Ok(found.map_or(newest, |block| block.max(oldest)))
    }
}

impl Rocksmq {
    /// The id of the first message of `topic` (in id order) whose timestamp
    /// ([`msgstream::mq::message_timestamp`] of its payload) is ≥ `timestamp`, or the id the
    /// next message will get when none is, as of the call: [`Rocksmq::time_lower_bound`], then
    /// at most one index block read forward and decoded. A consumer group or a reader
    /// starting there reads exactly the messages from that time on (in the sense of
    /// `msgstream::mq::time`).
    pub fn position_at_time(&self, topic: &str, timestamp: u64) -> Result<u64> {
        let bound = self.time_lower_bound(topic, timestamp)?;
        let mut reader = self.reader(topic, bound)?;
        loop {
            let batch = reader.read(time_index::BLOCK as usize)?;
            if batch.is_empty() {
                return Ok(reader.position());
            }
            if let Some(found) = batch
                .iter()
                .find(|m| message_timestamp(&m.payload).is_some_and(|ts| ts >= timestamp))
            {
                return Ok(found.id);
            }
        }
    }
}
