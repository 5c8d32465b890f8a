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
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use msgstream::mq::ProducerMessage;
use msgstream::{Error, Result};
use tokio::sync::oneshot;

use crate::codec::{encode_properties, PageRecord};
use crate::keys::{message_key, CF_MESSAGES, CF_PAGES, CF_PROPERTIES};
use crate::store::{Store, BACKEND};
use crate::topics::{Tail, TopicState};

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
    leading: bool,
    /// A synced leader waits on [`Writer::arrived`]: enqueue must wake it.
    lingering: bool,
}

/// The longest a synced leader waits for the producers it just answered (see the module docs).
pub(crate) const MAX_LINGER: Duration = Duration::from_micros(200);

/// Buffers of the commit path, kept under the commit lock and reused, so that a commit
/// allocates nothing of its own (a single-message append is as lean as a raw put).
#[derive(Default)]
pub(crate) struct CommitScratch {
    /// The tails a commit moves: topic id, which batch's topic (0: the leader's own, `i + 1`:
    /// the group's `i`-th), new tail. By position rather than by `Arc`, so that filling it
    /// costs no reference count.
    tails: Vec<(u64, usize, Tail)>,
    /// The group's answers, in the group's order.
    answers: Vec<Result<Range<u64>>>,
}

/// What a caller of [`Writer::enqueue`] does next.
pub(crate) enum Role {
    /// Nothing to write (an empty batch): these are the (empty) ids.
    Done(Range<u64>),
    /// Another caller leads: await the answer.
    Follow(oneshot::Receiver<Result<Range<u64>>>),
    /// This caller leads, with its own batch given back (never queued): pass it to
    /// [`Writer::lead`] on this thread, or to [`Writer::lead_elsewhere`] on another.
    Lead(Batch),
}

