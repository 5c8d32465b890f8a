//! The RocksDB handle: opening, column families, error mapping and the closed state.
//!
//! The database lives behind a read-write lock holding an `Option`: every operation holds a read
//! guard while it touches RocksDB, and `close` takes the write guard and drops the database. So
//! close waits for operations in flight, releases RocksDB's `LOCK` file at once (the same process
//! can reopen the path), and every later operation sees `None` and returns `Error::Closed`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use msgstream::{Error, Result};
use rocksdb::{ColumnFamily, ColumnFamilyDescriptor, ErrorKind, Options, DB};

use crate::keys::COLUMN_FAMILIES;
use crate::Durability;

/// Backend name used in errors.
pub(crate) const BACKEND: &str = "rocksmq";

/// RocksDB database options of a queue, public so that benchmarks can measure raw RocksDB with
/// exactly the same tuning.
///
/// RocksDB's own info log (`LOG`, rolled to `LOG.old.<time>` at each open and at
/// [`INFO_LOG_MAX_BYTES`]) is kept in the database directory, at most [`INFO_LOG_FILES`] files:
/// without a bound every open left one more file behind.
pub fn database_options() -> Options {
    let mut options = Options::default();
    options.create_if_missing(true);
    options.create_missing_column_families(true);
    options.set_max_background_jobs(2);
    options.set_keep_log_file_num(INFO_LOG_FILES);
    options.set_max_log_file_size(INFO_LOG_MAX_BYTES);
    options
}

/// How many RocksDB info log files (`LOG` and `LOG.old.*`) a database directory keeps.
pub const INFO_LOG_FILES: usize = 3;

/// The size at which RocksDB's info log is rolled over to a new file.
pub const INFO_LOG_MAX_BYTES: usize = 1024 * 1024;

/// Column-family options of a queue (every column family uses these).
///
/// Table indexes record each block's first key (`kBinarySearchWithFirstKey`), so a seek that
/// finds nothing within its upper bound stops at the index without reading the block beyond:
/// a topic's seek never reads (and decompresses) a neighbouring topic's message, whatever its
/// size. Tables written before this setting keep their index; compactions rewrite them.
pub fn column_family_options() -> Options {
    let mut base = Options::default();
    let mut options = match base.get_options_from_string(FIRST_KEY_INDEX) {
        Ok(options) => options,
        Err(e) => {
            tracing::warn!(error = %e, "rocksmq: first-key table index not available; seeks may read neighbouring blocks");
            Options::default()
        }
    };
    options.set_compression_type(rocksdb::DBCompressionType::Lz4);
    options
}

/// The table option of [`column_family_options`], in RocksDB's option-string syntax (the
/// Rust binding has no setter for this index type).
pub(crate) const FIRST_KEY_INDEX: &str =
    "block_based_table_factory={index_type=kBinarySearchWithFirstKey}";

/// Maps a RocksDB error of operation `op` onto the core error: busy and timeout conditions are
/// transient, everything else permanent.
pub(crate) fn db_error(op: &str, e: rocksdb::Error) -> Error {
    let message = format!("{op}: {}", printable(e.as_ref()));
    let transient = matches!(
        e.kind(),
        ErrorKind::Busy | ErrorKind::TryAgain | ErrorKind::TimedOut | ErrorKind::Incomplete
    );
    Error::backend_source(BACKEND, message, transient, e)
}

/// Whether `e` is RocksDB refusing a `no_slowdown` write that it would have delayed.
pub(crate) fn is_stall(e: &rocksdb::Error) -> bool {
    e.kind() == ErrorKind::Incomplete
}

/// `text` with every control character escaped (`\0`, `\n`, `\u{1b}`): RocksDB errors quote
/// file contents, and a damaged file must not put raw bytes on a user's terminal.
pub(crate) fn printable(text: &str) -> String {
    text.chars()
        .flat_map(|c| -> Box<dyn Iterator<Item = char>> {
            if c.is_control() {
                Box::new(c.escape_debug())
            } else {
                Box::new(std::iter::once(c))
            }
        })
        .collect()
}

