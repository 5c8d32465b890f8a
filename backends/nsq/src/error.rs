//! The one error type of the NSQ client.

use std::time::Duration;

use crate::codec::{CodecError, ServerError};

/// Every failure of the NSQ client.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A socket failed or closed.
    #[error("{addr}: {source}")]
    Io {
        /// The nsqd or lookupd address.
        addr: String,
        /// The failure.
        source: std::io::Error,
    },
    /// The server sent something the codec refuses; the connection is closed.
    #[error("{addr}: {source}")]
    Codec {
        /// The nsqd address.
        addr: String,
        /// What was wrong.
        source: CodecError,
    },
    /// The server answered with an error frame.
    #[error("{addr}: {} {}", .error.code, .error.text)]
    Server {
        /// The nsqd address.
        addr: String,
        /// Code and text.
        error: ServerError,
    },
    /// The server sent a reply that does not fit the command.
    #[error("{addr}: unexpected reply: {what}")]
    Protocol {
        /// The nsqd or lookupd address.
        addr: String,
        /// What was unexpected.
        what: String,
    },
    /// A read, write or reply did not come in time.
    #[error("{addr}: {what} timed out after {after:?}")]
    Timeout {
        /// The peer.
        addr: String,
        /// What was waited for.
        what: &'static str,
        /// How long.
        after: Duration,
    },
    /// Refused before sending: a bad name, an empty or oversized body, a bad option.
    #[error("invalid: {0}")]
    Invalid(String),
    /// The server lacks what was asked (auth, partitions, offsets).
    #[error("{addr}: unsupported: {what}")]
    Unsupported {
        /// The nsqd address.
        addr: String,
        /// What is missing.
        what: String,
    },
    /// No nsqd could be reached or discovered.
    #[error("no nsqd available: {0}")]
    NoServer(String),
    /// The connection, producer or consumer was closed.
    #[error("{0} is closed")]
    Closed(&'static str),
}

impl Error {
    /// Whether trying again (possibly on another nsqd) may succeed.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Io { .. } | Error::Timeout { .. } | Error::NoServer(_) | Error::Closed(_) => {
                true
            }
            Error::Server { error, .. } => matches!(
                error.code.as_str(),
                "E_PUB_FAILED"
                    | "E_MPUB_FAILED"
                    | "E_DPUB_FAILED"
                    | "E_FAILED_ON_NOT_LEADER"
                    | "E_FAILED_ON_NOT_WRITABLE"
                    | "E_PUB_TOO_MUCH_WAITING"
            ),
            _ => false,
        }
    }
}

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
