//! The topic registry: names → numeric ids, each topic's tail and its wake-up signal.
//!
//! A topic's numeric id is allocated once from a counter and never reused, so a topic destroyed
//! and created again under the same name starts empty even if a deleted key was still waiting
//! for compaction.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use msgstream::mq::validate_channel_name;
use msgstream::{Error, Result};
use tokio::sync::Notify;

use crate::codec::{decode_u64, PageMark, PageRecord};
use crate::keys::{
    message_id_from_key, message_key, page_mark_key, time_from_key, time_mark_key, topic_floor_key,
    topic_name_from_key, topic_name_key, topic_prefix, topic_upper_bound, CF_MESSAGES, CF_META,
    CF_PAGES, CF_PROPERTIES, META_NEXT_TOPIC_ID, TOPIC_NAME_PREFIX,
};
use crate::recent::RecentWrite;
use crate::store::{db_error, Db, BACKEND};
use crate::time_index;

/// Ids start at 1, so 0 precedes every message of every topic.
pub(crate) const FIRST_MESSAGE_ID: u64 = 1;

/// Where a topic's log ends. Kept in memory only: [`recover_tail`] rebuilds it at open from what
/// is durable (message keys, page records and the id floor), so appends write nothing but their
/// messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Tail {
    /// Id the next message will get (ids start at 1, so 0 precedes every message).
    pub next_id: u64,
    /// First id of the open (tail) page.
    pub page_first: u64,
    /// Payload and property bytes in the open page.
    pub page_bytes: u64,
    /// First id the time index covers ([`time_index::NOT_STARTED`] before the first append of
    /// a version that keeps one).
    pub time_from: u64,
    /// The time index's high-water mark: the largest timestamp of the indexed messages (when
    /// `time_high_known`).
    pub time_high: u64,
    /// Whether `time_high` is current. An open leaves it unknown: the messages of a topic's
    /// open index block have no mark yet, so the mark is worked out from them by the first
    /// append after the open ([`open_block_high`]), not by the open itself.
    pub time_high_known: bool,
}

/// A [`Tail`] in atomics rather than under a mutex: a single-message append reads and moves
/// it once each, and four lock operations were a tenth of the writer's own cost. One writer at a
/// time stores it (the commit lock serialises them), so plain loads and stores suffice.
struct TailCell {
    next_id: AtomicU64,
    page_first: AtomicU64,
    page_bytes: AtomicU64,
    time_from: AtomicU64,
    time_high: AtomicU64,
    time_high_known: AtomicBool,
}

impl TailCell {
    fn new(tail: Tail) -> TailCell {
        TailCell {
            next_id: AtomicU64::new(tail.next_id),
            page_first: AtomicU64::new(tail.page_first),
            page_bytes: AtomicU64::new(tail.page_bytes),
            time_from: AtomicU64::new(tail.time_from),
            time_high: AtomicU64::new(tail.time_high),
            time_high_known: AtomicBool::new(tail.time_high_known),
        }
    }

    fn load(&self) -> Tail {
        Tail {
            next_id: self.next_id.load(Ordering::Acquire),
            page_first: self.page_first.load(Ordering::Acquire),
            page_bytes: self.page_bytes.load(Ordering::Acquire),
            time_from: self.time_from.load(Ordering::Acquire),
            time_high: self.time_high.load(Ordering::Acquire),
            time_high_known: self.time_high_known.load(Ordering::Acquire),
        }
    }

    fn store(&self, tail: Tail) {
        self.page_first.store(tail.page_first, Ordering::Release);
        self.page_bytes.store(tail.page_bytes, Ordering::Release);
        self.time_from.store(tail.time_from, Ordering::Release);
        self.time_high.store(tail.time_high, Ordering::Release);
        self.time_high_known
            .store(tail.time_high_known, Ordering::Release);
        self.next_id.store(tail.next_id, Ordering::Release);
    }
}

