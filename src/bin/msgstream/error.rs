//! The command-line tool's error: the facade's failures, and what only a command line meets
//! (values out of range, input lines, its standard output, deletions refused under a reader).

/// Every failure of a `msgstream` command; each ends the command with `error: …` on stderr
/// (exit 1), except [`Error::OutputClosed`], a quiet stop.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A configuration, wiring, positions-file, stream or backend failure.
    #[error(transparent)]
    Facade(#[from] msgstream_facade::Error),
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
    /// `consume` read messages the stream reported instead of delivering (late for every tt
    /// pack, or undecodable): the run ends with this after printing what it did deliver.
    #[error("{count} message(s) were reported and are in no pack (the first: {first})")]
    Undelivered {
        /// How many.
        count: u64,
        /// The first one's report.
        first: String,
    },
    /// Standard output was closed by its reader (`| head`): the command stops quietly, as
    /// command-line tools do, instead of failing.
    #[error("standard output was closed")]
    OutputClosed,
    /// Standard output could not be written for another reason (disk full, …).
    #[error("cannot write to standard output: {0}")]
    Output(std::io::Error),
}

impl From<msgstream_facade::msgstream::Error> for Error {
    fn from(e: msgstream_facade::msgstream::Error) -> Self {
        Error::Facade(e.into())
    }
}

/// Result alias of the command-line tool.
pub type Result<T, E = Error> = std::result::Result<T, E>;