/// A producer's messages: one (a `send`, no vector to allocate) or several.
pub(crate) enum Batch {
    /// A single message.
    One(ProducerMessage),
    /// A batch of messages (never empty once queued).
    Many(Vec<ProducerMessage>),
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

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

impl Writer {
    /// A writer closing pages at `page_size` bytes; `syncs` says whether each write waits for
    /// an fsync, in which case the engine runs the leader on a blocking thread.
    pub fn new(page_size: u64, syncs: bool) -> Writer {
        Writer {
            queue: Mutex::default(),
            arrived: Condvar::new(),
            linger_bound: None,
            commit: Mutex::default(),
            page_size: page_size.max(1),
            syncs,
            writes: AtomicU64::new(0),
            batches: AtomicU64::new(0),
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
    /// [`Writer::lead`] or [`Writer::lead_elsewhere`] with the batch it gets back) or follows
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
        let mut queue = lock(&self.queue);
        if queue.leading {
            let (reply, answer) = oneshot::channel();
            queue.pending.push(Request {
                topic: topic.clone(),
                messages,
                reply,
            });
            if queue.lingering {
                self.arrived.notify_one();
            }
            return Ok(Role::Follow(answer));
        }
        // Nothing is queued while nobody leads (a leader stops only on an empty queue), so the
        // new leader's first commit is its own batch, written straight from the caller's hands:
        // an uncontended append builds no request and no group.
        queue.leading = true;
        Ok(Role::Lead(messages))
    }

    /// Gives up the leadership of a leader that will not commit (its commit panicked, or its
    /// blocking thread was never started): every queued producer is answered with `error()`
    /// instead of waiting for that leader, and the next producer leads.
    pub(crate) fn hand_back(&self, error: impl Fn() -> Error) {
        let pending = {
            let mut queue = lock(&self.queue);
            queue.leading = false;
            std::mem::take(&mut queue.pending)
        };
        for request in pending {
            let _ = request.reply.send(Err(error()));
        }
    }

    /// Commits the leader's own batch (`own`, of `topic`), then keeps committing whatever was
    /// queued meanwhile until the queue is empty. Returns the leader's own answer.
    ///
    /// If a commit panics, the leadership is handed back and every queued producer is answered
    /// with an error on the way out, so no later producer waits forever.
    #[inline]
    pub(crate) fn lead(
        &self,
        store: &Store,
        topic: &Arc<TopicState>,
        own: &Batch,
    ) -> Result<Range<u64>> {
        let mine = self.lead_from(store, Some((topic, own.as_slice())), Vec::new());
        mine.unwrap_or_else(|| Err(Error::Closed("rocksmq client")))
    }

    /// [`Writer::lead`] for a leader whose commits run on another thread and may go on after
    /// its own group: its caller is answered through `reply` like a follower, as soon as its
    /// own batch is written.
    pub(crate) fn lead_elsewhere(
        &self,
        store: &Store,
        topic: Arc<TopicState>,
        own: Batch,
        reply: Reply,
    ) {
        let request = Request {
            topic,
            messages: own,
            reply,
        };
        self.lead_from(store, None, vec![request]);
    }

    /// The leader's loop: commits `own` and `first` in one write, then every group queued
    /// meanwhile. Returns the answer for `own`.
    #[inline]
    fn lead_from(
        &self,
        store: &Store,
        own: Option<(&Arc<TopicState>, &[ProducerMessage])>,
        first: Vec<Request>,
    ) -> Option<Result<Range<u64>>> {
        let mut guard = LeaderGuard {
            writer: self,
            done: false,
        };
        // Batches expected back after each commit: the ones just answered, plus those queued
        // before the answers went out (they came from earlier groups). Only a synced leader
        // lingers for them, and only it needs the clock.
        let mut expected = first.len() + usize::from(own.is_some());
        let started = self.syncs.then(Instant::now);
        let mine = self.commit_group(store, own, first, &mut expected);
        let mut last_commit = started.map_or(Duration::ZERO, |started| started.elapsed());
        loop {
            let group = {
                let mut queue = lock(&self.queue);
                if self.syncs {
                    queue = self.linger(queue, expected, last_commit);
                }
                if queue.pending.is_empty() {
                    queue.leading = false;
                    break;
                }
                std::mem::take(&mut queue.pending)
            };
            expected = group.len();
            let started = self.syncs.then(Instant::now);
            self.commit_group(store, None, group, &mut expected);
            last_commit = started.map_or(Duration::ZERO, |started| started.elapsed());
        }
        guard.done = true;
        mine
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

    /// Writes `own` (the leader's batch, answered by return value) and `group` in one batch and
    /// answers the followers; returns the answer for `own` (`None` without one). Under synced
    /// writes, adds to `expected` the batches queued before the answers go out.
    fn commit_group(
        &self,
        store: &Store,
        own: Option<(&Arc<TopicState>, &[ProducerMessage])>,
        group: Vec<Request>,
        expected: &mut usize,
    ) -> Option<Result<Range<u64>>> {
        let mut scratch = lock(&self.commit);
        let CommitScratch { tails, answers } = &mut *scratch;
        // Empty after every commit; cleared anyway so nothing stale can survive a panic.
        tails.clear();
        answers.clear();
        answers.reserve(group.len());
        // The leader's own ids, once appended (`None` if its topic was destroyed or the store
        // was not reached): kept small, its error is built only if there is one.
        let mut own_ids = None;
        let written = store.with(|db| {
            let mut batch = Appender {
                db,
                batch: rocksdb::WriteBatch::default(),
                messages_cf: db.cf(CF_MESSAGES)?,
                tails,
                page_size: self.page_size,
            };
            // A destroyed topic fails its own batches only; any other error fails the commit.
            if let Some((topic, messages)) = own {
                if topic.is_live() {
                    own_ids = Some(batch.append(0, topic, messages)?);
                }
            }
            for (i, request) in group.iter().enumerate() {
                let ids = match request.topic.check_live() {
                    Ok(()) => {
                        Ok(batch.append(i + 1, &request.topic, request.messages.as_slice())?)
                    }
                    Err(e) => Err(e),
                };
                answers.push(ids);
            }
            db.write(batch.batch)
        });
        let batches = group.len() + usize::from(own.is_some());
        let mut mine = own.map(|(topic, _)| match own_ids.clone() {
            Some(ids) => Ok(ids),
            None => topic.check_live().and(Err(Error::Closed("rocksmq client"))),
        });
        match written {
            Ok(()) => {
                // Only commits change the counters, and they hold the commit lock: no atomic
                // read-modify-write needed.
                let stats = (&self.writes, &self.batches);
                stats
                    .0
                    .store(stats.0.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
                let batches = stats.1.load(Ordering::Relaxed) + batches as u64;
                stats.1.store(batches, Ordering::Relaxed);
                for (_, slot, tail) in tails.drain(..) {
                    let topic = match slot.checked_sub(1) {
                        Some(i) => &group[i].topic,
                        None => match own {
                            Some((topic, _)) => topic,
                            None => continue,
                        },
                    };
                    *lock(&topic.tail) = tail;
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
                // Appended but not written, or never reached: the write's error either way.
                if own_ids.is_some() || matches!(mine, Some(Err(Error::Closed(_)))) {
                    mine = Some(failed());
                }
            }
        }
        if self.syncs {
            *expected += lock(&self.queue).pending.len();
        }
        if !group.is_empty() {
            for (request, answer) in group.into_iter().zip(answers.drain(..)) {
                // A caller that stopped waiting loses only the answer; its data is written.
                drop(request.reply.send(answer));
            }
        }
        mine
    }
}

/// One commit's `WriteBatch` being filled, with the tails it moves (see [`CommitScratch`]).
struct Appender<'a, 'db> {
    db: &'a crate::store::Db<'db>,
    batch: rocksdb::WriteBatch,
    messages_cf: &'a rocksdb::ColumnFamily,
    tails: &'a mut Vec<(u64, usize, Tail)>,
    page_size: u64,
}

impl Appender<'_, '_> {
    /// Adds `messages` of `topic` (checked live by the caller), the commit's `batch`-th batch
    /// (see [`CommitScratch::tails`]), with the next ids of its tail (as moved by this commit so
    /// far), and the record of any page they close; returns their ids. An error fails the
    /// whole commit.
    fn append(
        &mut self,
        batch: usize,
        topic: &TopicState,
        messages: &[ProducerMessage],
    ) -> Result<Range<u64>> {
        // Topic ids are never reused, so the id tells the topic.
        let topic_id = topic.id;
        let slot = match self.tails.iter().position(|(id, _, _)| *id == topic_id) {
            Some(slot) => slot,
            None => {
                self.tails.push((topic_id, batch, topic.tail()));
                self.tails.len() - 1
            }
        };
        let tail = &mut self.tails[slot].2;
        let first = tail.next_id;
        for message in messages {
            let id = tail.next_id;
            let key = message_key(topic_id, id);
            self.batch.put_cf(self.messages_cf, key, &message.payload);
            let mut bytes = message.payload.len() as u64;
            if !message.properties.is_empty() {
                topic.note_properties();
                let encoded = encode_properties(&message.properties);
                bytes += encoded.len() as u64;
                self.batch.put_cf(self.db.cf(CF_PROPERTIES)?, key, encoded);
            }
            tail.next_id += 1;
            tail.page_bytes += bytes;
            if tail.page_bytes >= self.page_size {
                let page = PageRecord {
                    last_id: id,
                    bytes: tail.page_bytes,
                    closed_ms: now_ms(),
                };
                self.batch.put_cf(
                    self.db.cf(CF_PAGES)?,
                    message_key(topic_id, tail.page_first),
                    page.encode(),
                );
                tail.page_first = tail.next_id;
                tail.page_bytes = 0;
            }
        }
        Ok(first..tail.next_id)
    }
}

#[cfg(test)]
mod tests;
