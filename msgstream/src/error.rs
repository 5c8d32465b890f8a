//! The one error type of the core crate, shared by every backend through the mq traits.

use std::time::Duration;

use crate::base::MessageId;

/// Every failure the core or a backend can report through the mq layer and the streams.
///
/// Backends map their own failures onto these variants; anything specific to one broker goes into
/// [`Error::Backend`] with a message that names the broker operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The backend does not offer this capability (see [`crate::mq::Capabilities`]).
    #[error("unsupported by the {backend} backend: {what}")]
    Unsupported {
        /// Backend name, e.g. `"nsq"`.
        backend: &'static str,
        /// The operation that was asked for.
        what: &'static str,
    },
    /// An operation needs a channel the stream is not subscribed to (or has no producer for).
    #[error("not subscribed to channel {channel:?}")]
    NotSubscribed {
        /// The channel that was named.
        channel: String,
    },
    /// A subscription already has a live consumer: subscriptions are exclusive, as Milvus's are.
    /// Close the other consumer first (or use another subscription name).
    #[error("subscription {subscription:?} of channel {topic:?} already has a live consumer")]
    SubscriptionBusy {
        /// The channel.
        topic: String,
        /// The subscription (consumer group).
        subscription: String,
    },
    /// A seek or reader start names a message the channel no longer holds (retention deleted
    /// it). Continuing at later data would silently skip messages, so it is refused.
    #[error(
        "channel {channel:?} no longer holds {id:?}: the oldest message still held is {oldest:?}"
    )]
    BelowRetention {
        /// The channel.
        channel: String,
        /// The id asked for.
        id: MessageId,
        /// The oldest id still held (`None` when retention emptied the channel).
        oldest: Option<MessageId>,
    },
    /// A seek or reader start names a message the channel has not assigned yet. Seeking to the
    /// newest id (exclusive) is how to start at the end; an id beyond it is refused on every
    /// backend, so a foreign or corrupt position never silently skips what is produced next.
    #[error("channel {channel:?} has no message {id:?} yet: the newest is {latest:?}")]
    PastEnd {
        /// The channel.
        channel: String,
        /// The id asked for.
        id: MessageId,
        /// The newest id held (`None` for an empty channel).
        latest: Option<MessageId>,
    },
    /// A stored record cannot be read back: the store is damaged at this message.
    #[error("corrupt record in channel {channel:?} at {id:?}: {detail}")]
    Corrupt {
        /// The channel.
        channel: String,
        /// The id of the damaged record.
        id: MessageId,
        /// What is wrong with it.
        detail: String,
    },
    /// The channel does not exist on the backend (or was deleted).
    #[error("channel {channel:?} does not exist")]
    UnknownChannel {
        /// The channel that was named.
        channel: String,
    },
    /// The stream's producing is switched off (`enable_produce(false)`, Milvus's
    /// `ForceEnableProduce`); nothing was written.
    #[error("producing is disabled on this stream")]
    ProduceDisabled,
    /// A caller-supplied value is invalid: empty channel name, mismatched row counts, …
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// Bytes could not be decoded: payloads, message ids, positions.
    #[error("decode error: {0}")]
    Decode(String),
    /// The client, producer, consumer, reader or stream was closed.
    #[error("{0} is closed")]
    Closed(&'static str),
    /// An operation did not complete in time.
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    /// The delivery a message came from is gone (the consumer seeked or reconnected since), so
    /// acking it would move the wrong cursor. Receive it again and ack the new delivery.
    #[error("stale delivery: {0}")]
    StaleDelivery(String),
    /// A seek failed after the consumer had already moved to its target, and the backend
    /// could not undo the move: the consumer now reads from the seek target. A backend that
    /// cannot tell whether it moved says so with this too. Streams put such a channel back
    /// and report `source`.
    #[error("seek of channel {channel:?} failed after the consumer moved to its target: {source}")]
    SeekMoved {
        /// The channel.
        channel: String,
        /// Why the seek failed.
        #[source]
        source: Box<Error>,
    },
    /// A message arrived with a timestamp at or below a pack end already emitted (only possible on
    /// a backend that reorders); see [`crate::tt::LatePolicy`].
    #[error(
        "late message on channel {channel:?}: timestamp {timestamp} <= emitted end_ts {end_ts}"
    )]
    LateMessage {
        /// Channel the message came from.
        channel: String,
        /// The message's end timestamp.
        timestamp: u64,
        /// The end timestamp of the last pack already emitted.
        end_ts: u64,
    },
    /// A broker-side or storage failure; `transient` failures may succeed when retried.
    #[error("{backend} backend error: {message}")]
    Backend {
        /// Backend name.
        backend: &'static str,
        /// What failed, in the backend's words.
        message: String,
        /// Whether retrying the same call may succeed (connection refused, broker busy, …).
        transient: bool,
        /// The backend's own error, when there is one, for callers that inspect it
        /// (`downcast_ref`); `message` already says what it says.
        #[source]
        source: Option<BoxError>,
    },
}

