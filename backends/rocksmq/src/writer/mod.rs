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
type Reply = oneshot::Sender<Result<Range<u64>>>;

struct Request {
    topic: Arc<TopicState>,
    messages: Vec<ProducerMessage>,
    /// `None` for the leader's own request, answered by return value.
    reply: Option<Reply>,
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
    tails: Vec<(Arc<TopicState>, Tail)>,
    answers: Vec<(Option<Reply>, Result<Range<u64>>)>,
}

/// What a caller of [`Writer::enqueue`] does next.
pub(crate) enum Role {
    /// Nothing to write (an empty batch): these are the (empty) ids.
    Done(Range<u64>),
    /// Another caller leads: await the answer.
    Follow(oneshot::Receiver<Result<Range<u64>>>),
    /// This caller leads: pass the group to [`Writer::lead`].
    Lead(Group),
}

/// The requests a leader commits first (its own among them). Opaque outside the writer.
pub(crate) struct Group(Vec<Request>);

impl Group {
    /// Makes the leader's own request answered through a channel, like a follower's: for a
    /// leader whose commits run on another thread and may go on after its own group.
    pub(crate) fn answer_by_channel(&mut self) -> oneshot::Receiver<Result<Range<u64>>> {
        let (reply, answer) = oneshot::channel();
        if let Some(request) = self.0.iter_mut().find(|r| r.reply.is_none()) {
            request.reply = Some(reply);
        }
        answer
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
        if self.done {
            return;
        }
        let pending = {
            let mut queue = lock(&self.writer.queue);
            queue.leading = false;
            std::mem::take(&mut queue.pending)
        };
        for request in pending {
            if let Some(reply) = request.reply {
                let _ = reply.send(Err(Error::backend(
                    BACKEND,
                    "the commit of an earlier batch panicked; this batch was not written",
                )));
            }
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
    /// [`Writer::lead`] with the group) or follows and awaits its answer.
    ///
    /// Cancel-safe in the sense that matters: once queued, the batch is written (or fails) even
    /// if the follower's future is dropped; only the answer is lost.
    pub(crate) fn enqueue(
        &self,
        topic: Arc<TopicState>,
        messages: Vec<ProducerMessage>,
    ) -> Result<Role> {
        topic.check_live()?;
        if messages.is_empty() {
            let next = topic.tail().next_id;
            return Ok(Role::Done(next..next));
        }
        let mut request = Request {
            topic,
            messages,
            reply: None,
        };
        let mut queue = lock(&self.queue);
        if queue.leading {
            let (reply, answer) = oneshot::channel();
            request.reply = Some(reply);
            queue.pending.push(request);
            if queue.lingering {
                self.arrived.notify_one();
            }
            return Ok(Role::Follow(answer));
        }
        queue.leading = true;
        let mut group = Vec::with_capacity(1 + queue.pending.len());
        group.push(request);
        group.append(&mut queue.pending);
        Ok(Role::Lead(Group(group)))
    }

    /// Commits the leader's first group (its own request and whatever was queued), then keeps
    /// committing until the queue is empty. Returns the leader's own answer.
    ///
    /// If a commit panics, the leadership is handed back and every queued producer is answered
    /// with an error on the way out, so no later producer waits forever.
    pub(crate) fn lead(&self, store: &Store, first: Group) -> Result<Range<u64>> {
        let mut guard = LeaderGuard {
            writer: self,
            done: false,
        };
        // Batches expected back after each commit: the ones just answered, plus those queued
        // before the answers went out (they came from earlier groups).
        let mut expected = first.0.len();
        let started = Instant::now();
        let mine = self.commit_group(store, first.0, &mut expected);
        let mut last_commit = started.elapsed();
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
            let started = Instant::now();
            self.commit_group(store, group, &mut expected);
            last_commit = started.elapsed();
        }
        guard.done = true;
        mine.unwrap_or(Err(Error::Closed("rocksmq client")))
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

    /// Writes `group` in one batch and answers the followers; returns the answer of the request
    /// without a reply channel (the leader's own), if it was in the group and the store open.
    /// Under synced writes, adds to `expected` the batches queued before the answers go out.
    fn commit_group(
        &self,
        store: &Store,
        group: Vec<Request>,
        expected: &mut usize,
    ) -> Option<Result<Range<u64>>> {
        let mut scratch = lock(&self.commit);
        let CommitScratch { tails, answers } = &mut *scratch;
        // Empty after every commit; cleared anyway so nothing stale can survive a panic.
        tails.clear();
        answers.clear();
        answers.reserve(group.len());
        let written = store.with(|db| {
            let messages_cf = db.cf(CF_MESSAGES)?;
            let mut batch = rocksdb::WriteBatch::default();
            for request in group {
                if let Err(e) = request.topic.check_live() {
                    answers.push((request.reply, Err(e)));
                    continue;
                }
                let slot = match tails
                    .iter()
                    .position(|(t, _)| Arc::ptr_eq(t, &request.topic))
                {
                    Some(slot) => slot,
                    None => {
                        let tail = request.topic.tail();
                        tails.push((request.topic.clone(), tail));
                        tails.len() - 1
                    }
                };
                let topic_id = request.topic.id;
                let tail = &mut tails[slot].1;
                let first = tail.next_id;
                for message in &request.messages {
                    let id = tail.next_id;
                    let key = message_key(topic_id, id);
                    batch.put_cf(messages_cf, key, &message.payload);
                    let mut bytes = message.payload.len() as u64;
                    if !message.properties.is_empty() {
                        request.topic.note_properties();
                        let encoded = encode_properties(&message.properties);
                        bytes += encoded.len() as u64;
                        batch.put_cf(db.cf(CF_PROPERTIES)?, key, encoded);
                    }
                    tail.next_id += 1;
                    tail.page_bytes += bytes;
                    if tail.page_bytes >= self.page_size {
                        let page = PageRecord {
                            last_id: id,
                            bytes: tail.page_bytes,
                            closed_ms: now_ms(),
                        };
                        batch.put_cf(
                            db.cf(CF_PAGES)?,
                            message_key(topic_id, tail.page_first),
                            page.encode(),
                        );
                        tail.page_first = tail.next_id;
                        tail.page_bytes = 0;
                    }
                }
                answers.push((request.reply, Ok(first..tail.next_id)));
            }
            db.write(batch)
        });
        match written {
            Ok(()) => {
                self.writes.fetch_add(1, Ordering::Relaxed);
                self.batches
                    .fetch_add(answers.len() as u64, Ordering::Relaxed);
                for (topic, tail) in tails.drain(..) {
                    *lock(&topic.tail) = tail;
                    topic.publish(tail.next_id);
                }
            }
            Err(e) => {
                tails.clear();
                let closed = matches!(e, Error::Closed(_));
                let message = e.to_string();
                let transient = e.is_transient();
                for (_, answer) in answers.iter_mut().filter(|(_, answer)| answer.is_ok()) {
                    *answer = Err(if closed {
                        Error::Closed("rocksmq client")
                    } else if transient {
                        Error::transient(BACKEND, message.clone())
                    } else {
                        Error::backend(BACKEND, message.clone())
                    });
                }
            }
        }
        if self.syncs {
            *expected += lock(&self.queue).pending.len();
        }
        let mut own = None;
        for (reply, answer) in answers.drain(..) {
            match reply {
                // A caller that stopped waiting loses only the answer; its data is written.
                Some(reply) => drop(reply.send(answer)),
                None => own = Some(answer),
            }
        }
        own
    }
}

#[cfg(test)]
mod tests;
