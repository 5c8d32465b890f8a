//! Options shared by both streams.

use std::sync::Arc;

use crate::msg::DecoderRegistry;
use crate::retry::RetryPolicy;

/// What the tt stream does with a late message (timestamp at or below an emitted pack's
/// `end_ts`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LatePolicy {
    /// Report it as [`crate::Error::LateMessage`] from the stream (which then continues).
    /// Default.
    #[default]
    Error,
    /// Log a warning, count it, and drop it.
    Drop,
}

/// Largest accepted `StreamOptions::buffer`: it sizes what each channel may hold (queued
/// messages, and each backend consumer's prefetch), so a larger value is a configuration
/// mistake, not a wish.
pub const MAX_BUFFER: usize = 1 << 24;

/// How a stream is built.
///
/// `#[non_exhaustive]`: start from `StreamOptions::default()` and change fields, or chain the
/// `with_*` methods, so an option added later breaks no caller.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct StreamOptions {
    /// Capacity of the stream's queues, in messages (per channel for the tt stream). Bounds the
    /// memory a channel that is ahead can take.
    pub buffer: usize,
    /// Retries when creating producers and consumers.
    pub retry: RetryPolicy,
    /// Decoders of message kinds; add the application's own kinds here.
    pub registry: Arc<DecoderRegistry>,
    /// What the tt stream does with late messages.
    pub late_policy: LatePolicy,
    /// Commit (ack) each pack when the application asks for the next one, and on `close`
    /// (the default). Off: nothing is acked until the application calls `commit`.
    pub auto_commit: bool,
    /// Most messages the tt stream holds for one channel while waiting for the other channels'
    /// ticks (a channel that sends without ticking). At the cap the stream stops reading that
    /// channel and reports it (`TtMsgStream::stats().capped`, a `tracing` warning); it resumes
    /// by itself as soon as the channel's consumer has a tick queued, so it then holds at most
    /// this plus `buffer` messages of that channel. If the channel's consumer ends (closed,
    /// failed for good) while capped, the stream reads on to the end and reports it as it would
    /// for any channel.
    pub max_held_per_channel: usize,
}

impl Default for StreamOptions {
    fn default() -> Self {
        StreamOptions {
            buffer: 1024,
            retry: RetryPolicy::default(),
            registry: Arc::new(DecoderRegistry::default()),
            late_policy: LatePolicy::default(),
            auto_commit: true,
            max_held_per_channel: 1 << 16,
        }
    }
}

impl StreamOptions {
    /// Same options with queue capacity `buffer` per channel.
    pub fn with_buffer(mut self, buffer: usize) -> Self {
        self.buffer = buffer;
        self
    }

    /// Same options with `retry` for creating producers and consumers.
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Same options decoding with `registry`.
    pub fn with_registry(mut self, registry: Arc<DecoderRegistry>) -> Self {
        self.registry = registry;
        self
    }

    /// Same options with `late_policy` for the tt stream.
    pub fn with_late_policy(mut self, late_policy: LatePolicy) -> Self {
        self.late_policy = late_policy;
        self
    }

    /// Same options with auto-commit on or off.
    pub fn with_auto_commit(mut self, auto_commit: bool) -> Self {
        self.auto_commit = auto_commit;
        self
    }

    /// Same options with the tt stream's per-channel cap of messages held without a tick.
    pub fn with_max_held_per_channel(mut self, max_held: usize) -> Self {
        self.max_held_per_channel = max_held;
        self
    }
}
