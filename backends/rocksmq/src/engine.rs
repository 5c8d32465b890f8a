//! The queue: topics, produce, consumer groups, readers, retention and close, over one database.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard, Weak};
use std::thread::JoinHandle;

use msgstream::mq::{InitialPosition, ProducerMessage};
use msgstream::{Error, Result};

use crate::codec::GroupRecord;
use crate::group::{self, validate_group, GroupInfo};
use crate::keys::{
    topic_name_key, topic_prefix, topic_tail_key, topic_upper_bound, CF_GROUPS, CF_MESSAGES,
    CF_META, CF_PAGES, CF_PROPERTIES,
};
use crate::read::Cursor;
use crate::retention::{self, Policy, RetentionReport};
use crate::store::Store;
use crate::topics::{TopicState, Topics, FIRST_MESSAGE_ID};
use crate::writer::{now_ms, Writer};
use crate::{RocksmqOptions, Subscription, TopicReader};

pub(crate) struct Inner {
    pub store: Store,
    pub topics: Topics,
    pub writer: Writer,
    /// Serialises read-modify-write of group records (create, ack, seek, destroy).
    groups: Mutex<()>,
    policy: Policy,
    epochs: AtomicU64,
    retention_stop: Mutex<Option<mpsc::Sender<()>>>,
    retention_thread: Mutex<Option<JoinHandle<()>>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// An embedded, durable, multi-topic message queue in one RocksDB database.
///
/// Cheap to clone (a shared handle). Every operation after [`Rocksmq::close`] returns
/// `Error::Closed`; dropping the last handle closes it too.
#[derive(Clone)]
pub struct Rocksmq {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Rocksmq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rocksmq").finish_non_exhaustive()
    }
}

impl Rocksmq {
    /// Opens (or creates) the queue at `options.path`, recovering every topic's next id and every
    /// group's position, and starts the scheduled retention pass if configured.
    ///
    /// A database held by another process is an `Error::Backend` saying it is locked.
    pub fn open(options: RocksmqOptions) -> Result<Rocksmq> {
        let store = Store::open(&options.path, options.sync)?;
        let topics = store.with(Topics::load)?;
        let inner = Arc::new(Inner {
            store,
            topics,
            writer: Writer::new(options.page_size_bytes, options.sync.syncs()),
            groups: Mutex::new(()),
            policy: Policy {
                retention: options.retention,
                size_budget: options.retention_size_bytes,
                ignore_idle: options.ignore_groups_idle_for,
            },
            epochs: AtomicU64::new(1),
            retention_stop: Mutex::new(None),
            retention_thread: Mutex::new(None),
        });
        if let Some(interval) = options.retention_interval {
            let (stop, stopped) = mpsc::channel::<()>();
            let weak: Weak<Inner> = Arc::downgrade(&inner);
            let thread = std::thread::Builder::new()
                .name("rocksmq-retention".into())
                .spawn(move || {
                    while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(interval)
                    {
                        let Some(inner) = weak.upgrade() else { return };
                        if let Err(e) = (Rocksmq { inner }).run_retention() {
                            tracing::warn!(error = %e, "rocksmq: retention pass failed");
                        }
                    }
                })
                .map_err(|e| {
                    Error::backend("rocksmq", format!("starting the retention thread: {e}"))
                })?;
            *lock(&inner.retention_stop) = Some(stop);
            *lock(&inner.retention_thread) = Some(thread);
        }
        Ok(Rocksmq { inner })
    }

    /// Creates `topic` if it does not exist (idempotent).
    pub fn create_topic(&self, topic: &str) -> Result<()> {
        self.topic_or_create(topic).map(|_| ())
    }

    pub(crate) fn topic_or_create(&self, topic: &str) -> Result<Arc<TopicState>> {
        self.inner
            .store
            .with(|db| self.inner.topics.get_or_create(db, topic))
    }

    pub(crate) fn topic(&self, topic: &str) -> Result<Arc<TopicState>> {
        self.check_open()?;
        self.inner.topics.require(topic)
    }

    fn check_open(&self) -> Result<()> {
        self.inner.store.with(|_| Ok(()))
    }

    /// Whether `topic` exists.
    pub fn topic_exists(&self, topic: &str) -> Result<bool> {
        self.check_open()?;
        crate::topics::validate_topic(topic)?;
        Ok(self.inner.topics.get(topic).is_some())
    }

    /// Every topic, sorted by name.
    pub fn topics(&self) -> Result<Vec<String>> {
        self.check_open()?;
        Ok(self
            .inner
            .topics
            .all()
            .iter()
            .map(|t| t.name.clone())
            .collect())
    }

