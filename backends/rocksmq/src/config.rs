//! [`RocksmqConfig`]: the `[rocksmq]` section of a configuration file, in the units people write
//! (minutes, MiB), turned into the engine's [`RocksmqOptions`].

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::{AckWrite, Durability, Recovery, RocksmqOptions};

/// The longest `ack_group_ms`: acks made in that window are delivered again after a crash, so a
/// longer one is more likely a unit mistake than a wish.
pub const MAX_ACK_GROUP_MS: u64 = 60_000;

/// Settings of the embedded queue as a configuration file states them; every key is optional
/// and unknown keys are refused.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RocksmqConfig {
    /// Database directory, created if missing.
    pub path: PathBuf,
    /// Acknowledged pages older than this are deleted.
    pub retention_minutes: u64,
    /// A topic above this size loses its oldest acknowledged pages.
    pub retention_size_mb: u64,
    /// Page size, the granularity of retention (at least 1).
    pub page_size_mb: u64,
    /// What an acknowledged write survives: `buffered`, `sync_data` or `sync_all`.
    pub sync: Durability,
    /// Retention ignores consumer groups idle (no ack or seek) for this long, so an abandoned
    /// group does not pin data forever; 0 never ignores a group.
    pub ignore_groups_idle_minutes: u64,
    /// 0: a consumer's ack is written before it returns. N (at most [`MAX_ACK_GROUP_MS`]): acks
    /// are grouped and written by a background thread within N ms, so a process crash may
    /// deliver the messages acked in the last N ms again (see [`AckWrite`]).
    pub ack_group_ms: u64,
    /// What opening does when recovery finds message ids missing: `report` (log each topic's
    /// loss and open) or `strict` (refuse until a reporting open accepts the loss).
    pub recovery: Recovery,
}

impl Default for RocksmqConfig {
    fn default() -> Self {
        RocksmqConfig {
            path: PathBuf::from("./data/rocksmq"),
            retention_minutes: 4320,
            retention_size_mb: 8192,
            page_size_mb: 64,
            sync: Durability::Buffered,
            ignore_groups_idle_minutes: 0,
            ack_group_ms: 0,
            recovery: Recovery::Report,
        }
    }
}

impl From<&RocksmqConfig> for RocksmqOptions {
    fn from(config: &RocksmqConfig) -> Self {
        let minutes = |m: u64| Duration::from_secs(m.saturating_mul(60));
        let mut options = RocksmqOptions::new(&config.path);
        options.retention = minutes(config.retention_minutes);
        options.retention_size_bytes = config.retention_size_mb.saturating_mul(1 << 20);
        options.page_size_bytes = config.page_size_mb.saturating_mul(1 << 20);
        options.ignore_groups_idle_for = (config.ignore_groups_idle_minutes > 0)
            .then(|| minutes(config.ignore_groups_idle_minutes));
        options.ack_write = match config.ack_group_ms {
            0 => AckWrite::Immediate,
            ms => AckWrite::Grouped(Duration::from_millis(ms)),
        };
        options.sync = config.sync;
        options.recovery = config.recovery;
        options
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_the_engines() {
        let options = RocksmqOptions::from(&RocksmqConfig::default());
        assert_eq!(options, RocksmqOptions::new("./data/rocksmq"));
    }

    #[test]
    fn file_units_become_engine_units() {
        let config = RocksmqConfig {
            retention_minutes: 2,
            retention_size_mb: 3,
            page_size_mb: 4,
            sync: Durability::SyncAll,
            ignore_groups_idle_minutes: 5,
            ack_group_ms: 7,
            ..RocksmqConfig::default()
        };
        let options = RocksmqOptions::from(&config);
        assert_eq!(options.retention, Duration::from_secs(120));
        assert_eq!(options.retention_size_bytes, 3 << 20);
        assert_eq!(options.page_size_bytes, 4 << 20);
        assert_eq!(options.sync, Durability::SyncAll);
        assert_eq!(
            options.ignore_groups_idle_for,
            Some(Duration::from_secs(300))
        );
        assert_eq!(
            options.ack_write,
            AckWrite::Grouped(Duration::from_millis(7))
        );
    }
}
