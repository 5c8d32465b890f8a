//! The promised-ids ledger: which ids each topic had given out, kept beside the database so
//! that a write-ahead log that lost records is noticed at the next open.
//!
//! RocksDB recovers a damaged or truncated WAL by replaying it up to the damage and dropping
//! the rest, and says so only in its own info `LOG`. What it dropped is gone from the messages,
//! page marks and id floors alike (they are written in the same atomic batches), so nothing
//! inside the database can tell. The ledger is a small text file outside it, `PROMISED_IDS`:
//! every topic's numeric id, next id and name, rewritten (written aside, then renamed over)
//! every [`LEDGER_INTERVAL`] while ids move, after a topic is destroyed, and at close. At open,
//! a topic recovered below its entry, or missing, lost those ids.
//!
//! Guarantees: the ledger never names an id that was not in the WAL when it was written (it
//! records what readers could already see), so a clean or crash-only recovery never reports a
//! loss. It lags by up to its interval, so it sees the loss of every id given out up to its
//! last write, not necessarily of the last second's.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use msgstream::{Error, Result};

use crate::topics::{Topics, FIRST_MESSAGE_ID};
use crate::LostMessages;

/// How often the ledger is rewritten while ids move.
pub const LEDGER_INTERVAL: Duration = Duration::from_secs(1);

/// The ledger's file name, in the database directory.
pub const LEDGER_FILE: &str = "PROMISED_IDS";

const HEADER: &str = "rocksmq promised ids v1";

/// One topic's line: its numeric id, the next id it would give out, its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub id: u64,
    pub next_id: u64,
    pub name: String,
}

/// The ledger of one database; its lock orders writers, so a stale snapshot never overwrites
/// a newer one (a destroy's rewrite and the periodic one, say).
pub(crate) struct Ledger {
    path: PathBuf,
    /// The entries last written (`None` before the first write).
    written: Mutex<Option<Vec<Entry>>>,
}

impl Ledger {
    pub fn new(dir: &Path) -> Ledger {
        Ledger {
            path: dir.join(LEDGER_FILE),
            written: Mutex::new(None),
        }
    }

    /// The entries of the ledger on disk: `None` if there is none (a database from before the
    /// ledger); a damaged one is logged and read as none.
    pub fn read(&self) -> Option<Vec<Entry>> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "rocksmq: the promised-ids ledger cannot be read; losses from the write-ahead log cannot be counted this time");
                return None;
            }
        };
        match decode(&text) {
            Ok(entries) => Some(entries),
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "rocksmq: ignoring a damaged promised-ids ledger");
                None
            }
        }
    }

    /// Rewrites the ledger from `topics` if anything moved since the last write. A failed write
    /// (a full disk) is logged: the ledger only serves to notice losses.
    pub fn record(&self, topics: &Topics) {
        let mut written = match self.written.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        let entries: Vec<Entry> = topics
            .all()
            .iter()
            .map(|topic| Entry {
                id: topic.id,
                next_id: topic.visible(),
                name: topic.name.clone(),
            })
            .collect();
        if written.as_ref() == Some(&entries) {
            return;
        }
        match self.write(&entries) {
            Ok(()) => *written = Some(entries),
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "rocksmq: writing the promised-ids ledger failed")
            }
        }
    }

    fn write(&self, entries: &[Entry]) -> std::io::Result<()> {
        let aside = self.path.with_extension("new");
        let mut file = std::fs::File::create(&aside)?;
        file.write_all(encode(entries).as_bytes())?;
        drop(file);
        std::fs::rename(&aside, &self.path)
    }
}

