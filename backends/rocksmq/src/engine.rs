//! The queue: topics, produce, consumer groups, readers, retention and close, over one database.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, Weak};
use std::thread::JoinHandle;

use tokio::sync::watch;

use msgstream::mq::{Leases, ProducerMessage};
use msgstream::sync::lock;
use msgstream::{Error, Result};

use crate::ack_grouping::{AckFlusher, AckWrite};
use crate::acks::{write_staged, StagedAcks};
use crate::keys::{
    page_mark_key, time_from_key, time_mark_key, topic_floor_key, topic_name_key, topic_prefix,
    topic_upper_bound, CF_GROUPS, CF_MESSAGES, CF_META, CF_PAGES, CF_PROPERTIES,
};
use crate::ledger::{Ledger, LedgerThread};
use crate::read::Cursor;
use crate::retention::{Policy, RetentionProgress};
use crate::store::Store;
use crate::topics::{TopicState, Topics, FIRST_MESSAGE_ID};
use crate::writer::{
    batch_bytes_of, Batch, Inline, Reply, Role, WriteStats, Writer, INLINE_WRITE_MAX_BYTES,
};
use crate::{Recovery, RocksmqOptions, TopicReader};

pub(crate) struct Inner {
    pub store: Store,
    pub topics: Topics,
    pub writer: Writer,
    /// Serialises read-modify-write of group records (create, ack, seek, destroy), and holds
    /// the acks staged for them (see `acks`).
    pub groups: Mutex<StagedAcks>,
    pub policy: Policy,
    epochs: AtomicU64,
    retention_stop: Mutex<Option<mpsc::Sender<()>>>,
    retention_thread: Mutex<Option<JoinHandle<()>>>,
    pub retention_progress: watch::Sender<RetentionProgress>,
    /// What recovery found missing at open (see [`Rocksmq::lost_at_recovery`]).
    pub lost: Vec<LostMessages>,
    /// The promised-ids ledger, and the thread that keeps it current.
    ledger: Ledger,
    ledger_thread: Mutex<Option<LedgerThread>>,
    /// (topic, group) pairs with a live mq consumer. The database is locked to one process,
    /// so subscriptions are exclusive everywhere.
    pub leases: Leases,
    /// When the mq consumers' acks are written.
    pub ack_write: AckWrite,
    /// The background writer of grouped acks (idle under [`AckWrite::Immediate`]).
    pub ack_flusher: AckFlusher,
}

