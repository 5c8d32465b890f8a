//! Appends with group commit.
//!
//! Producers enqueue their batch; the first one to find no write in progress becomes the
//! *leader*: it takes every queued batch (its own and those that arrived meanwhile, from any
//! topic), assigns ids, writes them all in **one** `WriteBatch` (one WAL write, one sync when the
//! durability asks for it), publishes the new tails and answers the others, then repeats while
//! batches keep arriving. Followers just await their answer. So concurrent producers share writes
//! instead of queueing for a lock one by one, and one producer alone pays no thread hop.
//!
//! Guarantees: ids of a topic are strictly increasing, consecutive within a batch, and assigned in
//! commit order, so a reader never sees id *n+1* before *n*. A batch is acknowledged only after
//! its write is in the WAL. The write holds the messages, their properties and the record of any
//! page they close, nothing else: the tail (next id, open page) is recovered from those keys at
//! open (see `topics`), so a single-message append costs one key, like a raw put. If the write
//! fails, no id is consumed and every caller in the group gets the error. Under a sustained
//! stream of concurrent producers the leader may write several groups before its own call
//! returns; its own batch is always in the first one.
//!
//! Synced writes (see [`Durability`](crate::Durability)) differ in two ways, because a sync
//! costs far more than a producer's round trip. The leader runs on a blocking thread and answers
//! its own caller through a channel like everyone else, so no caller waits for groups after its
//! own. And after each commit the leader *lingers*: it waits, briefly, for the producers it just
//! answered to come back with their next batch before it writes again. Without that, the
//! producers split into two halves that take turns (one half syncs while the other re-queues),
//! and each sync carries half of them; with it, one sync carries nearly all of them. The wait
//! ends as soon as they are all back, and never lasts longer than [`MAX_LINGER`] or a quarter of
//! the last commit, so a lone producer that stops costs a fraction of one sync, once.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use msgstream::mq::ProducerMessage;
use msgstream::sync::lock;
use msgstream::{Error, Result};
use tokio::sync::oneshot;

use crate::store::{Db, Store, BACKEND};
use crate::topics::{Tail, TopicState};

use append::{batch_bytes, Appender};

/// Where a producer waits for its ids.
pub(crate) type Reply = oneshot::Sender<Result<Range<u64>>>;

struct Request {
    topic: Arc<TopicState>,
    messages: Batch,
    reply: Reply,
}

#[derive(Default)]
struct Queue {
    pending: Vec<Request>,
    /// A synced leader waits on [`Writer::arrived`]: enqueue must wake it.
    lingering: bool,
}

/// [`Writer::state`]: set while a leader commits.
const LEADING: usize = 1;
/// [`Writer::state`]: one queued request (the count sits above the [`LEADING`] bit).
const QUEUED: usize = 2;

/// The longest a synced leader waits for the producers it just answered (see the module docs).
pub(crate) const MAX_LINGER: Duration = Duration::from_micros(200);

/// Buffers of the commit path, kept under the commit lock and reused, so that a commit
/// allocates nothing of its own (a single-message append is as lean as a raw put).
#[derive(Default)]
pub(crate) struct CommitScratch {
    /// The tails a commit moves: topic id, the group's first request of that topic, new tail.
    /// By position rather than by `Arc`, so that filling it costs no reference count.
    tails: Vec<(u64, usize, Tail)>,
    /// The group's answers, in the group's order.
    answers: Vec<Result<Range<u64>>>,
    /// The database, taken from the store at the first commit and kept until
    /// [`CommitScratch::release_database`].
    db: Option<Arc<rocksdb::DB>>,
}

/// The database kept in `slot`, taken from the store at the first commit; `Error::Closed`
/// once the store is closed.
fn database<'a>(slot: &'a mut Option<Arc<rocksdb::DB>>, store: &Store) -> Result<&'a rocksdb::DB> {
    if slot.is_none() {
        *slot = store.shared();
    }
    slot.as_deref().ok_or(Error::Closed("rocksmq client"))
}

impl CommitScratch {
    /// Drops the writer's handle of the database, so that closing the store closes it: call
    /// under the commit lock, before [`Store::close`]. A later commit finds the store closed.
    pub(crate) fn release_database(&mut self) {
        self.db = None;
    }
}

/// How far [`Writer::lead_inline`] got.
pub(crate) enum Inline {
    /// The batch was written (or failed for good): its answer.
    Written(Result<Range<u64>>),
    /// RocksDB would have stalled the write: nothing was written, no id was used.
    Stalled,
}

