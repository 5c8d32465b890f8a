//! Grouped acknowledgements: a consumer's `ack` staged at once and written by a background
//! thread shortly after, together with every other ack staged meanwhile (the idea of Pulsar's
//! acknowledgment grouping).
//!
//! Why: written one by one, each ack is a WAL write (a `write(2)`, 3–4 µs here) on the
//! consumer's thread between two messages. A consumer acking every message of a stream at
//! millions of messages per second pays that per message; one waiting for the next message
//! is woken more slowly after that work. Grouped, an ack costs a map update, and one write
//! carries every ack of an interval.
//!
//! Guarantees (see [`AckWrite::Grouped`]):
//! - An ack is checked exactly as an immediate one (topic, group, id range, delivery epoch)
//!   before `ack` returns; only the write is deferred, through the staged acks of `acks`.
//! - The background write happens at most the interval after the first ack it carries (later
//!   when the write fails: it is retried, with the error logged, at growing intervals up to a
//!   second). Until then a process crash delivers those messages again: at least once, never
//!   a skip. A power loss could already move a group back (acks are never synced).
//! - Closing the consumer, subscribing its group again, and closing or dropping the queue
//!   write what is staged first, so within one process a grouped ack is never redelivered.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use msgstream::sync::lock;
use msgstream::{Error, Result};

use crate::engine::Inner;
use crate::Rocksmq;

/// When the acknowledgement of a consumer (`msgstream::mq::Consumer::ack`) is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AckWrite {
    /// By `ack` itself, before it returns (one unsynced write per ack): once `ack` returned,
    /// a process crash never delivers the message to the subscription again.
    #[default]
    Immediate,
    /// Staged by `ack`, and written by a background thread at most this long after, in one
    /// write with every other ack staged meanwhile. A process crash in that window delivers
    /// those messages again (at least once, never a skip). See the module docs.
    Grouped(Duration),
}

impl AckWrite {
    /// The longest grouping interval [`crate::Rocksmq::open`] accepts: acks made in it are
    /// delivered again after a crash, so a longer one is more likely a unit mistake.
    pub const MAX_GROUPING: Duration = Duration::from_secs(60);

    /// `InvalidArgument` for a grouping interval above [`AckWrite::MAX_GROUPING`].
    pub(crate) fn validate(self) -> Result<()> {
        match self {
            AckWrite::Grouped(within) if within > AckWrite::MAX_GROUPING => {
                Err(Error::InvalidArgument(format!(
                    "ack grouping interval {within:?} is above the longest allowed, {:?}",
                    AckWrite::MAX_GROUPING
                )))
            }
            _ => Ok(()),
        }
    }
}

/// The shortest and longest pauses between two attempts to write grouped acks that keep
/// failing (the pause doubles from the grouping interval, within these bounds).
const MIN_RETRY: Duration = Duration::from_millis(10);
const MAX_RETRY: Duration = Duration::from_secs(1);

/// The background writer of grouped acks; idle (no thread) under [`AckWrite::Immediate`].
pub(crate) struct AckFlusher {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

struct Shared {
    /// Set by the first ack staged since the last write: the thread is (about to be) on its
    /// way. Acks that find it set cost no wake-up.
    armed: AtomicBool,
    /// Whether the thread should end (the queue closes or is dropped).
    stop: Mutex<bool>,
    wake: Condvar,
}

impl AckFlusher {
    /// A flusher with no thread: [`AckFlusher::arm`] does nothing until [`AckFlusher::start`].
    pub(crate) fn idle() -> AckFlusher {
        AckFlusher {
            shared: Arc::new(Shared {
                armed: AtomicBool::new(false),
                stop: Mutex::new(false),
                wake: Condvar::new(),
            }),
            thread: Mutex::new(None),
        }
    }

    /// Starts the thread writing the staged acks of `inner` at most `within` after the first
    /// of them. It holds the queue only while it writes.
    pub(crate) fn start(inner: &Arc<Inner>, within: Duration) -> Result<()> {
        let shared = inner.ack_flusher.shared.clone();
        let queue = Arc::downgrade(inner);
        let thread = std::thread::Builder::new()
            .name("rocksmq-acks".into())
            .spawn(move || run(&shared, &queue, within))
            .map_err(|e| Error::backend("rocksmq", format!("starting the ack thread: {e}")))?;
        *lock(&inner.ack_flusher.thread) = Some(thread);
        Ok(())
    }

    /// Tells the thread that acks are staged. Only the first ack after a write wakes it.
    pub(crate) fn arm(&self) {
        if self.shared.armed.load(Ordering::Acquire)
            || self.shared.armed.swap(true, Ordering::AcqRel)
        {
            return;
        }
        // Under the lock: the thread checks `armed` under it before it waits.
        let _stop = lock(&self.shared.stop);
        self.shared.wake.notify_one();
    }

    /// Ends the thread and waits for it (a write in progress finishes first). Idempotent.
    pub(crate) fn stop(&self) {
        self.signal_stop();
        if let Some(thread) = lock(&self.thread).take() {
            if thread.join().is_err() {
                tracing::warn!("rocksmq: the ack thread panicked");
            }
        }
    }

    fn signal_stop(&self) {
        *lock(&self.shared.stop) = true;
        self.shared.wake.notify_one();
    }
}

impl Drop for AckFlusher {
    /// The queue is dropped (possibly on the thread itself, which may hold it last while it
    /// writes): tell the thread to end, without waiting for it.
    fn drop(&mut self) {
        self.signal_stop();
    }
}

/// The thread: idle until armed, then waits `within` (so that the interval's acks share the
/// write), clears `armed` and writes. An ack staged after the clear arms it again; one staged
/// before is in the write (staging and writing take the same lock).
fn run(shared: &Shared, queue: &Weak<Inner>, within: Duration) {
    let mut pause = within;
    let mut stopped = lock(&shared.stop);
    loop {
        while !*stopped && !shared.armed.load(Ordering::Acquire) {
            stopped = wait(&shared.wake, stopped);
        }
        let due = Instant::now() + pause;
        while !*stopped {
            let now = Instant::now();
            if now >= due {
                break;
            }
            stopped = match shared.wake.wait_timeout(stopped, due - now) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
        if *stopped {
            // Closing or dropping the queue writes what is staged.
            return;
        }
        drop(stopped);
        shared.armed.store(false, Ordering::Release);
        let Some(inner) = queue.upgrade() else { return };
        pause = match (Rocksmq { inner }).flush_acks() {
            Ok(()) => within,
            Err(error) => {
                let next = (pause * 2).min(MAX_RETRY).max(MIN_RETRY);
                tracing::warn!(%error, retry_in = ?next, "rocksmq: writing grouped acks failed; they stay staged");
                shared.armed.store(true, Ordering::Release);
                next
            }
        };
        stopped = lock(&shared.stop);
    }
}

fn wait<'a, T>(
    condvar: &Condvar,
    guard: std::sync::MutexGuard<'a, T>,
) -> std::sync::MutexGuard<'a, T> {
    match condvar.wait(guard) {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}
