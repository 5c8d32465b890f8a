//! Commands that the server answers (PUB and its kin), queued per thread until the write task
//! takes them.
//!
//! Publishers on every worker of a runtime queue commands on one connection. A single queue
//! would have them all meet on its lock, whose cache lines would then move between the cores
//! with every publish. So each thread queues into a shard of its own (its own lock, on its own
//! cache line), and the write task takes the shards in turn.
//!
//! Replies must match commands in wire order, so each shard keeps its commands' reply
//! waiters beside their bytes, and the write task moves the waiters on (to the reader) in
//! the order it puts the bytes into its write. A command's reply cannot come before the
//! write that carries it, so the reader always finds its waiter.
//!
//! Order on the wire: a thread's commands keep their order, and a command queued after
//! another's reply came (a caller awaiting each publish) always follows it. Commands queued
//! concurrently from different threads are ordered by the write task, shard by shard: calls
//! in flight at the same time had no order among them to keep.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use bytes::BytesMut;

use tokio::sync::oneshot;

use crate::error::{Error, Result};

/// Where the reply to one command goes.
pub(crate) type ReplyTo = oneshot::Sender<Result<bytes::Bytes>>;

/// Shards per connection: more than the cores of a typical host, so threads seldom share one.
const SHARDS: usize = 16;

/// The calling thread's shard: threads get shards in turn when they first ask.
fn shard_index() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SHARD: usize = NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS;
    }
    SHARD.with(|shard| *shard)
}

/// One thread's queued commands and their reply waiters, alone on its cache lines.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Shard(Mutex<Queued>);

#[derive(Debug, Default)]
struct Queued {
    bytes: BytesMut,
    replies: Vec<ReplyTo>,
}

impl Shard {
    fn lock(&self) -> MutexGuard<'_, Queued> {
        msgstream::sync::lock(&self.0)
    }
}

/// See the module docs.
#[derive(Debug)]
pub(crate) struct Requests {
    shards: Box<[Shard]>,
    /// Some shard holds commands the write task was told about (reset before it takes them).
    scheduled: AtomicBool,
    /// No more commands accepted.
    closed: AtomicBool,
}

impl Default for Requests {
    fn default() -> Self {
        Requests {
            shards: (0..SHARDS).map(|_| Shard::default()).collect(),
            scheduled: AtomicBool::new(false),
            closed: AtomicBool::new(false),
        }
    }
}

/// What the write task took: so many bytes and requests.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Taken {
    pub bytes: usize,
    pub requests: usize,
}

