//! Where a subscription's spool lives and who holds it: `<dir>/<topic>@<subscription>.spool`,
//! with a `.lock` file beside it locked (`flock`) while a consumer has the spool open.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};

use msgstream::{Error, Result};

use super::record::HEADER;
use super::{io, Spool};

/// The file stem of a subscription's spool: `@` is not an NSQ name character, so the pair
/// maps to one name and no name leaves the directory.
fn stem(topic: &str, subscription: &str) -> String {
    format!("{topic}@{subscription}")
}

/// The spool file and its lock file.
pub(super) fn paths(dir: &Path, topic: &str, subscription: &str) -> (PathBuf, PathBuf) {
    let stem = stem(topic, subscription);
    (
        dir.join(format!("{stem}.spool")),
        dir.join(format!("{stem}.lock")),
    )
}

/// Locks `lock`, or reports the subscription busy.
pub(super) fn lock(path: &Path, topic: &str, subscription: &str) -> Result<File> {
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| io(path, "open the lock file", e))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(TryLockError::WouldBlock) => Err(Error::SubscriptionBusy {
            topic: topic.to_string(),
            subscription: subscription.to_string(),
        }),
        Err(TryLockError::Error(e)) => Err(io(path, "lock", e)),
    }
}

impl Spool {
    /// Whether `(topic, subscription)` has a spool that holds anything but its magic: a
    /// subscription with unacked spooled messages must be read through the spool, whatever
    /// consumer asks for it.
    pub(crate) fn exists_with_data(dir: &Path, topic: &str, subscription: &str) -> bool {
        let (path, _) = paths(dir, topic, subscription);
        std::fs::metadata(path).is_ok_and(|m| m.len() > HEADER)
    }

    /// Deletes the spool of `(topic, subscription)`, unless a consumer holds it.
    pub(crate) fn remove(dir: &Path, topic: &str, subscription: &str) -> Result<()> {
        let (path, lock_path) = paths(dir, topic, subscription);
        if !lock_path.exists() && !path.exists() {
            return Ok(());
        }
        let _lock = lock(&lock_path, topic, subscription)?;
        for p in [&path, &lock_path] {
            match std::fs::remove_file(p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io(p, "remove", e)),
            }
        }
        Ok(())
    }

    /// Deletes the spools of every subscription of `topic`, unless a consumer holds one.
    pub(crate) fn remove_topic(dir: &Path, topic: &str) -> Result<()> {
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(io(dir, "list", e)),
        };
        let prefix = format!("{topic}@");
        for entry in entries {
            let entry = entry.map_err(|e| io(dir, "list", e))?;
            let name = entry.file_name();
            let Some(subscription) = name
                .to_str()
                .and_then(|n| n.strip_prefix(&prefix))
                .and_then(|n| n.strip_suffix(".lock"))
            else {
                continue;
            };
            Spool::remove(dir, topic, subscription)?;
        }
        Ok(())
    }
}
