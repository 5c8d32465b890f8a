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
            | Error::Positions { .. } => false,
        }
    }
}

/// Result alias of the facade.
pub type Result<T, E = Error> = std::result::Result<T, E>;
