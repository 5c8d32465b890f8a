//! The facade's error type.

use std::path::PathBuf;

/// Failures of configuration, wiring and positions files (the command-line tool adds its own).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The configuration is invalid; `origin` names the file and environment overrides.
    #[error("config {origin}: {message}")]
    Config {
        /// Where the configuration came from.
        origin: String,
        /// What is wrong, naming the key.
        message: String,
    },
    /// The configured backend was not compiled into this build.
    #[error("backend {0:?} is not compiled in: enable the cargo feature of the same name")]
    BackendNotCompiled(&'static str),
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
    /// A positions file could not be parsed.
    #[error("positions file {path}: {message}")]
    Positions {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A migration's source and target are one store: copying a channel onto itself would
    /// double it. Found before anything is written.
    #[error("migration source and target are the same store ({0}); name two different stores")]
    SameStore(String),
    /// A channel to migrate does not exist at the source. Found before anything is written.
    #[error("channel {channel:?} does not exist at the migration source")]
    UnknownSourceChannel {
        /// The channel.
        channel: String,
    },
    /// Positions given to a migration do not belong to its channels or its source (another
    /// channel, a repeated channel, an id the source backend cannot parse or does not hold).
    /// Found before anything is written.
    #[error("positions to translate: {0}")]
    MigrationPositions(String),
    /// A target channel ends with a message no migration copied: producers already write
    /// there, or it is another application's channel. Copying after it would interleave two
    /// histories, so the migration refuses before writing anything.
    #[error(
        "target channel {channel:?} ends with a message that no migration copied (its id \
         {id}); the channel is in use: stop its producers or migrate to another channel"
    )]
    ForeignTarget {
        /// The channel.
        channel: String,
        /// The target's id of that message, as `msgstream` prints ids.
        id: String,
    },
    /// A message a position names is not at the target although the migration copied its
    /// channel (the target channel was changed, or lost messages to retention).
    #[error(
        "position of channel {channel:?} names source message {id}, which is not at the target"
    )]
    PositionNotMigrated {
        /// The channel.
        channel: String,
        /// The source id, lowercase hex.
        id: String,
    },
    /// A stream or backend failure.
    #[error(transparent)]
    Stream(#[from] msgstream::Error),
}

impl Error {
    /// Whether retrying the failed call may succeed: only a stream or backend failure can be
    /// transient (see [`msgstream::Error::is_transient`]); a bad configuration, a missing
    /// backend or a bad positions file stays so, and a failed file access is reported as it
    /// is rather than guessed at.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Stream(e) => e.is_transient(),
            Error::Config { .. }
            | Error::BackendNotCompiled(_)
            | Error::Io { .. }
            | Error::Positions { .. }
            | Error::SameStore(_)
            | Error::UnknownSourceChannel { .. }
            | Error::MigrationPositions(_)
            | Error::ForeignTarget { .. }
            | Error::PositionNotMigrated { .. } => false,
        }
    }
}

/// Result alias of the facade.
pub type Result<T, E = Error> = std::result::Result<T, E>;
