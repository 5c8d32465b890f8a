//! [`PumpSignal`]: what a pump tells its stream without going through the queue.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use tokio::sync::Notify;

/// Counters a pump publishes for its stream: how many ticks it has queued (so a stream that
/// stopped reading a channel at its cap can tell that a tick waits in the queue, and resume),
/// and how many received messages it holds before the queue (so the stream can count
/// everything it holds).
#[derive(Debug, Default)]
pub(crate) struct PumpSignal {
    ticks_queued: AtomicU64,
    pending: AtomicUsize,
    notify: Notify,
}

impl PumpSignal {
    /// `count` ticks were put into the queue.
    pub(crate) fn add_ticks_queued(&self, count: u64) {
        self.ticks_queued.fetch_add(count, Ordering::AcqRel);
        self.notify.notify_waiters();
    }

    /// Ticks queued so far.
    pub(crate) fn ticks_queued(&self) -> u64 {
        self.ticks_queued.load(Ordering::Acquire)
    }

    /// Waits until more than `seen` ticks have been queued. Cancel-safe.
    pub(crate) async fn wait_for_tick_after(&self, seen: u64) {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.ticks_queued() > seen {
                return;
            }
            notified.await;
        }
    }

    /// Records how many received messages the pump holds before the queue.
    pub(crate) fn set_pending(&self, pending: usize) {
        self.pending.store(pending, Ordering::Release);
    }

    /// Received messages the pump holds before the queue.
    pub(crate) fn pending(&self) -> usize {
        self.pending.load(Ordering::Acquire)
    }
}
