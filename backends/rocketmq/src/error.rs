//! The one error type of the RocketMQ client, and its mapping onto `msgstream::Error`.

use std::time::Duration;

/// Backend name used in `msgstream::Error` values.
pub const BACKEND: &str = "rocketmq";

/// Everything the RocketMQ client can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A socket could not be opened, written or read.
    #[error("connection to {addr}: {source}")]
    Io {
        /// Broker or name server address.
        addr: String,
        /// The underlying failure.
        source: std::io::Error,
    },
    /// The connection closed (or is backing off after a failed connect) before the answer came.
    #[error("connection to {addr} lost: {reason}")]
    Disconnected {
        /// Broker or name server address.
        addr: String,
        /// Why.
        reason: String,
    },
    /// No answer within the request timeout.
    #[error("request {code} to {addr} timed out after {timeout:?}")]
    Timeout {
        /// Request code.
        code: i32,
        /// Destination.
        addr: String,
        /// The timeout that expired.
        timeout: Duration,
    },
    /// Bytes from the wire that do not follow the protocol (frames, headers, stored messages).
    #[error("protocol error: {0}")]
    Protocol(String),
    /// A stored record that cannot be read back: CRC mismatch, truncated, an unknown
    /// compression type, a body that does not decompress or inflates past the message size
    /// limit. Permanent: every pull of that offset returns the same bytes.
    #[error("corrupt record in topic {topic:?} queue {queue_id} at offset {offset}: {detail}")]
    CorruptRecord {
        /// Broker-side topic.
        topic: String,
        /// Queue id.
        queue_id: i32,
        /// Queue offset of the record (or of the first one not read).
        offset: i64,
        /// What is wrong with it.
        detail: String,
    },
    /// A frame larger than the configured limit; refused before allocating it.
    #[error("frame of {len} bytes exceeds the {limit}-byte limit")]
    FrameTooLarge {
        /// Announced length.
        len: usize,
        /// The limit.
        limit: usize,
    },
    /// The server answered with a non-success response code.
    #[error("request {request} failed with code {code}: {remark}")]
    Response {
        /// Request code.
        request: i32,
        /// Response code (see `protocol::codes`).
        code: i32,
        /// The server's remark.
        remark: String,
    },
    /// The name servers know no route for the topic.
    #[error("topic {0:?} has no route (it does not exist)")]
    TopicNotFound(String),
    /// A queue that the topic's route does not contain.
    #[error("queue {queue} of topic {topic:?} does not exist")]
    NoSuchQueue {
        /// Topic.
        topic: String,
        /// What was asked for.
        queue: String,
    },
    /// A caller-supplied value is not usable.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The operation conflicts with the consumer's state (assign after subscribe, poll before start, …).
    #[error("illegal state: {0}")]
    IllegalState(String),
    /// The client or consumer was shut down.
    #[error("{0} is shut down")]
    Closed(&'static str),
}

impl Error {
    /// Whether retrying (possibly on another broker) may succeed.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Io { .. } | Error::Disconnected { .. } | Error::Timeout { .. } => true,
            Error::Response { code, .. } => crate::protocol::codes::is_transient(*code),
            _ => false,
        }
    }
}

/// Result alias of the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<Error> for msgstream::Error {
    fn from(e: Error) -> Self {
        match e {
            Error::Timeout { timeout, .. } => msgstream::Error::Timeout(timeout),
            Error::Protocol(m) => msgstream::Error::Decode(m),
            Error::CorruptRecord {
                topic,
                offset,
                detail,
                ..
            } => msgstream::Error::Corrupt {
                channel: topic,
                id: msgstream::mq::MessageId::from_u64(u64::try_from(offset).unwrap_or(0)),
                detail,
            },
            Error::InvalidArgument(m) => msgstream::Error::InvalidArgument(m),
            Error::NoSuchQueue { .. } => msgstream::Error::InvalidArgument(e.to_string()),
            Error::Closed(what) => msgstream::Error::Closed(what),
            other => {
                let transient = other.is_transient();
                msgstream::Error::backend_source(BACKEND, other.to_string(), transient, other)
            }
        }
    }
}
