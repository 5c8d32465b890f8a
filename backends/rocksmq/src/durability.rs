//! How far a write has gone when `send` returns (the idea of fjall's `PersistMode`).

/// What an acknowledged write survives.
///
/// The write-ahead log is always on: every acknowledged message is in the WAL before `send`
/// returns, so it is never lost by a *process* crash (panic, SIGKILL, OOM kill). What this enum
/// chooses is whether the WAL is also forced to stable storage, which decides what survives a
/// *machine* crash (power loss, kernel panic):
///
/// | variant | process crash | power loss | cost per write group |
/// |---|---|---|---|
/// | [`Durability::Buffered`] | survives | the last moments may be lost | a `write(2)` into the page cache |
/// | [`Durability::SyncData`] | survives | survives | an `fdatasync(2)` |
/// | [`Durability::SyncAll`] | survives | survives, metadata included | an `fsync(2)` |
///
/// Concurrent producers are group-committed, so one sync covers every batch in the group: with
/// many producers the sync cost is shared, with one producer each send pays it whole (milliseconds
/// on a disk, far more than the write itself). The default is [`Durability::Buffered`], as in
/// Milvus's rocksmq.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Durability {
    /// WAL written to the OS, not synced: survives process crashes, not power loss.
    #[default]
    Buffered,
    /// WAL synced with `fdatasync` before acknowledging: survives power loss.
    SyncData,
    /// WAL synced with `fsync` (file metadata too) before acknowledging.
    SyncAll,
}

impl Durability {
    /// Whether each write group waits for the WAL to reach stable storage.
    pub fn syncs(self) -> bool {
        !matches!(self, Durability::Buffered)
    }

    pub(crate) fn write_options(self) -> rocksdb::WriteOptions {
        let mut options = rocksdb::WriteOptions::default();
        options.disable_wal(false);
        options.set_sync(self.syncs());
        options
    }
}