/// One live topic.
pub(crate) struct TopicState {
    /// Name as given by users.
    pub name: String,
    /// Numeric id, the key prefix of everything of this topic.
    pub id: u64,
    /// Next id and open page; changed only by the writer while it holds the commit lock.
    tail: TailCell,
    /// The next id readers may see (everything below it is in the WAL). The writer raises it
    /// after each write, then notifies `wakeup`.
    visible: AtomicU64,
    /// Wakes waiting cursors: after each write, and on destroy and close.
    pub wakeup: Notify,
    /// Cursors waiting on `wakeup` now (see [`TopicState::waiting`]): a write nobody waits for
    /// skips the notification, which in tokio's `Notify` is a mutex round trip.
    waiters: AtomicUsize,
    /// Set by `destroy_topic`; handles held by producers and consumers then fail.
    pub destroyed: AtomicBool,
    /// Whether any message of this topic may carry properties: recovered at open, set by the
    /// writer before such a message becomes visible. While false, reads skip the properties
    /// column family altogether (most topics never use properties).
    has_properties: AtomicBool,
    /// The latest small write a cursor was waiting for, read from memory by that cursor.
    pub recent: RecentWrite,
}

impl TopicState {
    fn new(name: String, id: u64, tail: Tail, has_properties: bool) -> Arc<TopicState> {
        Arc::new(TopicState {
            name,
            id,
            tail: TailCell::new(tail),
            visible: AtomicU64::new(tail.next_id),
            wakeup: Notify::new(),
            waiters: AtomicUsize::new(0),
            destroyed: AtomicBool::new(false),
            has_properties: AtomicBool::new(has_properties),
            recent: RecentWrite::default(),
        })
    }

    /// `InvalidArgument` once the topic was destroyed.
    pub fn check_live(&self) -> Result<()> {
        if self.destroyed.load(Ordering::Acquire) {
            return Err(Error::InvalidArgument(format!(
                "topic {:?} was destroyed",
                self.name
            )));
        }
        Ok(())
    }

    /// The current tail (a copy). Exact under the writer's commit lock; without it, each field
    /// is one a commit left (callers outside the writer read one field).
    pub fn tail(&self) -> Tail {
        self.tail.load()
    }

    /// Moves the tail; only the writer calls it, under its commit lock.
    pub fn set_tail(&self, tail: Tail) {
        self.tail.store(tail);
    }

    /// Wakes every waiter without publishing anything new.
    pub fn wake(&self) {
        self.wakeup.notify_waiters();
    }

    /// Whether a message visible now may carry properties. Load [`TopicState::visible`] first:
    /// the flag is raised before the ids of the first message with properties are published.
    pub fn has_properties(&self) -> bool {
        self.has_properties.load(Ordering::Acquire)
    }

    /// Called by the writer for a message with properties, before it is published.
    pub fn note_properties(&self) {
        self.has_properties.store(true, Ordering::Release);
    }

    /// The next id readers may see.
    ///
    /// Sequentially consistent, like the store in [`TopicState::publish`] and the count in
    /// [`TopicState::waiting`]: a waiter that registered before loading this either sees the
    /// new id or is seen, and notified, by the writer.
    pub fn visible(&self) -> u64 {
        self.visible.load(Ordering::SeqCst)
    }

    /// Whether a cursor waits for this topic's next write now. A hint only (a cursor may start
    /// or stop waiting right after): used to decide whether a write is worth keeping in
    /// [`TopicState::recent`].
    pub fn awaited(&self) -> bool {
        self.waiters.load(Ordering::Relaxed) > 0
    }

    /// Makes every id below `next` visible and wakes waiters, if there are any.
    pub fn publish(&self, next: u64) {
        self.visible.store(next, Ordering::SeqCst);
        if self.waiters.load(Ordering::SeqCst) > 0 {
            self.wakeup.notify_waiters();
        }
    }

    /// Counts the caller as waiting on [`TopicState::wakeup`] until the guard is dropped. A
    /// waiter creates its `Notified` first, then registers, then loads
    /// [`TopicState::visible`]: a writer that publishes after that load sees the count and
    /// notifies (the `Notified` predates the notification, so tokio delivers it); one that
    /// published before it is seen in the load.
    pub fn waiting(&self) -> Waiting<'_> {
        self.waiters.fetch_add(1, Ordering::SeqCst);
        Waiting(self)
    }
}