    /// Deletes `topic` with its messages, properties, pages and consumer groups. Producers,
    /// consumers and readers still holding it fail from then on (`InvalidArgument`).
    pub fn destroy_topic(&self, topic: &str) -> Result<()> {
        let state = self.topic(topic)?;
        let _writes = self.inner.writer.exclusive();
        let _groups = lock(&self.inner.groups);
        let id = state.id;
        let (from, to) = (topic_prefix(id), topic_upper_bound(id));
        self.inner.store.with(|db| {
            let meta = db.cf(CF_META)?;
            let mut batch = rocksdb::WriteBatch::default();
            for cf in [CF_MESSAGES, CF_PROPERTIES, CF_PAGES, CF_GROUPS] {
                batch.delete_range_cf(db.cf(cf)?, from, to);
            }
            batch.delete_cf(meta, topic_name_key(topic));
            batch.delete_cf(meta, topic_tail_key(id));
            db.write(batch)?;
            for cf in [CF_MESSAGES, CF_PROPERTIES] {
                db.db.compact_range_cf(db.cf(cf)?, Some(from), Some(to));
            }
            Ok(())
        })?;
        self.inner.topics.remove(topic);
        state.destroyed.store(true, Ordering::Release);
        state.wake();
        Ok(())
    }

    /// Appends `messages` to an existing `topic` in one batch (group-committed with concurrent
    /// callers); returns their consecutive ids once durable as configured.
    pub async fn produce(&self, topic: &str, messages: Vec<ProducerMessage>) -> Result<Range<u64>> {
        let state = self.topic(topic)?;
        self.produce_to(state, messages).await
    }

    pub(crate) async fn produce_to(
        &self,
        topic: Arc<TopicState>,
        messages: Vec<ProducerMessage>,
    ) -> Result<Range<u64>> {
        self.inner
            .writer
            .append(&self.inner.store, topic, messages)
            .await
    }

    /// The newest id of `topic`, `None` if nothing was ever produced to it.
    pub fn latest_message_id(&self, topic: &str) -> Result<Option<u64>> {
        let next = self.topic(topic)?.tail().next_id;
        Ok((next > FIRST_MESSAGE_ID).then(|| next - 1))
    }

    /// Creates consumer group `group` on `topic`, starting at the oldest message or after the
    /// newest. `InvalidArgument` if it already exists.
    pub fn create_consumer_group(
        &self,
        topic: &str,
        group: &str,
        start: InitialPosition,
    ) -> Result<()> {
        if self.create_group_if_missing(topic, group, start)? {
            Ok(())
        } else {
            Err(Error::InvalidArgument(format!(
                "consumer group {group:?} of topic {topic:?} already exists"
            )))
        }
    }

    /// Creates `group` at `start` unless it exists (then its position is kept). Returns whether
    /// it was created.
    pub(crate) fn create_group_if_missing(
        &self,
        topic: &str,
        group: &str,
        start: InitialPosition,
    ) -> Result<bool> {
        let state = self.topic(topic)?;
        validate_group(group)?;
        let _groups = lock(&self.inner.groups);
        self.inner.store.with(|db| {
            if group::get(db, state.id, group)?.is_some() {
                return Ok(false);
            }
            let committed = match start {
                InitialPosition::Earliest => 0,
                InitialPosition::Latest => state.tail().next_id,
            };
            let record = GroupRecord {
                committed,
                active_ms: now_ms(),
            };
            group::put(db, state.id, group, record)?;
            Ok(true)
        })
    }

    /// Whether consumer group `group` of `topic` exists.
    pub fn consumer_group_exists(&self, topic: &str, group: &str) -> Result<bool> {
        let state = self.topic(topic)?;
        validate_group(group)?;
        self.inner
            .store
            .with(|db| Ok(group::get(db, state.id, group)?.is_some()))
    }

    /// Deletes consumer group `group` of `topic`; `InvalidArgument` if it does not exist.
    pub fn destroy_consumer_group(&self, topic: &str, group: &str) -> Result<()> {
        let state = self.topic(topic)?;
        validate_group(group)?;
        let _groups = lock(&self.inner.groups);
        self.inner.store.with(|db| {
            group::require(db, state.id, topic, group)?;
            group::delete(db, state.id, group)
        })
    }

    /// The consumer groups of `topic` with their positions and lag, sorted by name.
    pub fn consumer_groups(&self, topic: &str) -> Result<Vec<GroupInfo>> {
        let state = self.topic(topic)?;
        let next = state.tail().next_id;
        let groups = self.inner.store.with(|db| group::list(db, state.id))?;
        Ok(groups
            .into_iter()
            .map(|(name, record)| GroupInfo {
                name,
                committed: record.committed,
                lag: next.saturating_sub(record.committed.max(FIRST_MESSAGE_ID)),
            })
            .collect())
    }

    /// The committed position (first unacknowledged id) of `group`.
    pub fn committed_position(&self, topic: &str, group: &str) -> Result<u64> {
        let state = self.topic(topic)?;
        validate_group(group)?;
        self.inner
            .store
            .with(|db| Ok(group::require(db, state.id, topic, group)?.committed))
    }

