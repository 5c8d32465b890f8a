//! What a backend can do, asked at run time.

/// How strongly a backend keeps the order of one channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ordering {
    /// Every reader of a channel sees the producer's order, always.
    Strict,
    /// Usually in order, but requeues or queue spill-over can reorder (upstream nsqd).
    BestEffort,
}

/// The optional parts of the mq contract a backend supports.
///
/// A call to an unsupported part returns [`crate::Error::Unsupported`]; it never silently does
/// nothing. The conformance suite asserts exactly that for every `false` here.
///
/// `#[non_exhaustive]`: start from [`Capabilities::ALL`] and switch off what a backend lacks, so
/// that a capability added later does not break backends outside this crate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Capabilities {
    /// `Consumer::seek` to any message id.
    pub seek: bool,
    /// `Client::create_reader` (non-durable cursors).
    pub readers: bool,
    /// `Consumer::latest_message_id`.
    pub latest_id: bool,
    /// Subscriptions keep their acked position across consumer restarts and client reopen.
    pub durable_subscriptions: bool,
    /// `Client::delete_subscription`.
    pub delete_subscriptions: bool,
    /// `Client::delete_topic`.
    pub delete_topics: bool,
    /// Seeking by time: `Client::time_lower_bound` (so `Client::message_id_at_time`,
    /// `InitialPosition::Timestamp` and the streams' `seek_to_time`). How exact a backend's
    /// answer is, and under which configuration, its docs say.
    pub seek_time: bool,
    /// Per-channel ordering guarantee.
    pub ordering: Ordering,
}

impl Capabilities {
    /// Everything supported, strictly ordered.
    pub const ALL: Capabilities = Capabilities {
        seek: true,
        readers: true,
        latest_id: true,
        durable_subscriptions: true,
        delete_subscriptions: true,
        delete_topics: true,
        seek_time: true,
        ordering: Ordering::Strict,
    };
}