impl Requests {
    /// Queues one command (`encode` writes it) and where its reply goes. Returns whether the
    /// write task must be woken (the first command after it last took the shards).
    /// [`Error::Closed`] once [`Requests::close`] ran: then nothing was queued.
    pub(crate) fn push(
        &self,
        encode: impl FnOnce(&mut BytesMut),
        reply_to: ReplyTo,
    ) -> Result<bool> {
        let mut queued = self.shards[shard_index()].lock();
        // Checked under the shard's lock: `take_all_replies` locks every shard after the
        // flag is set, so a command either sees it or is found there.
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed("connection"));
        }
        let first = queued.bytes.is_empty();
        encode(&mut queued.bytes);
        queued.replies.push(reply_to);
        drop(queued);
        Ok(first && !self.scheduled.swap(true, Ordering::AcqRel))
    }

    /// Bytes queued now (for the write task's gathering).
    pub(crate) fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| shard.lock().bytes.len())
            .sum()
    }

    /// Appends every queued command to `batch` and its reply waiter to `replies`, in the same
    /// order. Commands queued meanwhile wake the write task again.
    ///
    /// While `batch` is empty a shard's bytes are not copied but swapped in (the shard gets
    /// the empty buffer, capacity kept): with one publishing thread, the usual case, commands
    /// reach the socket with one copy, the one that encoded them.
    pub(crate) fn take(&self, batch: &mut BytesMut, replies: &mut VecDeque<ReplyTo>) -> Taken {
        self.scheduled.store(false, Ordering::Release);
        let mut taken = Taken::default();
        for shard in self.shards.iter() {
            let mut queued = shard.lock();
            if queued.bytes.is_empty() {
                continue;
            }
            taken.bytes += queued.bytes.len();
            taken.requests += queued.replies.len();
            if batch.is_empty() {
                std::mem::swap(batch, &mut queued.bytes);
            } else {
                batch.extend_from_slice(&queued.bytes);
                queued.bytes.clear();
            }
            replies.extend(queued.replies.drain(..));
        }
        taken
    }

    /// Refuses every later command.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }

    /// After [`Requests::close`]: moves the reply waiters of every command never taken to
    /// `into` (their commands are dropped, never written).
    pub(crate) fn take_all_replies(&self, into: &mut VecDeque<ReplyTo>) {
        for shard in self.shards.iter() {
            let mut queued = shard.lock();
            queued.bytes.clear();
            into.extend(queued.replies.drain(..));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::oneshot;

    fn reply() -> (ReplyTo, oneshot::Receiver<Result<bytes::Bytes>>) {
        oneshot::channel()
    }

    #[test]
    fn commands_and_waiters_are_taken_in_the_same_order() {
        let requests = Requests::default();
        let mut receivers = Vec::new();
        std::thread::scope(|scope| {
            for thread in 0..4u8 {
                let requests = &requests;
                let (tx, rx) = reply();
                receivers.push(rx);
                scope.spawn(move || {
                    requests
                        .push(|buf| buf.extend_from_slice(&[thread]), tx)
                        .expect("open");
                });
            }
        });
        let (mut batch, mut replies) = (BytesMut::new(), VecDeque::new());
        let taken = requests.take(&mut batch, &mut replies);
        assert_eq!((taken.bytes, taken.requests), (4, 4));
        // Answer each waiter with the command it was queued with: every one gets its own.
        for (byte, reply_to) in batch.iter().zip(replies.drain(..)) {
            let _ = reply_to.send(Ok(bytes::Bytes::copy_from_slice(&[*byte])));
        }
        let mut answers: Vec<u8> = receivers
            .into_iter()
            .map(|mut rx| rx.try_recv().expect("answered").expect("ok")[0])
            .collect();
        answers.sort_unstable();
        assert_eq!(answers, [0, 1, 2, 3]);
        assert_eq!(requests.len(), 0);
    }

    #[test]
    fn taken_commands_follow_what_the_batch_holds_and_leave_nothing_behind() {
        let requests = Requests::default();
        let (mut batch, mut replies) = (BytesMut::new(), VecDeque::new());
        requests
            .push(|b| b.extend_from_slice(b"one "), reply().0)
            .expect("open");
        // An empty batch takes the shard's buffer whole.
        requests.take(&mut batch, &mut replies);
        assert_eq!(&batch[..], b"one ");
        // A batch already holding other commands gets the queued ones appended after them.
        requests
            .push(|b| b.extend_from_slice(b"two"), reply().0)
            .expect("open");
        requests.take(&mut batch, &mut replies);
        assert_eq!(&batch[..], b"one two");
        assert_eq!((requests.len(), replies.len()), (0, 2));
    }

    #[test]
    fn only_the_first_command_after_a_take_wakes_the_writer() {
        let requests = Requests::default();
        assert!(requests
            .push(|b| b.extend_from_slice(b"a"), reply().0)
            .expect("open"));
        assert!(!requests
            .push(|b| b.extend_from_slice(b"b"), reply().0)
            .expect("open"));
        requests.take(&mut BytesMut::new(), &mut VecDeque::new());
        assert!(requests
            .push(|b| b.extend_from_slice(b"c"), reply().0)
            .expect("open"));
    }

    #[test]
    fn closed_refuses_and_hands_back_the_waiters_never_written() {
        let requests = Requests::default();
        let (tx, mut rx) = reply();
        requests
            .push(|b| b.extend_from_slice(b"x"), tx)
            .expect("open");
        requests.close();
        assert!(matches!(
            requests.push(|b| b.extend_from_slice(b"y"), reply().0),
            Err(Error::Closed(_))
        ));
        let mut waiting = VecDeque::new();
        requests.take_all_replies(&mut waiting);
        assert_eq!(waiting.len(), 1);
        assert_eq!(requests.len(), 0);
        drop(waiting);
        assert!(
            rx.try_recv().is_err(),
            "its sender was dropped, not answered"
        );
    }
}