    /// Acknowledges `id` and everything before it for `group`: its committed position moves to
    /// `id + 1` unless it is already further.
    pub fn ack(&self, topic: &str, group: &str, id: u64) -> Result<()> {
        let state = self.topic(topic)?;
        validate_group(group)?;
        let next = state.tail().next_id;
        if id < FIRST_MESSAGE_ID || id >= next {
            return Err(Error::InvalidArgument(format!(
                "cannot ack message {id} of topic {topic:?}: ids so far are {FIRST_MESSAGE_ID}..{next}"
            )));
        }
        let _groups = lock(&self.inner.groups);
        self.inner.store.with(|db| {
            let record = group::require(db, state.id, topic, group)?;
            let committed = record.committed.max(id + 1);
            group::put(
                db,
                state.id,
                group,
                GroupRecord {
                    committed,
                    active_ms: now_ms(),
                },
            )
        })
    }

    /// Moves `group` so that the next message delivered is `id` (inclusive); backwards is allowed.
    /// The move is durable: it is the group's committed position from now on.
    pub fn seek(&self, topic: &str, group: &str, id: u64) -> Result<()> {
        let state = self.topic(topic)?;
        validate_group(group)?;
        let next = state.tail().next_id;
        if id > next {
            return Err(Error::InvalidArgument(format!(
                "cannot seek topic {topic:?} to {id}: the next id is {next}"
            )));
        }
        let _groups = lock(&self.inner.groups);
        self.inner.store.with(|db| {
            group::require(db, state.id, topic, group)?;
            group::put(
                db,
                state.id,
                group,
                GroupRecord {
                    committed: id,
                    active_ms: now_ms(),
                },
            )
        })
    }

    /// Moves `group` past every message produced so far; returns its new position.
    pub fn seek_to_latest(&self, topic: &str, group: &str) -> Result<u64> {
        let next = self.topic(topic)?.tail().next_id;
        self.seek(topic, group, next)?;
        Ok(next)
    }

    /// A cursor of existing consumer group `group`, starting at its committed position.
    pub fn subscribe(&self, topic: &str, group: &str) -> Result<Subscription> {
        let committed = self.committed_position(topic, group)?;
        let state = self.topic(topic)?;
        Ok(Subscription::new(
            self.clone(),
            group.to_owned(),
            Cursor::new(state, committed),
        ))
    }

    /// A non-durable reader of `topic` whose first message is the first with id ≥ `from`.
    pub fn reader(&self, topic: &str, from: u64) -> Result<TopicReader> {
        let state = self.topic(topic)?;
        Ok(TopicReader::new(self.clone(), Cursor::new(state, from)))
    }

    /// Runs one retention pass over every topic now (the scheduled pass calls this too).
    pub fn run_retention(&self) -> Result<RetentionReport> {
        let mut report = RetentionReport::default();
        let now = now_ms();
        for topic in self.inner.topics.all() {
            let open_bytes = topic.tail().page_bytes;
            let removed = self.inner.store.with(|db| {
                let pages = retention::pages(db, topic.id)?;
                if pages.is_empty() {
                    return Ok(RetentionReport::default());
                }
                let idle_ms = self
                    .inner
                    .policy
                    .ignore_idle
                    .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
                let min_committed = group::list(db, topic.id)?
                    .into_iter()
                    .filter(|(_, g)| {
                        idle_ms.is_none_or(|idle| g.active_ms.saturating_add(idle) > now)
                    })
                    .map(|(_, g)| g.committed)
                    .min();
                let count =
                    retention::plan(&pages, open_bytes, min_committed, now, &self.inner.policy);
                retention::delete_pages(db, topic.id, &pages[..count])
            })?;
            report.pages += removed.pages;
            report.messages += removed.messages;
            report.bytes += removed.bytes;
        }
        Ok(report)
    }

    /// A fresh delivery epoch, unique in this process (see `msgstream::mq::Delivery`).
    pub(crate) fn next_epoch(&self) -> u64 {
        self.inner.epochs.fetch_add(1, Ordering::Relaxed)
    }

    /// Whether [`Rocksmq::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.inner.store.is_closed()
    }

    /// Stops retention, waits for operations in flight, syncs the WAL and releases the database
    /// (its lock too); waiting consumers and readers wake up and see the closed state.
    pub fn close(&self) {
        lock(&self.inner.retention_stop).take();
        if let Some(thread) = lock(&self.inner.retention_thread).take() {
            if thread.join().is_err() {
                tracing::warn!("rocksmq: the retention thread panicked");
            }
        }
        {
            let _writes = self.inner.writer.exclusive();
            self.inner.store.close();
        }
        for topic in self.inner.topics.all() {
            topic.wake();
        }
    }
}
