//! The facade's error type.

use std::path::PathBuf;

/// Failures of configuration, wiring and the command-line tool.
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
    /// The backend refused to delete a subscription or channel because a consumer is reading
    /// it: deleting it under that consumer would pull its data away mid-read.
    #[error("cannot {action}: {detail}; stop that consumer first")]
    Busy {
        /// What was asked, e.g. `delete group "g" of channel "t"`.
        action: String,
        /// The backend's words.
        detail: String,
    },
    /// A command-line value is out of range in a way the argument parser cannot see alone
    /// (a combination of options).
    #[error("{0}")]
    Usage(String),
    /// A line of `produce --input` is not a message; `source` is the file or `stdin`.
    #[error("{source_name} line {line}: {message}")]
    Input {
        /// The file, or `stdin`.
        source_name: String,
        /// 1-based line number.
        line: u64,
        /// What is wrong with it.
        message: String,
    },
    /// Standard output was closed by its reader (`| head`): the command stops quietly, as
    /// command-line tools do, instead of failing.
    #[error("standard output was closed")]
    OutputClosed,
    /// Standard output could not be written for another reason (disk full, …).
    #[error("cannot write to standard output: {0}")]
    Output(std::io::Error),
    /// A stream or backend failure.
    #[error(transparent)]
    Stream(#[from] msgstream::Error),
}

/// Result alias of the facade.
pub type Result<T, E = Error> = std::result::Result<T, E>;
