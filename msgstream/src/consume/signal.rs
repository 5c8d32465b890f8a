//! [`PumpSignal`]: what a pump tells its stream without going through the queue.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use tokio::sync::Notify;

/// Counters a pump publishes for its stream: how many ticks it has queued and whether its
/// consumer has ended (so a stream that stopped reading a channel at its cap can tell that a
/// tick, or the channel's end, is on its way through the queue, and resume), and how many
/// received messages it holds before the queue (so the stream can count everything it holds).
#[derive(Debug, Default)]
pub(crate) struct PumpSignal {
    ticks_queued: AtomicU64,
    /// Set as soon as the pump knows its channel ends (the consumer closed, failed for good,
    /// or the pump panicked), before the end is queued: a queue the stream does not read may
    /// have no room for it.
    ended: AtomicBool,
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

    /// The channel ends: nothing comes after what the pump holds and has queued.
    pub(crate) fn set_ended(&self) {
        self.ended.store(true, Ordering::Release);
        self.notify.notify_waiters();
    }

    /// The channel starts over (a seek restarted its consumer).
    pub(crate) fn clear_ended(&self) {
        self.ended.store(false, Ordering::Release);
    }

    /// Whether a tick beyond the first `seen`, or the channel's end, is on its way: reading the
    /// channel on reaches it.
    pub(crate) fn tick_or_end_after(&self, seen: u64) -> bool {
        self.ticks_queued() > seen || self.ended.load(Ordering::Acquire)
    }

    /// Waits until more than `seen` ticks have been queued or the channel ended. Cancel-safe.
    pub(crate) async fn wait_for_tick_or_end_after(&self, seen: u64) {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.tick_or_end_after(seen) {
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
