//! A push consumer's counters: kept by its engine and its messages, read by the handle.

use std::sync::atomic::{AtomicU32, AtomicU64};

/// Counters since the consumer started.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub received: AtomicU64,
    pub finished: AtomicU64,
    pub requeued: AtomicU64,
    pub failed: AtomicU64,
    pub connections: AtomicU64,
    /// Notified whenever a connection was subscribed.
    pub connected: tokio::sync::Notify,
    pub reconnects: AtomicU64,
    pub backoff_level: AtomicU64,
    /// Messages delivered and not yet taken by the application: while any wait, answers are
    /// left to gather into one write (see `Message::send`).
    pub waiting: AtomicU64,
    /// Backoff signals sent to the engine and not yet handled: answers sent meanwhile must
    /// follow them, as they would if the engine already listened (see `Shared::report`), and
    /// [`crate::Consumer::recv`] lets the engine handle them first.
    pub backoff_pending: AtomicU32,
}

/// A snapshot of [`crate::Consumer::stats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stats {
    /// Messages received.
    pub received: u64,
    /// Messages FINed (including those given up after `max_attempts`).
    pub finished: u64,
    /// Messages requeued.
    pub requeued: u64,
    /// Messages given up after `max_attempts`.
    pub failed: u64,
    /// Open connections.
    pub connections: u64,
    /// Connections re-established after a drop.
    pub reconnects: u64,
    /// Current backoff level (0: not backing off).
    pub backoff_level: u64,
}