impl Drop for Inner {
    /// The last handle went without [`Rocksmq::close`] (which a drop also stands for): write
    /// the acks still staged, as `close` does, so that dropping a queue loses none.
    fn drop(&mut self) {
        let staged = self
            .groups
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Err(error) = write_staged(&self.store, staged, None) {
            tracing::warn!(%error, "rocksmq: writing the staged acks of a dropped queue failed");
        }
        self.ledger.record(&self.topics);
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
    /// A database held by another process is an `Error::Backend` saying it is locked; an
    /// [`AckWrite::Grouped`] interval above [`AckWrite::MAX_GROUPING`] is `InvalidArgument`.
    pub fn open(options: RocksmqOptions) -> Result<Rocksmq> {
        options.validate()?;
        let store = Store::open(&options.path, options.sync)?;
        let topics = store.with(Topics::load)?;
        let ledger = Ledger::new(&options.path);
        let lost = store.with(|db| lost_at_open(db, &topics, &ledger))?;
        if !lost.is_empty() {
            crate::ledger::report(&options.path, &lost);
            if options.recovery == Recovery::Strict {
                store.close();
                return Err(crate::ledger::refusal(&options.path, &lost));
            }
        }
        // The recovered state is the promise from now on: a loss is reported once.
        ledger.record(&topics);
        let inner = Arc::new(Inner {
            store,
            topics,
            writer: Writer::new(options.page_size_bytes, options.sync.syncs()),
            groups: Mutex::default(),
            policy: Policy {
                retention: options.retention,
                size_budget: options.retention_size_bytes,
                ignore_idle: options.ignore_groups_idle_for,
            },
            epochs: AtomicU64::new(1),
            retention_stop: Mutex::new(None),
            retention_thread: Mutex::new(None),
            retention_progress: watch::Sender::new(RetentionProgress::default()),
            leases: Leases::default(),
            lost,
            ledger,
            ledger_thread: Mutex::new(None),
            ack_write: options.ack_write,
            ack_flusher: AckFlusher::idle(),
        });
        let weak: Weak<Inner> = Arc::downgrade(&inner);
        let thread = LedgerThread::start(move || match weak.upgrade() {
            Some(inner) => {
                inner.ledger.record(&inner.topics);
                true
            }
            None => false,
        })?;
        *lock(&inner.ledger_thread) = Some(thread);
        if let AckWrite::Grouped(within) = options.ack_write {
            AckFlusher::start(&inner, within)?;
        }
        if let Some(interval) = options.retention_interval {
            let (stop, stopped) = mpsc::channel::<()>();
            let weak: Weak<Inner> = Arc::downgrade(&inner);
            let thread = std::thread::Builder::new()
                .name("rocksmq-retention".into())
                .spawn(move || {
                    while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(interval)
                    {
                        let Some(inner) = weak.upgrade() else { return };
                        let outcome = (Rocksmq {
                            inner: inner.clone(),
                        })
                        .run_retention();
                        if let Err(e) = &outcome {
                            tracing::warn!(error = %e, "rocksmq: retention pass failed");
                        }
                        inner
                            .retention_progress
                            .send_modify(|progress| progress.record(&outcome));
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

    pub(crate) fn check_open(&self) -> Result<()> {
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
    ///
    /// The deletion is one atomic write; the disk space is then reclaimed by compacting the
    /// topic's key range before this returns, which takes about as long as reading the topic's
    /// files. No lock is held meanwhile: producers, consumers and acks of other topics go on.
    pub fn destroy_topic(&self, topic: &str) -> Result<()> {
        let (from, to) = {
            let _writes = self.inner.writer.exclusive();
            let mut groups = lock(&self.inner.groups);
            // Looked up under the locks: a concurrent destroy of the same name (and a create
            // after it) is then either wholly before this one or wholly after.
            let state = self.topic(topic)?;
            let id = state.id;
            let (from, to) = (topic_prefix(id), topic_upper_bound(id));
            self.inner.store.with(|db| {
                let meta = db.cf(CF_META)?;
                let mut batch = rocksdb::WriteBatch::default();
                for cf in [CF_MESSAGES, CF_PROPERTIES, CF_PAGES, CF_GROUPS] {
                    batch.delete_range_cf(db.cf(cf)?, from, to);
                }
                batch.delete_cf(meta, topic_name_key(topic));
                batch.delete_cf(meta, topic_floor_key(id));
                batch.delete_cf(meta, page_mark_key(id));
                batch.delete_cf(meta, time_from_key(id));
                batch.delete_range_cf(meta, time_mark_key(id, 0), time_mark_key(id, u64::MAX));
                db.write(batch)
            })?;
            groups.remove_topic(id);
            self.inner.topics.remove(topic);
            state.destroyed.store(true, Ordering::Release);
            state.wake();
            (from, to)
        };
        // Before anything else can fail: a ledger still naming the topic would report its ids
        // as lost at the next open.
        self.inner.ledger.record(&self.inner.topics);
        // Topic ids are never reused, so nothing writes into this range any more. The topic is
        // gone whatever happens here: a queue closed meanwhile leaves the space to RocksDB's
        // own compactions.
        let reclaimed = self.inner.store.with(|db| {
            for cf in [CF_MESSAGES, CF_PROPERTIES] {
                db.db.compact_range_cf(db.cf(cf)?, Some(from), Some(to));
            }
            Ok(())
        });
        if let Err(error) = reclaimed {
            tracing::warn!(topic, %error, "rocksmq: destroyed topic's space not compacted now");
        }
        Ok(())
    }

    /// Appends `messages` to an existing `topic` in one batch (group-committed with concurrent
    /// callers); returns their consecutive ids once durable as configured.
    pub async fn produce(&self, topic: &str, messages: Vec<ProducerMessage>) -> Result<Range<u64>> {
        let state = self.topic(topic)?;
        self.start_produce(&state, Batch::Many(messages))?
            .ids()
            .await
    }

    /// Starts appending `messages` to `topic`. An uncontended buffered append is written (or
    /// failed) by the time this returns: [`Produced::Written`], with no future, no channel and
    /// no thread hop on the way. Otherwise the caller awaits the answer.
    #[inline]
    pub(crate) fn start_produce(
        &self,
        topic: &Arc<TopicState>,
        messages: Batch,
    ) -> Result<Produced> {
        let own = match self.inner.writer.enqueue(topic, messages)? {
            Role::Done(ids) => return Ok(Produced::Written(ids)),
            Role::Follow(answer) => return Ok(Produced::Waiting(answer)),
            Role::Lead(own) => own,
        };
        if !self.inner.writer.syncs() && batch_bytes_of(&own) <= INLINE_WRITE_MAX_BYTES {
            // A small buffered write is a memtable insert and a write(2) into the page cache:
            // cheaper than the hop to a blocking thread, so it is tried on the caller's thread,
            // but only if RocksDB takes it without a stall. Anything that may block (a stalled
            // write, a synced one, a big one, the groups queued behind this leader meanwhile)
            // is done on a blocking thread, never on an async worker (outside a runtime, where
            // there is none, on this thread: see `lead_on_a_blocking_thread`).
            match self
                .inner
                .writer
                .lead_inline(&self.inner.store, topic, &own)
            {
                Inline::Written(written) => {
                    if !self.inner.writer.step_down() {
                        self.lead_on_a_blocking_thread(None);
                    }
                    return written.map(Produced::Written);
                }
                Inline::Stalled => {}
            }
        }
        // The leader's thread may go on committing later groups; this caller is answered as
        // soon as its own group is written.
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.lead_on_a_blocking_thread(Some((topic.clone(), own, reply)));
        Ok(Produced::Waiting(answer))
    }

    /// Runs the leader's commits on a blocking thread: `own`'s batch first, if given, then
    /// whatever is queued. Outside a tokio runtime (no async worker to spare), right here.
    fn lead_on_a_blocking_thread(&self, own: Option<(Arc<TopicState>, Batch, Reply)>) {
        let lead = BlockingLead {
            inner: self.inner.clone(),
            job: Some(own),
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn_blocking(move || lead.run())),
            Err(_) => lead.run(),
        }
    }

    /// The newest id of `topic`, `None` if nothing was ever produced to it.
    pub fn latest_message_id(&self, topic: &str) -> Result<Option<u64>> {
        let next = self.topic(topic)?.tail().next_id;
        Ok((next > FIRST_MESSAGE_ID).then(|| next - 1))
    }

    /// Message ids that recovery found missing when this database was opened: topics
    /// recovered below the ids the promised-ids ledger says they had given out (or gone), and
    /// consumer groups positioned beyond their topic's recovered end; only a write-ahead log
    /// that lost records leaves either behind. Empty after a clean or crash-only recovery. Each
    /// case was also logged at error level, naming the topic and the count; under
    /// [`Recovery::Strict`] the open fails instead.
    pub fn lost_at_recovery(&self) -> &[LostMessages] {
        &self.inner.lost
    }

    /// Rewrites the promised-ids ledger now (the queue does it every
    /// [`crate::LEDGER_INTERVAL`] while ids move, after a destroy and at close): after this, a
    /// loss of any id given out so far is reported at the next open.
    pub fn record_promised_ids(&self) -> Result<()> {
        self.check_open()?;
        self.inner.ledger.record(&self.inner.topics);
        Ok(())
    }

    /// The oldest id `topic` still holds (`None` when it holds no message): what retention has
    /// not deleted yet. Read from the store at each call, so it follows retention at run time.
    pub fn oldest_message_id(&self, topic: &str) -> Result<Option<u64>> {
        let state = self.topic(topic)?;
        self.inner.store.with(|db| {
            let mut options = rocksdb::ReadOptions::default();
            options.set_iterate_upper_bound(topic_upper_bound(state.id));
            let mut iter = db.db.raw_iterator_cf_opt(db.cf(CF_MESSAGES)?, options);
            iter.seek(topic_prefix(state.id));
            let oldest = iter
                .key()
                .and_then(|key| crate::keys::message_id_from_key(state.id, key));
            iter.status()
                .map_err(|e| crate::store::db_error("finding the oldest message", e))?;
            Ok(oldest)
        })
    }

    /// An estimate of the bytes `topic` takes on disk: RocksDB's approximate size of its key
    /// ranges of messages and properties in table files (compressed, as stored). Messages
    /// still only in the memtable (up to a write buffer, 64 MiB per column family, the most
    /// recent) count once flushed; pages deleted by retention stop counting once compacted.
    pub fn topic_size_bytes(&self, topic: &str) -> Result<u64> {
        let state = self.topic(topic)?;
        self.inner.store.with(|db| {
            let (from, to) = (topic_prefix(state.id), topic_upper_bound(state.id));
            let mut bytes = 0u64;
            for cf in [CF_MESSAGES, CF_PROPERTIES] {
                let range = rocksdb::Range::new(&from, &to);
                let sizes = db.db.get_approximate_sizes_cf(db.cf(cf)?, &[range]);
                bytes = bytes.saturating_add(sizes.iter().sum::<u64>());
            }
            Ok(bytes)
        })
    }

    /// A non-durable reader of `topic` whose first message is the first with id ≥ `from`.
    pub fn reader(&self, topic: &str, from: u64) -> Result<TopicReader> {
        let state = self.topic(topic)?;
        Ok(TopicReader::new(self.clone(), Cursor::new(state, from)))
    }

    /// Counters of the write path (how well group commit batches concurrent producers).
    pub fn write_stats(&self) -> WriteStats {
        self.inner.writer.stats()
    }

    /// A fresh delivery epoch, unique in this process (see `msgstream::mq::Delivery`).
    pub(crate) fn next_epoch(&self) -> u64 {
        self.inner.epochs.fetch_add(1, Ordering::Relaxed)
    }

    /// Whether [`Rocksmq::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.inner.store.is_closed()
    }

    /// Stops retention and the grouped-ack thread, writes the staged acks, waits for
    /// operations in flight, syncs the WAL and releases the database (its lock too); waiting
    /// consumers and readers wake up and see the closed state.
    pub fn close(&self) {
        self.inner.ack_flusher.stop();
        lock(&self.inner.retention_stop).take();
        if let Some(thread) = lock(&self.inner.retention_thread).take() {
            if thread.join().is_err() {
                tracing::warn!("rocksmq: the retention thread panicked");
            }
        }
        if let Err(error) = self.close_acks() {
            tracing::warn!(%error, "rocksmq: writing the staged acks at close failed");
        }
        {
            let mut writes = self.inner.writer.exclusive();
            writes.release_database();
            self.inner.store.close();
        }
        if let Some(thread) = lock(&self.inner.ledger_thread).take() {
            thread.stop();
        }
        self.inner.ledger.record(&self.inner.topics);
        for topic in self.inner.topics.all() {
            topic.wake();
        }
    }
}

/// How far [`Rocksmq::start_produce`] got.
pub(crate) enum Produced {
    /// Written: these are the ids.
    Written(Range<u64>),
    /// Queued behind another write, or being written on a blocking thread: the ids come here.
    Waiting(tokio::sync::oneshot::Receiver<Result<Range<u64>>>),
}

impl Produced {
    /// The ids, once written.
    pub(crate) async fn ids(self) -> Result<Range<u64>> {
        match self {
            Produced::Written(ids) => Ok(ids),
            Produced::Waiting(answer) => {
                answer.await.map_err(|_| Error::Closed("rocksmq writer"))?
            }
        }
    }
}

/// Message ids that recovery found missing from a topic: the write-ahead log lost records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LostMessages {
    /// The topic.
    pub topic: String,
    /// The consumer group whose committed position shows the loss, or `None` when the
    /// promised-ids ledger shows it (see [`crate::LEDGER_FILE`]).
    pub group: Option<String>,
    /// One past the newest id known to have existed: the group's committed position, or the
    /// ledger's next id of the topic.
    pub expected_next: u64,
    /// The topic's next id after recovery: ids `recovered_next..expected_next` are gone.
    pub recovered_next: u64,
    /// Whether the topic itself is gone (its creation was among the lost records).
    pub topic_lost: bool,
}

impl LostMessages {
    /// How many ids are gone.
    pub fn count(&self) -> u64 {
        self.expected_next.saturating_sub(self.recovered_next)
    }
}

/// After recovery, a consumer group positioned beyond its topic's recovered end means messages
/// it had seen are gone: the WAL lost records (a damaged or removed log file).
fn lost_under_groups(db: &crate::store::Db<'_>, topics: &Topics) -> Result<Vec<LostMessages>> {
    let mut lost = Vec::new();
    for topic in topics.all() {
        let next = topic.tail().next_id;
        for (group, record) in crate::group::list(db, topic.id)? {
            if record.committed > next {
                lost.push(LostMessages {
                    topic: topic.name.clone(),
                    group: Some(group),
                    expected_next: record.committed,
                    recovered_next: next,
                    topic_lost: false,
                });
            }
        }
    }
    Ok(lost)
}

/// Everything recovery lost, against the promised-ids ledger and the consumer groups' positions.
fn lost_at_open(
    db: &crate::store::Db<'_>,
    topics: &Topics,
    ledger: &Ledger,
) -> Result<Vec<LostMessages>> {
    let recovered: Vec<(u64, String, u64)> = topics
        .all()
        .iter()
        .map(|topic| (topic.id, topic.name.clone(), topic.tail().next_id))
        .collect();
    let mut lost = ledger
        .read()
        .map(|promised| crate::ledger::compare(&promised, &recovered))
        .unwrap_or_default();
    lost.extend(lost_under_groups(db, topics)?);
    Ok(lost)
}

/// A leader's commits, on their way to a blocking thread: its own batch and what is queued
/// behind it (`Some`), or only what was queued behind an inline leader (`None`).
///
/// A runtime that is shutting down drops blocking tasks it has not started. Dropped unrun,
/// this hands the leadership back (see `Writer::hand_back`): the caller's answer channel
/// closes (its send fails) and the producers queued behind it are answered with
/// [`Error::Closed`], where they would otherwise wait forever for a leader that never ran.
struct BlockingLead {
    inner: Arc<Inner>,
    job: Option<Option<(Arc<TopicState>, Batch, Reply)>>,
}

impl BlockingLead {
    fn run(mut self) {
        match self.job.take() {
            Some(Some((topic, own, reply))) => {
                self.inner
                    .writer
                    .lead_elsewhere(&self.inner.store, topic, own, reply);
            }
            Some(None) => self.inner.writer.keep_leading_elsewhere(&self.inner.store),
            None => {}
        }
    }
}

impl Drop for BlockingLead {
    fn drop(&mut self) {
        if self.job.take().is_some() {
            self.inner
                .writer
                .hand_back(|| Error::Closed("rocksmq writer (the runtime is shutting down)"));
        }
    }
}

#[cfg(test)]
#[path = "engine_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "time_search_tests.rs"]
mod time_search_tests;
