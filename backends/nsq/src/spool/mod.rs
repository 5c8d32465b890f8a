//! The spool: a local, append-only file that holds a subscription's messages from the moment
//! they are FINed on the server until the application acks them.
//!
//! **Why.** Where the server has no ordered channels with a settable commit point (upstream
//! nsqd, or the fork without `nsqd_http`), a consumer that must see a channel in order reads it
//! one message in flight at a time (RDY 1). nsqd then sends the next message only once the
//! previous one is answered, while the timetick stream acks a message only after the
//! application had the pack it belongs to, which holds several messages of each channel. So the
//! message must be FINed on receipt, and from then on the server has forgotten it: the spool is
//! where it stays until it is acked, and a restart replays the spool's unacked messages, in
//! order, before reading on. Restarting from the subscription stays at-least-once.
//!
//! **Format.** `MAGIC`, then records `u32 len ‖ u32 crc32(body) ‖ body`, big-endian. A body is
//! `1 ‖ u64 seq ‖ [16] nsq id ‖ u64 offset ‖ u32 raw_size ‖ payload` for a message (offset and
//! raw size are the server's, `u64::MAX` and 0 when it assigns none), or `2 ‖ u64 seq` for the
//! ack of message `seq`. A record cut short at the end of the file is the write a crash
//! interrupted: its message was never FINed, so the server sends it again, and the record is
//! cut off. Any other damage is an error naming the file and the byte.
//!
//! **Durability** ([`SpoolSync`]): a record is written before its message is FINed, so a
//! message FINed on the server is in the spool even if the process dies; with
//! [`SpoolSync::SyncData`] it is on stable storage too. Acks are written, never synced: an ack
//! lost with the machine only makes a message come again.
//!
//! **Size.** When every message is acked the file is cut back to its magic; when acked
//! records fill most of a large file it is rewritten with the unacked ones only.
//!
//! **Exclusive.** A `.lock` file beside the spool is locked (`flock`) while a consumer holds
//! it, so two processes sharing `spool_dir` cannot both consume one subscription.

mod files;
mod record;

use std::collections::{BTreeMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use msgstream::{Error, Result};
use serde::Deserialize;

use crate::BACKEND;
use files::{lock, paths};
use record::{decode, framed_acks, framed_message, Record, FRAME, HEADER, MAGIC};

/// Files below this size are never rewritten: cutting back to the magic when all is acked is
/// what keeps them small.
const COMPACT_ABOVE: u64 = 8 << 20;

/// What a spooled message survives before it is FINed on the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpoolSync {
    /// Written to the OS: survives the process dying, not a power loss.
    #[default]
    Buffered,
    /// Synced with `fdatasync` before the FIN: survives a power loss; costs a sync per
    /// message.
    SyncData,
}

/// A message held by the spool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Spooled {
    /// Order of arrival in this spool; what an ack names.
    pub seq: u64,
    /// The server's id, to recognise a redelivery of a message already spooled.
    pub nsq_id: [u8; 16],
    /// The server's (offset, raw size), when it assigns them.
    pub position: Option<(u64, u32)>,
    /// The NSQ body.
    pub body: Bytes,
}

/// One subscription's spool, open and locked.
pub(crate) struct Spool {
    path: PathBuf,
    file: File,
    /// Held for the spool's lifetime: the lock is what makes it exclusive.
    _lock: File,
    sync: SpoolSync,
    len: u64,
    next_seq: u64,
    /// Unacked messages: where their record starts and how long it is.
    unacked: BTreeMap<u64, (u64, u64)>,
    /// NSQ ids of the messages in the file.
    seen: HashSet<[u8; 16]>,
}

fn io(path: &Path, what: &str, e: std::io::Error) -> Error {
    Error::backend(BACKEND, format!("spool {}: {what}: {e}", path.display()))
}

fn corrupt(path: &Path, at: u64, what: &str) -> Error {
    Error::backend(
        BACKEND,
        format!(
            "spool {} is damaged at byte {at}: {what}; move it aside to start the subscription \
             without it (its unacked messages are then lost)",
            path.display()
        ),
    )
}