/// A registered waiter of a topic (see [`TopicState::waiting`]).
pub(crate) struct Waiting<'a>(&'a TopicState);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.waiters.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Checks a topic name: the portable channel-name rule. Names are only ever stored as values
/// or after a fixed tag byte, never concatenated into message keys.
pub(crate) fn validate_topic(name: &str) -> Result<()> {
    validate_channel_name("topic", name)
}

/// Every live topic, by name.
#[derive(Default)]
pub(crate) struct Topics {
    map: Mutex<HashMap<String, Arc<TopicState>>>,
}

impl Topics {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<TopicState>>> {
        match self.map.lock() {
            Ok(map) => map,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Loads every topic from the `meta` column family and recovers its tail.
    pub fn load(db: &Db<'_>) -> Result<Topics> {
        let meta = db.cf(CF_META)?;
        let mut map = HashMap::new();
        let mut iter = db.db.raw_iterator_cf(meta);
        iter.seek(TOPIC_NAME_PREFIX);
        while let (Some(key), Some(value)) = (iter.key(), iter.value()) {
            let Some(name) = topic_name_from_key(key) else {
                break;
            };
            let id = decode_u64("topic id", value)?;
            let tail = recover_tail(db, id)?;
            let has_properties = any_properties(db, id)?;
            map.insert(
                name.to_owned(),
                TopicState::new(name.to_owned(), id, tail, has_properties),
            );
            iter.next();
        }
        iter.status().map_err(|e| db_error("listing topics", e))?;
        Ok(Topics {
            map: Mutex::new(map),
        })
    }

    /// The live topic `name`, if any.
    pub fn get(&self, name: &str) -> Option<Arc<TopicState>> {
        self.map().get(name).cloned()
    }

    /// The live topic `name`, or `InvalidArgument` naming it.
    pub fn require(&self, name: &str) -> Result<Arc<TopicState>> {
        validate_topic(name)?;
        self.get(name)
            .ok_or_else(|| Error::InvalidArgument(format!("topic {name:?} does not exist")))
    }

    /// The topic `name`, created (durably) if missing.
    pub fn get_or_create(&self, db: &Db<'_>, name: &str) -> Result<Arc<TopicState>> {
        validate_topic(name)?;
        let mut map = self.map();
        if let Some(topic) = map.get(name) {
            return Ok(topic.clone());
        }
        let meta = db.cf(CF_META)?;
        let id = match db
            .db
            .get_pinned_cf(meta, META_NEXT_TOPIC_ID)
            .map_err(|e| db_error("reading the topic counter", e))?
        {
            Some(bytes) => decode_u64("topic counter", &bytes)?,
            None => 1,
        };
        if id == u64::MAX {
            return Err(Error::backend(BACKEND, "topic ids exhausted"));
        }
        let tail = initial_tail();
        let mut batch = rocksdb::WriteBatch::default();
        batch.put_cf(meta, META_NEXT_TOPIC_ID, (id + 1).to_be_bytes());
        batch.put_cf(meta, topic_name_key(name), id.to_be_bytes());
        batch.put_cf(meta, topic_floor_key(id), tail.next_id.to_be_bytes());
        db.write(batch)?;
        let topic = TopicState::new(name.to_owned(), id, tail, false);
        map.insert(name.to_owned(), topic.clone());
        Ok(topic)
    }

    /// Removes `name` from the registry (the caller deletes its data).
    pub fn remove(&self, name: &str) -> Option<Arc<TopicState>> {
        self.map().remove(name)
    }

    /// Every live topic, sorted by name.
    pub fn all(&self) -> Vec<Arc<TopicState>> {
        let mut topics: Vec<_> = self.map().values().cloned().collect();
        topics.sort_by(|a, b| a.name.cmp(&b.name));
        topics
    }
}

fn initial_tail() -> Tail {
    Tail {
        next_id: FIRST_MESSAGE_ID,
        page_first: FIRST_MESSAGE_ID,
        page_bytes: 0,
        time_from: time_index::NOT_STARTED,
        time_high: 0,
        time_high_known: true,
    }
}

/// Whether any message of `topic` has stored properties.
fn any_properties(db: &Db<'_>, topic: u64) -> Result<bool> {
    let mut options = rocksdb::ReadOptions::default();
    options.set_iterate_upper_bound(topic_upper_bound(topic));
    let mut iter = db.db.raw_iterator_cf_opt(db.cf(CF_PROPERTIES)?, options);
    iter.seek(topic_prefix(topic));
    let found = iter.valid();
    iter.status()
        .map_err(|e| db_error("looking for message properties", e))?;
    Ok(found)
}

/// The newest entry of `topic` in column family `cf` (keyed by message ids): its id and value.
fn last_id(db: &Db<'_>, cf: &str, topic: u64) -> Result<Option<(u64, Vec<u8>)>> {
    let mut iter = db.db.raw_iterator_cf(db.cf(cf)?);
    iter.seek_for_prev(message_key(topic, u64::MAX));
    let found = match (iter.key(), iter.value()) {
        (Some(key), Some(value)) => message_id_from_key(topic, key).map(|id| (id, value.to_vec())),
        _ => None,
    };
    iter.status()
        .map_err(|e| db_error("recovering a topic tail", e))?;
    Ok(found)
}

/// Rebuilds a topic's tail from durable state: the open page starts after the last closed page
/// (or at the id floor: retention may have deleted every message); its bytes are counted from
/// the topic's [`PageMark`] when it belongs to that page, else from the page's start; the next
/// id is one past the newest message counted, but never below where counting started.
///
/// Only the open page's messages after the mark are read, forward and within the topic's own
/// key range: less than [`PageMark::INTERVAL`] bytes (a write that takes the page past another
/// interval, such as any message of that size, stores a new mark), however big the messages.
/// No seek here lands on another topic's message: a backward seek from a topic's end would,
/// and in a database of many small topics next to one 64 MiB message, every topic then read
/// (and decompressed) that message's block at every open.
fn recover_tail(db: &Db<'_>, topic: u64) -> Result<Tail> {
    let floor = match db
        .db
        .get_pinned_cf(db.cf(CF_META)?, topic_floor_key(topic))
        .map_err(|e| db_error("reading a topic id floor", e))?
    {
        Some(bytes) => decode_u64("topic id floor", &bytes)?,
        None => FIRST_MESSAGE_ID,
    };
    let page_first = match last_id(db, CF_PAGES, topic)? {
        Some((_, record)) => floor.max(PageRecord::decode(&record)?.last_id + 1),
        None => floor,
    };
    let (counted_to, mut page_bytes) = match page_mark(db, topic)? {
        Some(mark) if mark.page_first == page_first && mark.next_id >= page_first => {
            (mark.next_id, mark.bytes)
        }
        _ => (page_first, 0),
    };
    let mut next_id = counted_to;
    // The writer counts payload bytes plus encoded property bytes: the stored value lengths.
    for cf in [CF_MESSAGES, CF_PROPERTIES] {
        let mut options = rocksdb::ReadOptions::default();
        options.set_iterate_upper_bound(topic_upper_bound(topic));
        // A one-off scan at open: leave the block cache to what consumers read.
        options.fill_cache(false);
        let mut iter = db.db.raw_iterator_cf_opt(db.cf(cf)?, options);
        iter.seek(message_key(topic, counted_to));
        while let (Some(key), Some(value)) = (iter.key(), iter.value()) {
            if cf == CF_MESSAGES {
                if let Some(id) = message_id_from_key(topic, key) {
                    next_id = next_id.max(id.saturating_add(1));
                }
            }
            page_bytes += value.len() as u64;
            iter.next();
        }
        iter.status()
            .map_err(|e| db_error("recovering a topic tail", e))?;
    }
    Ok(Tail {
        next_id,
        page_first,
        page_bytes,
        time_from: recover_time_index_start(db, topic)?,
        time_high: 0,
        time_high_known: false,
    })
}

/// A time index record of `topic` (the start or a mark), `u64::MAX` if it does not decode
/// (logged): a damaged record makes searches longer, never wrong.
fn read_time_record(db: &Db<'_>, topic: u64, key: &[u8], what: &str) -> Result<Option<u64>> {
    let stored = db
        .db
        .get_pinned_cf(db.cf(CF_META)?, key)
        .map_err(|e| db_error("reading the time index", e))?;
    Ok(stored.map(|bytes| match decode_u64(what, &bytes) {
        Ok(value) => value,
        Err(e) => {
            tracing::warn!(topic, error = %e, "rocksmq: a time index record does not decode; \
                read as the largest possible value");
            u64::MAX
        }
    }))
}

/// The first id the time index covers; a topic without the start record has no index yet
/// ([`time_index::NOT_STARTED`]).
fn recover_time_index_start(db: &Db<'_>, topic: u64) -> Result<u64> {
    Ok(
        read_time_record(db, topic, &time_from_key(topic), "time index start")?
            .unwrap_or(time_index::NOT_STARTED),
    )
}

/// The high-water mark a topic's appends continue from after an open (see
/// [`crate::time_index`]): the mark of its last complete block, raised by the timestamps of
/// the indexed messages of its open block, read back and decoded (a payload without one
/// counts as the largest possible timestamp). At most `BLOCK - 1` messages, read once per
/// topic, by its first append after the open.
pub(crate) fn open_block_high(db: &Db<'_>, topic: &TopicState, tail: &Tail) -> Result<u64> {
    if tail.time_from == time_index::NOT_STARTED || tail.next_id <= tail.time_from {
        return Ok(0);
    }
    let open = time_index::block_start(tail.next_id);
    let previous = open.saturating_sub(time_index::BLOCK);
    let mut high = if time_index::block_start(tail.time_from) < open {
        match read_time_record(
            db,
            topic.id,
            &time_mark_key(topic.id, previous),
            "time index mark",
        )? {
            Some(mark) => mark,
            // No mark: all of the block's messages were unstamped (a mark of the largest value
            // is not written), or retention deleted the whole block with its mark. Searches
            // never reach below the oldest message, so deleted history raises nothing.
            None if holds_messages(db, topic.id, previous..open)? => u64::MAX,
            None => 0,
        }
    } else {
        0
    };
    let from = open.max(tail.time_from);
    if from >= tail.next_id || high == u64::MAX {
        return Ok(high);
    }
    let mut options = rocksdb::ReadOptions::default();
    options.set_iterate_upper_bound(message_key(topic.id, tail.next_id));
    let mut iter = db.db.raw_iterator_cf_opt(db.cf(CF_MESSAGES)?, options);
    iter.seek(message_key(topic.id, from));
    while let Some(payload) = iter.value() {
        high = high.max(msgstream::mq::message_timestamp(payload).unwrap_or(u64::MAX));
        iter.next();
    }
    iter.status()
        .map_err(|e| db_error("reading a topic's open index block", e))?;
    Ok(high)
}

/// Whether `topic` holds any message with an id in `ids`.
fn holds_messages(db: &Db<'_>, topic: u64, ids: std::ops::Range<u64>) -> Result<bool> {
    let mut options = rocksdb::ReadOptions::default();
    options.set_iterate_upper_bound(message_key(topic, ids.end));
    let mut iter = db.db.raw_iterator_cf_opt(db.cf(CF_MESSAGES)?, options);
    iter.seek(message_key(topic, ids.start));
    let found = iter.valid();
    iter.status()
        .map_err(|e| db_error("looking for a topic's messages", e))?;
    Ok(found)
}

/// The topic's [`PageMark`], if it has one. The mark only saves reading, so one that does not
/// decode (a damaged or foreign record) is logged and ignored: the open page is then counted
/// from its start, as before marks existed.
fn page_mark(db: &Db<'_>, topic: u64) -> Result<Option<PageMark>> {
    let stored = db
        .db
        .get_pinned_cf(db.cf(CF_META)?, page_mark_key(topic))
        .map_err(|e| db_error("reading a page mark", e))?;
    Ok(stored.and_then(|bytes| match PageMark::decode(&bytes) {
        Ok(mark) => Some(mark),
        Err(e) => {
            tracing::warn!(topic, error = %e, "rocksmq: ignoring a damaged page mark");
            None
        }
    }))
}

#[cfg(test)]
#[path = "topics_tests.rs"]
mod tests;