/// The error of a failed open of `path`, from RocksDB's error `kind` and `text`: another
/// holder's lock, an I/O failure (a full disk, a permission) or, only for anything else, a
/// directory that does not open as a database.
fn open_error(path: &Path, fresh: bool, kind: ErrorKind, text: &str) -> Error {
    let text = printable(text);
    let path = path.display();
    if kind == ErrorKind::IOError && text.contains("LOCK") {
        Error::backend(
            BACKEND,
            format!(
                "database {path} is locked: another process (or another open client) holds it ({text})"
            ),
        )
    } else if kind == ErrorKind::IOError {
        let why = if text.contains("No space left on device") {
            "the disk is full"
        } else {
            "an I/O error"
        };
        Error::backend(
            BACKEND,
            format!("cannot open the database {path}: {why} ({text}); free the cause and retry"),
        )
    } else if fresh {
        Error::backend(BACKEND, format!("creating {path}: {text}"))
    } else {
        Error::backend(
            BACKEND,
            format!(
                "{path} holds files but does not open as a rocksmq database; nothing was changed ({text})"
            ),
        )
    }
}

/// A borrowed open database, valid while the store's read guard is held.
pub(crate) struct Db<'a> {
    pub db: &'a DB,
    pub write_options: &'a rocksdb::WriteOptions,
}

impl Db<'_> {
    /// The handle of column family `name` (all are created at open).
    pub fn cf(&self, name: &str) -> Result<&ColumnFamily> {
        self.db
            .cf_handle(name)
            .ok_or_else(|| Error::backend(BACKEND, format!("column family {name:?} is missing")))
    }

    /// Writes `batch` with the queue's durability.
    pub fn write(&self, batch: rocksdb::WriteBatch) -> Result<()> {
        self.db
            .write_opt(batch, self.write_options)
            .map_err(|e| db_error("write", e))
    }

    /// Writes `batch` into the WAL without waiting for a sync, whatever the durability: for
    /// records whose loss on a power cut is harmless (an acknowledgement that rolls back means
    /// a redelivery, never a loss). It survives a process crash like every write.
    pub fn write_unsynced(&self, batch: rocksdb::WriteBatch) -> Result<()> {
        let mut options = rocksdb::WriteOptions::default();
        options.set_sync(false);
        self.db
            .write_opt(batch, &options)
            .map_err(|e| db_error("write", e))
    }
}

/// The database, closable.
pub(crate) struct Store {
    /// Shared so that the writer can keep a handle of its own (see [`Store::shared`]).
    db: RwLock<Option<Arc<DB>>>,
    /// Set before the database is dropped: a lock-free check for hot paths.
    closed: AtomicBool,
    write_options: rocksdb::WriteOptions,
    /// The same, with RocksDB's `no_slowdown`: a write that would wait out a write stall
    /// fails at once instead (see [`Store::write_options_without_waiting`]).
    write_options_without_waiting: rocksdb::WriteOptions,
    path: PathBuf,
}

impl Store {
    /// Opens (or creates) the database at `path`. A database held by another process (or another
    /// open client in this one) is a clear permanent error naming the path, not a panic.
    ///
    /// A database is created only where none exists: a missing path or an empty directory. Any
    /// other path must open as an existing database; if it does not (a `CURRENT` or manifest file
    /// removed or damaged, say) the error names the path and the cause, and every file is left as
    /// it was. Creating afresh there would make RocksDB delete the old tables on a later open.
    pub fn open(path: &Path, durability: Durability) -> Result<Store> {
        let mut options = database_options();
        options.set_use_fsync(durability == Durability::SyncAll);
        let fresh = is_absent_or_empty(path)?;
        if !fresh {
            check_looks_like_a_database(path)?;
        }
        options.create_if_missing(fresh);
        options.create_missing_column_families(fresh);
        let families = COLUMN_FAMILIES
            .iter()
            .map(|name| ColumnFamilyDescriptor::new(*name, column_family_options()));
        let db = DB::open_cf_descriptors(&options, path, families)
            .map_err(|e| open_error(path, fresh, e.kind(), e.as_ref()))?;
        Ok(Store {
            db: RwLock::new(Some(Arc::new(db))),
            closed: AtomicBool::new(false),
            write_options: durability.write_options(),
            write_options_without_waiting: {
                let mut options = durability.write_options();
                options.set_no_slowdown(true);
                options
            },
            path: path.to_path_buf(),
        })
    }