/// What a caller of [`Writer::enqueue`] does next.
pub(crate) enum Role {
    /// Nothing to write (an empty batch): these are the (empty) ids.
    Done(Range<u64>),
    /// Another caller leads: await the answer.
    Follow(oneshot::Receiver<Result<Range<u64>>>),
    /// This caller leads, with its own batch given back (never queued): pass it to
    /// [`Writer::lead_inline`] on this thread, or to [`Writer::lead_elsewhere`] on another.
    Lead(Batch),
}

/// A producer's messages: one (a `send`, no vector to allocate) or several.
pub(crate) enum Batch {
    /// A single message.
    One(ProducerMessage),
    /// A batch of messages (never empty once queued).
    Many(Vec<ProducerMessage>),
}

/// The largest batch (in `WriteBatch` bytes) a leader writes on an async worker: copying and
/// writing more is not a short call any more.
pub(crate) const INLINE_WRITE_MAX_BYTES: usize = 1 << 20;

/// The `WriteBatch` size of `batch`'s messages (see `append::batch_bytes`).
pub(crate) fn batch_bytes_of(batch: &Batch) -> usize {
    batch_bytes([batch.as_slice()])
}

impl Batch {
    fn as_slice(&self) -> &[ProducerMessage] {
        match self {
            Batch::One(message) => std::slice::from_ref(message),
            Batch::Many(messages) => messages,
        }
    }

    fn is_empty(&self) -> bool {
        self.as_slice().is_empty()
    }
}

/// Hands the leadership back if the leader unwinds (a panicking commit): queued producers are
/// answered with an error instead of waiting for a leader that is gone.
struct LeaderGuard<'a> {
    writer: &'a Writer,
    done: bool,
}

impl Drop for LeaderGuard<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.writer.hand_back(|| {
                Error::backend(
                    BACKEND,
                    "the commit of an earlier batch panicked; this batch was not written",
                )
            });
        }
    }
}

/// The single write path of message data.
pub(crate) struct Writer {
    /// Whether a leader commits ([`LEADING`]) and how many requests are queued for it (in
    /// [`QUEUED`]s), in one word, so that an uncontended append takes and gives up the
    /// leadership with one atomic each and never touches the queue's lock. The count changes
    /// only under that lock, and always equals `queue.pending.len()` there; the leadership is
    /// taken lock-free only when the word is 0 and given up lock-free only when it is exactly
    /// [`LEADING`] (nothing queued), so no request is queued behind a leader that left.
    state: AtomicUsize,
    queue: Mutex<Queue>,
    /// Signalled when a batch is queued while the leader lingers.
    arrived: Condvar,
    /// A fixed bound of the linger instead of the adaptive one (tests only set it).
    linger_bound: Option<Duration>,
    commit: Mutex<CommitScratch>,
    page_size: u64,
    syncs: bool,
    writes: AtomicU64,
    batches: AtomicU64,
    /// Tests set it to have RocksDB's refusal of a stalled `no_slowdown` write happen on
    /// demand (a real stall needs flushes held back for longer than a test should take).
    #[cfg(test)]
    pub(crate) stall_inline_writes: std::sync::atomic::AtomicBool,
}

/// Counters of the write path, to see group commit at work.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteStats {
    /// RocksDB writes of message data (one per commit group).
    pub writes: u64,
    /// Produce calls (batches) committed by those writes.
    pub batches: u64,
}