/// An underlying error of any kind, as [`Error::Backend`] carries it.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

impl Error {
    /// A permanent backend failure, described by `message`.
    pub fn backend(backend: &'static str, message: impl Into<String>) -> Self {
        Error::Backend {
            backend,
            message: message.into(),
            transient: false,
            source: None,
        }
    }

    /// A backend failure that may succeed on retry, described by `message`.
    pub fn transient(backend: &'static str, message: impl Into<String>) -> Self {
        Error::Backend {
            backend,
            message: message.into(),
            transient: true,
            source: None,
        }
    }

    /// A backend failure caused by `source` (the backend's own error, kept as the
    /// [`std::error::Error::source`] of this one so a caller can inspect it); `message` says
    /// what failed, the cause included, as [`Error::Backend`]'s display is `message` alone.
    pub fn backend_source(
        backend: &'static str,
        message: impl Into<String>,
        transient: bool,
        source: impl Into<BoxError>,
    ) -> Self {
        Error::Backend {
            backend,
            message: message.into(),
            transient,
            source: Some(source.into()),
        }
    }

    /// Whether the failure is final for the channel it concerns: retrying the same call, or
    /// receiving again, cannot succeed (corrupt data, a closed consumer, a refused argument).
    /// Streams end on such an error instead of retrying it forever.
    pub fn is_permanent(&self) -> bool {
        matches!(
            self,
            Error::Corrupt { .. }
                | Error::Closed(_)
                | Error::InvalidArgument(_)
                | Error::NotSubscribed { .. }
                | Error::UnknownChannel { .. }
                | Error::Unsupported { .. }
                | Error::BelowRetention { .. }
                | Error::Backend {
                    transient: false,
                    ..
                }
        )
    }

    /// Whether retrying the failed call may succeed: a timeout, or a backend failure the
    /// backend judged transient (connection refused, broker busy, …). Every other variant is a
    /// refusal or a state that the same call meets again; each is listed, so a new variant
    /// must say which it is.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Backend { transient, .. } => *transient,
            Error::Timeout(_) => true,
            Error::Unsupported { .. }
            | Error::NotSubscribed { .. }
            | Error::SubscriptionBusy { .. }
            | Error::BelowRetention { .. }
            | Error::PastEnd { .. }
            | Error::Corrupt { .. }
            | Error::UnknownChannel { .. }
            | Error::ProduceDisabled
            | Error::InvalidArgument(_)
            | Error::Decode(_)
            | Error::Closed(_)
            | Error::StaleDelivery(_)
            | Error::SeekMoved { .. }
            | Error::LateMessage { .. } => false,
        }
    }
}

impl From<prost::DecodeError> for Error {
    fn from(e: prost::DecodeError) -> Self {
        Error::Decode(e.to_string())
    }
}

/// Result alias of the core crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn a_backend_error_keeps_its_cause() {
        let cause = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let error = Error::backend_source("nsq", format!("dial: {cause}"), true, cause);
        assert!(error.is_transient() && !error.is_permanent());
        assert_eq!(error.to_string(), "nsq backend error: dial: refused");
        let source = error.source().expect("the cause is kept");
        let io = source
            .downcast_ref::<std::io::Error>()
            .expect("as its own type");
        assert_eq!(io.kind(), std::io::ErrorKind::ConnectionRefused);
        assert!(Error::backend("nsq", "gone").source().is_none());
    }
}