    /// Runs `f` on the open database; `Error::Closed` once closed.
    pub fn with<R>(&self, f: impl FnOnce(&Db<'_>) -> Result<R>) -> Result<R> {
        let guard = self
            .db
            .read()
            .map_err(|_| Error::backend(BACKEND, "database lock poisoned by a panic"))?;
        let db = guard
            .as_ref()
            .ok_or_else(|| Error::Closed("rocksmq client"))?;
        f(&Db {
            db,
            write_options: &self.write_options,
        })
    }

    /// A handle of the open database (`None` once closed), for the writer: it keeps one under
    /// its commit lock instead of taking the read lock on every commit (two atomic operations of
    /// a single-message append's few), and drops it before [`Store::close`], which therefore
    /// the engine calls under the commit lock.
    pub fn shared(&self) -> Option<Arc<DB>> {
        match self.db.read() {
            Ok(guard) => guard.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// The write options of the queue's durability.
    pub fn write_options(&self) -> &rocksdb::WriteOptions {
        &self.write_options
    }

    /// The write options of the queue's durability for a write on an async worker: one that
    /// RocksDB would delay (a write stall: too many memtables or level-0 files waiting for
    /// flushes and compactions) fails at once with [`is_stall`] instead of blocking.
    pub fn write_options_without_waiting(&self) -> &rocksdb::WriteOptions {
        &self.write_options_without_waiting
    }

    /// Whether [`Store::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Waits for operations in flight, flushes the WAL and drops the database (once every
    /// handle from [`Store::shared`] is dropped too: the engine closes the store only after the
    /// writer let go of its own).
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        let mut guard = match self.db.write() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Some(db) = guard.take() {
            if let Err(e) = db.flush_wal(true) {
                tracing::warn!(path = %self.path.display(), error = %e, "rocksmq: WAL sync at close failed");
            }
        }
    }
}

/// Whether `path` is missing or an empty directory: the only places a database is created.
fn is_absent_or_empty(path: &Path) -> Result<bool> {
    match std::fs::read_dir(path) {
        Ok(mut entries) => Ok(entries.next().is_none()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(true),
        Err(e) => Err(Error::backend(
            BACKEND,
            format!("cannot read {}: {e}", path.display()),
        )),
    }
}

/// Before RocksDB touches a non-empty directory (it would add its own `LOCK` and `LOG` files
/// even to open nothing): the directory must hold a `CURRENT` file naming a manifest that
/// exists. Anything else is refused with every file left exactly as it was.
fn check_looks_like_a_database(path: &Path) -> Result<()> {
    let refuse = |why: String| {
        Error::backend(
            BACKEND,
            format!(
                "{} holds files but is not a usable rocksmq database: {why}; nothing was changed",
                path.display()
            ),
        )
    };
    let current = match std::fs::read(path.join("CURRENT")) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(refuse("it has no CURRENT file".into()))
        }
        Err(e) => {
            return Err(refuse(format!(
                "its CURRENT file cannot be read ({})",
                printable(&e.to_string())
            )))
        }
    };
    let manifest = String::from_utf8_lossy(&current).trim().to_string();
    let shown = printable(&manifest);
    if !manifest.starts_with("MANIFEST-")
        || manifest.contains('/')
        || manifest.chars().any(char::is_control)
    {
        return Err(refuse(format!(
            "its CURRENT file does not name a manifest (it holds \"{shown}\")"
        )));
    }
    if !path.join(&manifest).is_file() {
        return Err(refuse(format!(
            "the manifest {shown} named by CURRENT is missing"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_bytes_are_escaped() {
        assert_eq!(
            printable("MANIFEST-000005\0\n\u{1b}[31m"),
            "MANIFEST-000005\\0\\n\\u{1b}[31m"
        );
        assert_eq!(printable("plain é text"), "plain é text");
    }

    #[test]
    fn a_full_disk_does_not_read_like_corruption() {
        let path = Path::new("/data/q");
        let text = "IO error: No space left on device: While appending to file: /data/q/000004.log";
        let message = open_error(path, false, ErrorKind::IOError, text).to_string();
        assert!(message.contains("the disk is full"), "{message}");
        assert!(
            !message.contains("does not open as a rocksmq database"),
            "{message}"
        );
        let locked = "IO error: While lock file: /data/q/LOCK: Resource temporarily unavailable";
        let message = open_error(path, false, ErrorKind::IOError, locked).to_string();
        assert!(message.contains("is locked"), "{message}");
        let corrupt = "Corruption: bad record length";
        let message = open_error(path, false, ErrorKind::Corruption, corrupt).to_string();
        assert!(
            message.contains("does not open as a rocksmq database"),
            "{message}"
        );
        let raw = "Corruption: CURRENT holds MANIFEST-1\0";
        let message = open_error(path, false, ErrorKind::Corruption, raw).to_string();
        assert!(
            !message.contains('\0') && message.contains("\\0"),
            "{message}"
        );
    }
}