/// Wall-clock milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl Writer {
    /// A writer closing pages at `page_size` bytes; `syncs` says whether each write waits for
    /// an fsync, in which case the engine runs the leader on a blocking thread.
    pub fn new(page_size: u64, syncs: bool) -> Writer {
        Writer {
            state: AtomicUsize::new(0),
            queue: Mutex::default(),
            arrived: Condvar::new(),
            linger_bound: None,
            commit: Mutex::default(),
            page_size: page_size.max(1),
            syncs,
            writes: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            #[cfg(test)]
            stall_inline_writes: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The same writer lingering up to `bound` after each synced commit, whatever the commits
    /// cost: lets a test see the linger end on an arrival rather than on the clock.
    #[cfg(test)]
    fn with_linger_bound(mut self, bound: Duration) -> Writer {
        self.linger_bound = Some(bound);
        self
    }

    /// What has been written so far.
    pub fn stats(&self) -> WriteStats {
        WriteStats {
            writes: self.writes.load(Ordering::Relaxed),
            batches: self.batches.load(Ordering::Relaxed),
        }
    }

    /// Excludes writes while held: destroy and close take it so no batch straddles them.
    pub fn exclusive(&self) -> MutexGuard<'_, CommitScratch> {
        lock(&self.commit)
    }

    /// Whether each write waits for a sync (then the engine runs the leader's commits on a
    /// blocking thread, off the async workers).
    pub fn syncs(&self) -> bool {
        self.syncs
    }

    /// Queues `messages` for `topic`: the caller either leads the next commit (and must call
    /// [`Writer::lead_inline`] or [`Writer::lead_elsewhere`] with the batch it gets back) or follows
    /// and awaits its answer.
    ///
    /// Cancel-safe in the sense that matters: once queued, the batch is written (or fails) even
    /// if the follower's future is dropped; only the answer is lost.
    #[inline]
    pub(crate) fn enqueue(&self, topic: &Arc<TopicState>, messages: Batch) -> Result<Role> {
        topic.check_live()?;
        if messages.is_empty() {
            let next = topic.tail().next_id;
            return Ok(Role::Done(next..next));
        }
        // Uncontended: nobody leads and (so) nothing is queued. The new leader's first commit
        // is its own batch, written straight from the caller's hands: an uncontended append
        // builds no request and no group.
        if self.try_lead() {
            return Ok(Role::Lead(messages));
        }
        let mut queue = lock(&self.queue);
        let mut state = self.state.load(Ordering::Acquire);
        loop {
            if state & LEADING == 0 {
                // The leader left since: lead instead (nothing is queued without a leader).
                if self.try_lead() {
                    return Ok(Role::Lead(messages));
                }
                state = self.state.load(Ordering::Acquire);
                continue;
            }
            match self.state.compare_exchange_weak(
                state,
                state + QUEUED,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(now) => state = now,
            }
        }
        let (reply, answer) = oneshot::channel();
        queue.pending.push(Request {
            topic: topic.clone(),
            messages,
            reply,
        });
        if queue.lingering {
            self.arrived.notify_one();
        }
        Ok(Role::Follow(answer))
    }

    /// Takes the leadership if nobody holds it (and so nothing is queued).
    fn try_lead(&self) -> bool {
        self.state
            .compare_exchange(0, LEADING, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// Takes every queued request, under the queue's lock; the leadership stays taken. Gives it
    /// up instead, and returns `None`, if nothing is queued.
    fn take_pending(&self, queue: &mut Queue) -> Option<Vec<Request>> {
        // Under the lock nobody else changes the word: only lock-free `try_lead` could, and it
        // fails while a leader holds it.
        if queue.pending.is_empty() {
            self.state.store(0, Ordering::Release);
            return None;
        }
        self.state.store(LEADING, Ordering::Release);
        Some(std::mem::take(&mut queue.pending))
    }

    /// Gives up the leadership of a leader that will not commit (its commit panicked, or its
    /// blocking thread was never started): every queued producer is answered with `error()`
    /// instead of waiting for that leader, and the next producer leads.
    pub(crate) fn hand_back(&self, error: impl Fn() -> Error) {
        let pending = {
            let mut queue = lock(&self.queue);
            let pending = std::mem::take(&mut queue.pending);
            self.state.store(0, Ordering::Release);
            pending
        };
        for request in pending {
            let _ = request.reply.send(Err(error()));
        }
    }

    /// Commits the leader's own batch (`own`, of `topic`), then keeps committing whatever was
    /// queued meanwhile until the queue is empty. Returns the leader's own answer as soon as
    /// the queue is empty: the caller of an uncontended append waits for nothing but its write.
    ///
    /// If a commit panics, the leadership is handed back and every queued producer is answered
    /// with an error on the way out, so no later producer waits forever.
    ///
    /// The engine leads with [`Writer::lead_inline`] and blocking threads; this whole lead on
    /// one thread drives the writer in its own tests.
    #[cfg(test)]
    pub(crate) fn lead(
        &self,
        store: &Store,
        topic: &Arc<TopicState>,
        own: &Batch,
    ) -> Result<Range<u64>> {
        let mut guard = LeaderGuard {
            writer: self,
            done: false,
        };
        let started = self.syncs.then(Instant::now);
        let mine = self.commit_alone(store, topic, own.as_slice(), false);
        let last_commit = started.map_or(Duration::ZERO, |started| started.elapsed());
        self.keep_leading(store, 1, last_commit);
        guard.done = true;
        mine.and_then(|ids| ids.ok_or_else(|| Error::transient(BACKEND, "write stalled")))
    }

    /// The first commit of a leader on an async worker: its own batch, written only if RocksDB
    /// takes it without delay. The caller keeps the leadership either way and then either
    /// [`Writer::step_down`]s or continues on a blocking thread: after [`Inline::Stalled`]
    /// with [`Writer::lead_elsewhere`] of the same batch (nothing of it was written), after
    /// [`Inline::Written`] with [`Writer::keep_leading_elsewhere`] if others queued meanwhile.
    #[inline]
    pub(crate) fn lead_inline(
        &self,
        store: &Store,
        topic: &Arc<TopicState>,
        own: &Batch,
    ) -> Inline {
        let mut guard = LeaderGuard {
            writer: self,
            done: false,
        };
        let mine = self.commit_alone(store, topic, own.as_slice(), true);
        guard.done = true;
        match mine {
            Ok(None) => Inline::Stalled,
            Ok(Some(ids)) => Inline::Written(Ok(ids)),
            Err(e) => Inline::Written(Err(e)),
        }
    }

    /// Gives up the leadership after [`Writer::lead_inline`] if nothing was queued meanwhile
    /// (lock-free, the usual case); `false` if something was, and the caller must go on with
    /// [`Writer::keep_leading_elsewhere`].
    #[inline]
    pub(crate) fn step_down(&self) -> bool {
        self.state
            .compare_exchange(LEADING, 0, Ordering::Release, Ordering::Relaxed)
            .is_ok()
    }

    /// Commits whatever was queued behind an inline leader, on a blocking thread, until the
    /// queue is empty; hands the leadership back if a commit panics.
    pub(crate) fn keep_leading_elsewhere(&self, store: &Store) {
        let mut guard = LeaderGuard {
            writer: self,
            done: false,
        };
        self.keep_leading(store, 1, Duration::ZERO);
        guard.done = true;
    }

    /// The lead of a leader whose commits run on another thread and may go on after
    /// its own group: its caller is answered through `reply` like a follower, as soon as its
    /// own batch is written.
    pub(crate) fn lead_elsewhere(
        &self,
        store: &Store,
        topic: Arc<TopicState>,
        own: Batch,
        reply: Reply,
    ) {
        let mut guard = LeaderGuard {
            writer: self,
            done: false,
        };
        let first = vec![Request {
            topic,
            messages: own,
            reply,
        }];
        // Batches expected back after each commit: the ones just answered, plus those queued
        // before the answers went out (they came from earlier groups). Only a synced leader
        // lingers for them, and only it needs the clock.
        let mut expected = first.len();
        let started = self.syncs.then(Instant::now);
        self.commit_group(store, first, &mut expected);
        let last_commit = started.map_or(Duration::ZERO, |started| started.elapsed());
        self.keep_leading(store, expected, last_commit);
        guard.done = true;
    }

    /// The leader's loop after its first commit: commits every group queued meanwhile, then
    /// gives up the leadership once nothing is queued.
    #[inline]
    fn keep_leading(&self, store: &Store, mut expected: usize, mut last_commit: Duration) {
        loop {
            // Nothing queued (the usual case of a buffered leader): step down without the lock.
            if !self.syncs
                && self
                    .state
                    .compare_exchange(LEADING, 0, Ordering::Release, Ordering::Relaxed)
                    .is_ok()
            {
                return;
            }
            let group = {
                let mut queue = lock(&self.queue);
                if self.syncs {
                    queue = self.linger(queue, expected, last_commit);
                }
                match self.take_pending(&mut queue) {
                    Some(group) => group,
                    None => return,
                }
            };
            expected = group.len();
            let started = self.syncs.then(Instant::now);
            self.commit_group(store, group, &mut expected);
            last_commit = started.map_or(Duration::ZERO, |started| started.elapsed());
        }
    }

    /// Waits until `expected` batches are queued (the producers just answered are back), at
    /// most `MAX_LINGER` and a quarter of `last_commit`, so that the next sync carries them too.
    fn linger<'a>(
        &self,
        mut queue: MutexGuard<'a, Queue>,
        expected: usize,
        last_commit: Duration,
    ) -> MutexGuard<'a, Queue> {
        let bound = self
            .linger_bound
            .unwrap_or_else(|| MAX_LINGER.min(last_commit / 4));
        let deadline = Instant::now() + bound;
        queue.lingering = true;
        while queue.pending.len() < expected {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                break;
            };
            queue = match self.arrived.wait_timeout(queue, left) {
                Ok((queue, _)) => queue,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
        queue.lingering = false;
        queue
    }

    /// Commits the leader's own batch alone, the first commit of a leader on the caller's thread: the
    /// group path without a group, so an uncontended append pays for no queue of answers and
    /// no table of tails. `without_waiting`: with [`Store::write_options_without_waiting`],
    /// so that a write RocksDB would stall is not made and `Ok(None)` says so.
    fn commit_alone(
        &self,
        store: &Store,
        topic: &TopicState,
        messages: &[ProducerMessage],
        without_waiting: bool,
    ) -> Result<Option<Range<u64>>> {
        #[cfg(test)]
        if without_waiting && self.stall_inline_writes.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let mut scratch = lock(&self.commit);
        let db = database(&mut scratch.db, store)?;
        topic.check_live()?;
        let mut tail = topic.tail();
        let db = Db {
            db,
            write_options: if without_waiting {
                store.write_options_without_waiting()
            } else {
                store.write_options()
            },
        };
        let mut appender = Appender::new(&db, batch_bytes([messages]), self.page_size)?;
        let ids = appender.append(topic, &mut tail, messages)?;
        // Offered before the write, so a retention pass that could delete these ids forgets
        // them after (see `recent`).
        let _replaced = topic
            .awaited()
            .then(|| topic.recent.offer(ids.start, messages));
        match appender.write() {
            Ok(true) => {}
            written => {
                topic.recent.forget();
                return written.map(|_| None);
            }
        }
        self.count_write(1);
        topic.set_tail(tail);
        topic.publish(tail.next_id);
        Ok(Some(ids))
    }

    /// Counts a write of `batches` produce calls. Only commits call it, under the commit lock,
    /// so no atomic read-modify-write is needed.
    fn count_write(&self, batches: usize) {
        let writes = self.writes.load(Ordering::Relaxed) + 1;
        self.writes.store(writes, Ordering::Relaxed);
        let batches = self.batches.load(Ordering::Relaxed) + batches as u64;
        self.batches.store(batches, Ordering::Relaxed);
    }

    /// Writes `group` in one batch and answers its producers. Under synced writes, adds to
    /// `expected` the batches queued before the answers go out.
    fn commit_group(&self, store: &Store, group: Vec<Request>, expected: &mut usize) {
        let mut scratch = lock(&self.commit);
        let CommitScratch { tails, answers, db } = &mut *scratch;
        // Empty after every commit; cleared anyway so nothing stale can survive a panic.
        tails.clear();
        answers.clear();
        answers.reserve(group.len());
        let written = database(db, store).and_then(|db| {
            let db = Db {
                db,
                write_options: store.write_options(),
            };
            let batches = group.iter().map(|request| request.messages.as_slice());
            let mut appender = Appender::new(&db, batch_bytes(batches), self.page_size)?;
            // A destroyed topic fails its own batches only; any other error fails the commit.
            for (i, request) in group.iter().enumerate() {
                let ids = match request.topic.check_live() {
                    Ok(()) => {
                        let topic = &request.topic;
                        // Topic ids are never reused, so the id tells the topic.
                        let slot = match tails.iter().position(|(id, _, _)| *id == topic.id) {
                            Some(slot) => slot,
                            None => {
                                tails.push((topic.id, i, topic.tail()));
                                tails.len() - 1
                            }
                        };
                        let tail = &mut tails[slot].2;
                        Ok(appender.append(topic, tail, request.messages.as_slice())?)
                    }
                    Err(e) => Err(e),
                };
                answers.push(ids);
            }
            // Groups are written with the blocking options: a stall is waited out, never
            // refused (a refusal here would be RocksDB's own failure).
            match appender.write()? {
                true => Ok(()),
                false => Err(Error::transient(
                    BACKEND,
                    "write: RocksDB refused a stalled write",
                )),
            }
        });
        match written {
            Ok(()) => {
                self.count_write(group.len());
                for (_, i, tail) in tails.drain(..) {
                    let topic = &group[i].topic;
                    topic.set_tail(tail);
                    topic.publish(tail.next_id);
                }
            }
            Err(e) => {
                tails.clear();
                let closed = matches!(e, Error::Closed(_));
                let message = e.to_string();
                let transient = e.is_transient();
                let failed = || {
                    Err(if closed {
                        Error::Closed("rocksmq client")
                    } else if transient {
                        Error::transient(BACKEND, message.clone())
                    } else {
                        Error::backend(BACKEND, message.clone())
                    })
                };
                for answer in answers.iter_mut().filter(|answer| answer.is_ok()) {
                    *answer = failed();
                }
                // The store was never reached (closed): nobody was answered at all.
                answers.resize_with(group.len(), failed);
            }
        }
        if self.syncs {
            *expected += lock(&self.queue).pending.len();
        }
        for (request, answer) in group.into_iter().zip(answers.drain(..)) {
            // A caller that stopped waiting loses only the answer; its data is written.
            drop(request.reply.send(answer));
        }
    }
}

mod append;

#[cfg(test)]
mod tests;
