//! How to open a queue: path, retention and durability.

use std::path::PathBuf;
use std::time::Duration;

use msgstream::{Error, Result};

use crate::{AckWrite, Durability};

/// Options of [`crate::Rocksmq::open`] and [`crate::RocksmqClient::open`].
///
/// Retention (see [`crate::retention`]) deletes a page of a topic only when every consumer group
/// has acknowledged past it **and** it is older than `retention` or the topic holds more than
/// `retention_size_bytes`. The open tail page of a topic is never deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RocksmqOptions {
    /// Directory of the RocksDB database; created if missing.
    pub path: PathBuf,
    /// Acknowledged pages older than this are deleted (default 4320 minutes, Milvus's default).
    pub retention: Duration,
    /// A topic holding more than this many payload and property bytes loses its oldest acknowledged
    /// pages until it fits (default 8192 MiB).
    pub retention_size_bytes: u64,
    /// A page is closed once its messages hold this many bytes (default 64 MiB). Retention works
    /// on whole pages, so this is its granularity.
    pub page_size_bytes: u64,
    /// Consumer groups whose last ack or seek is older than this do not hold back retention
    /// (`None`, the default: every group does).
    pub ignore_groups_idle_for: Option<Duration>,
    /// How often the background retention pass (and the compaction that reclaims deleted space)
    /// runs (default 10 minutes); `None` disables it, leaving [`crate::Rocksmq::run_retention`].
    pub retention_interval: Option<Duration>,
    /// What an acknowledged write survives.
    pub sync: Durability,
    /// When a consumer's ack is written: by the `ack` call (the default) or grouped by a
    /// background thread (see [`AckWrite`]).
    pub ack_write: AckWrite,
    /// What opening does when recovery finds message ids missing (see [`Recovery`]).
    pub recovery: Recovery,
}

/// What [`crate::Rocksmq::open`] does when recovery finds that the write-ahead log lost records
/// (see [`crate::Rocksmq::lost_at_recovery`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Recovery {
    /// Open what survived, log an error per topic naming how many ids are gone, and list them
    /// in `lost_at_recovery`. The loss is then accepted: the next open does not report it again.
    #[default]
    Report,
    /// Refuse to open: `Error::Corrupt` naming the first topic, the first missing id and every
    /// topic's count. Every later strict open refuses too, until an open with
    /// [`Recovery::Report`] accepts the loss (or a backup is restored).
    Strict,
}

impl RocksmqOptions {
    /// Default options for a database at `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        RocksmqOptions {
            path: path.into(),
            retention: Duration::from_secs(4320 * 60),
            retention_size_bytes: 8192 * 1024 * 1024,
            page_size_bytes: 64 * 1024 * 1024,
            ignore_groups_idle_for: None,
            retention_interval: Some(Duration::from_secs(600)),
            sync: Durability::Buffered,
            ack_write: AckWrite::Immediate,
            recovery: Recovery::Report,
        }
    }

    /// Range checks: `InvalidArgument` naming the option.
    pub(crate) fn validate(&self) -> Result<()> {
        if self.page_size_bytes == 0 {
            return Err(Error::InvalidArgument(
                "page_size_bytes is 0: a page must hold at least one byte".into(),
            ));
        }
        self.ack_write.validate()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zero_page_size_is_refused_by_name() {
        let mut options = RocksmqOptions::new("/nonexistent");
        assert!(options.validate().is_ok());
        options.page_size_bytes = 0;
        match options.validate() {
            Err(Error::InvalidArgument(message)) => {
                assert!(message.contains("page_size_bytes"), "{message}")
            }
            other => panic!("expected InvalidArgument, got {other:?}"),
        }
    }
}