impl Spool {
    /// Opens (creating if needed) and locks the spool of `(topic, subscription)` in `dir`. A
    /// second open while this one lives, from any process, is `Error::SubscriptionBusy`.
    pub(crate) fn open(
        dir: &Path,
        topic: &str,
        subscription: &str,
        sync: SpoolSync,
    ) -> Result<Spool> {
        std::fs::create_dir_all(dir).map_err(|e| io(dir, "create the directory", e))?;
        let (path, lock_path) = paths(dir, topic, subscription);
        let lock = lock(&lock_path, topic, subscription)?;
        let mut file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .append(true)
            .open(&path)
            .map_err(|e| io(&path, "open", e))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(|e| io(&path, "read", e))?;
        let mut spool = Spool {
            path,
            file,
            _lock: lock,
            sync,
            len: 0,
            next_seq: 0,
            unacked: BTreeMap::new(),
            seen: HashSet::new(),
        };
        spool.recover(&bytes)?;
        Ok(spool)
    }

    /// Reads the file's records; cuts off a record a crash left incomplete.
    fn recover(&mut self, bytes: &[u8]) -> Result<()> {
        if bytes.is_empty() {
            return self.append_bytes(MAGIC);
        }
        if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
            if MAGIC.starts_with(bytes) {
                // The magic itself was cut short: nothing was ever spooled.
                self.cut(0)?;
                return self.append_bytes(MAGIC);
            }
            return Err(corrupt(
                &self.path,
                0,
                "not a msgstream nsq spool (or another version)",
            ));
        }
        let mut at = MAGIC.len();
        while at < bytes.len() {
            let Some(frame) = bytes.get(at..at + FRAME) else {
                break;
            };
            let len = u32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize;
            let crc = u32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
            let Some(body) = bytes.get(at + FRAME..at + FRAME + len) else {
                break;
            };
            let end = at + FRAME + len;
            if crc32fast::hash(body) != crc {
                if end == bytes.len() {
                    // The last write, torn by a crash of the machine.
                    break;
                }
                return Err(corrupt(&self.path, at as u64, "checksum mismatch"));
            }
            let record = (at as u64, (FRAME + len) as u64);
            match decode(body) {
                Some(Record::Message(m)) => {
                    self.next_seq = self.next_seq.max(m.seq + 1);
                    self.seen.insert(m.nsq_id);
                    self.unacked.insert(m.seq, record);
                }
                Some(Record::Ack(seq)) => {
                    self.unacked.remove(&seq);
                }
                None => return Err(corrupt(&self.path, at as u64, "unknown record")),
            }
            at = end;
        }
        if at < bytes.len() {
            tracing::warn!(
                spool = %self.path.display(),
                bytes = bytes.len() - at,
                "cutting off a spool record a crash left incomplete (its message was not FINed, \
                 so the server sends it again)"
            );
            self.cut(at as u64)?;
        }
        self.len = at as u64;
        Ok(())
    }

    /// Up to `max` unacked messages from `seq` on, in order.
    pub(crate) fn read_from(&self, seq: u64, max: usize) -> Result<Vec<Spooled>> {
        let mut out = Vec::new();
        for (&seq, &(start, len)) in self.unacked.range(seq..).take(max) {
            let mut bytes = vec![0; usize::try_from(len).unwrap_or(usize::MAX)];
            self.file
                .read_exact_at(&mut bytes, start)
                .map_err(|e| io(&self.path, "read", e))?;
            match bytes.get(FRAME..).and_then(decode) {
                Some(Record::Message(m)) if m.seq == seq => out.push(m),
                _ => return Err(corrupt(&self.path, start, "not the message record it was")),
            }
        }
        Ok(out)
    }

    /// Messages spooled (the next seq).
    pub(crate) fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Whether the spool already holds the message the server calls `nsq_id` (a redelivery of
    /// a message spooled just before the process died, its FIN not yet sent).
    pub(crate) fn holds(&self, nsq_id: &[u8; 16]) -> bool {
        self.seen.contains(nsq_id)
    }

    /// Appends a message, synced as [`SpoolSync`] says; returns its seq. Once this returns the
    /// message may be FINed.
    pub(crate) fn append(
        &mut self,
        nsq_id: [u8; 16],
        position: Option<(u64, u32)>,
        body: &[u8],
    ) -> Result<u64> {
        let seq = self.next_seq;
        let record = framed_message(seq, &nsq_id, position, body)?;
        let start = self.len;
        self.append_bytes(&record)?;
        let len = record.len() as u64;
        if self.sync == SpoolSync::SyncData {
            self.file
                .sync_data()
                .map_err(|e| io(&self.path, "fdatasync", e))?;
        }
        self.next_seq += 1;
        self.seen.insert(nsq_id);
        self.unacked.insert(seq, (start, len));
        Ok(seq)
    }

    /// Records the acks of `seqs` (unknown or already acked ones are ignored) in one write.
    /// When nothing is left unacked the file is cut back to its magic.
    pub(crate) fn ack(&mut self, seqs: &[u64]) -> Result<()> {
        let acked: Vec<u64> = seqs
            .iter()
            .copied()
            .filter(|seq| self.unacked.contains_key(seq))
            .collect();
        if acked.is_empty() {
            return Ok(());
        }
        if acked.len() == self.unacked.len() {
            self.cut(HEADER)?;
            self.len = HEADER;
            self.unacked.clear();
            self.seen.clear();
            return Ok(());
        }
        for seq in &acked {
            self.unacked.remove(seq);
        }
        self.append_bytes(&framed_acks(&acked))?;
        let live: u64 = self.unacked.values().map(|(_, len)| len).sum();
        if self.len > COMPACT_ABOVE && live < self.len / 4 {
            self.compact()?;
        }
        Ok(())
    }

    fn append_bytes(&mut self, bytes: &[u8]) -> Result<()> {
        self.file
            .write_all(bytes)
            .map_err(|e| io(&self.path, "write", e))?;
        self.len += bytes.len() as u64;
        Ok(())
    }

    fn cut(&mut self, len: u64) -> Result<()> {
        self.file
            .set_len(len)
            .map_err(|e| io(&self.path, "truncate", e))?;
        self.file
            .seek(SeekFrom::End(0))
            .map_err(|e| io(&self.path, "seek", e))?;
        Ok(())
    }

    /// Rewrites the file with its unacked messages only, then renames it over the old one.
    fn compact(&mut self) -> Result<()> {
        let tmp = self.path.with_extension("spool.tmp");
        let mut out = File::create(&tmp).map_err(|e| io(&tmp, "create", e))?;
        out.write_all(MAGIC).map_err(|e| io(&tmp, "write", e))?;
        let mut reader = self
            .file
            .try_clone()
            .map_err(|e| io(&self.path, "reopen", e))?;
        let mut moved = BTreeMap::new();
        let mut len = HEADER;
        for (&seq, &(start, record)) in &self.unacked {
            reader
                .seek(SeekFrom::Start(start))
                .map_err(|e| io(&self.path, "seek", e))?;
            let mut bytes = vec![0; usize::try_from(record).unwrap_or(usize::MAX)];
            reader
                .read_exact(&mut bytes)
                .map_err(|e| io(&self.path, "read", e))?;
            out.write_all(&bytes).map_err(|e| io(&tmp, "write", e))?;
            moved.insert(seq, (len, record));
            len += record;
        }
        out.sync_data().map_err(|e| io(&tmp, "fdatasync", e))?;
        std::fs::rename(&tmp, &self.path).map_err(|e| io(&self.path, "replace", e))?;
        self.file = OpenOptions::new()
            .read(true)
            .append(true)
            .open(&self.path)
            .map_err(|e| io(&self.path, "reopen", e))?;
        self.unacked = moved;
        self.len = len;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