/// The thread that rewrites the ledger every [`LEDGER_INTERVAL`] while `tick` returns true.
pub(crate) struct LedgerThread {
    stop: std::sync::mpsc::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl LedgerThread {
    pub fn start(mut tick: impl FnMut() -> bool + Send + 'static) -> Result<LedgerThread> {
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("rocksmq-ledger".into())
            .spawn(move || {
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                    stopped.recv_timeout(LEDGER_INTERVAL)
                {
                    if !tick() {
                        return;
                    }
                }
            })
            .map_err(|e| {
                Error::backend(
                    crate::store::BACKEND,
                    format!("starting the ledger thread: {e}"),
                )
            })?;
        Ok(LedgerThread { stop, thread })
    }

    /// Stops the thread and waits for it.
    pub fn stop(self) {
        drop(self.stop);
        if self.thread.join().is_err() {
            tracing::warn!("rocksmq: the ledger thread panicked");
        }
    }
}

fn encode(entries: &[Entry]) -> String {
    let mut text = format!("{HEADER}\n");
    for entry in entries {
        text.push_str(&format!("{} {} {}\n", entry.id, entry.next_id, entry.name));
    }
    text
}

fn decode(text: &str) -> Result<Vec<Entry>> {
    let mut lines = text.lines();
    if lines.next() != Some(HEADER) {
        return Err(Error::Decode(
            "the ledger's first line is not its header".into(),
        ));
    }
    lines
        .enumerate()
        .map(|(n, line)| {
            let bad = || Error::Decode(format!("ledger line {} is not `id next name`", n + 2));
            let mut fields = line.splitn(3, ' ');
            let id = fields.next().and_then(|f| f.parse().ok()).ok_or_else(bad)?;
            let next_id = fields.next().and_then(|f| f.parse().ok()).ok_or_else(bad)?;
            let name = fields.next().filter(|n| !n.is_empty()).ok_or_else(bad)?;
            Ok(Entry {
                id,
                next_id,
                name: name.to_owned(),
            })
        })
        .collect()
}

/// What the recovered topics (`(id, name, next id)`) lack against the ledger's `promised`
/// entries: a topic below its promise, or gone (topic ids are never reused, so an id no
/// recovered topic has is a topic whose creation was lost).
pub(crate) fn compare(promised: &[Entry], recovered: &[(u64, String, u64)]) -> Vec<LostMessages> {
    promised
        .iter()
        .filter_map(|entry| {
            let found = recovered.iter().find(|(id, _, _)| *id == entry.id);
            let (recovered_next, topic_lost) = match found {
                Some((_, _, next)) => (*next, false),
                None => (FIRST_MESSAGE_ID, true),
            };
            (topic_lost || recovered_next < entry.next_id).then(|| LostMessages {
                topic: entry.name.clone(),
                group: None,
                expected_next: entry.next_id,
                recovered_next,
                topic_lost,
            })
        })
        .collect()
}

/// The error of a strict open that found `lost` (never empty).
pub(crate) fn refusal(path: &Path, lost: &[LostMessages]) -> Error {
    let first = &lost[0];
    let total: u64 = lost.iter().map(LostMessages::count).sum();
    Error::Corrupt {
        channel: first.topic.clone(),
        id: msgstream::mq::MessageId::from_u64(first.recovered_next),
        detail: format!(
            "the write-ahead log of {} lost records: {total} message id(s) of {} topic(s) are \
             gone ({}); strict recovery refuses to open it. Restore a backup, or open it once \
             without strict recovery to accept the loss",
            path.display(),
            lost.len(),
            lost.iter()
                .map(|l| format!("{}: {}", l.topic, l.count()))
                .collect::<Vec<_>>()
                .join(", "),
        ),
    }
}

/// Where to say it loudly: an error for each loss, with the topic and the count.
pub(crate) fn report(path: &Path, lost: &[LostMessages]) {
    for loss in lost {
        tracing::error!(
            path = %path.display(),
            topic = %loss.topic,
            missing = loss.count(),
            "rocksmq: {} message id(s) of topic {:?} ({}..{}) are missing after recovery{}: the write-ahead log lost records",
            loss.count(),
            loss.topic,
            loss.recovered_next,
            loss.expected_next,
            match (&loss.group, loss.topic_lost) {
                (_, true) => " (the topic itself is gone)".to_string(),
                (Some(group), _) => format!(" (group {group:?} had acknowledged them)"),
                (None, false) => String::new(),
            }
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: u64, next_id: u64, name: &str) -> Entry {
        Entry {
            id,
            next_id,
            name: name.into(),
        }
    }

    #[test]
    fn entries_round_trip_and_damage_is_an_error() {
        let entries = vec![entry(1, 30_001, "a"), entry(7, 1, "b.c-d_e")];
        assert_eq!(decode(&encode(&entries)).expect("decode"), entries);
        assert_eq!(decode(&encode(&[])).expect("empty"), vec![]);
        for bad in [
            "",
            "other header\n",
            "rocksmq promised ids v1\n1 x a\n",
            "rocksmq promised ids v1\n1 2\n",
        ] {
            assert!(decode(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn topics_below_their_promise_or_gone_are_lost() {
        let promised = [entry(1, 30_001, "a"), entry(2, 10, "b"), entry(3, 5, "c")];
        let recovered = [(1, "a".to_string(), 15_327), (2, "b".to_string(), 10)];
        let lost = compare(&promised, &recovered);
        assert_eq!(lost.len(), 2, "{lost:?}");
        assert_eq!((lost[0].topic.as_str(), lost[0].count()), ("a", 14_674));
        assert!(!lost[0].topic_lost);
        assert_eq!((lost[1].topic.as_str(), lost[1].count()), ("c", 4));
        assert!(lost[1].topic_lost);
        let recovered_ahead = [(1, "a".to_string(), 30_005)];
        assert!(compare(&promised[..1], &recovered_ahead).is_empty());
    }
}
