//! Retention: deleting whole pages of acknowledged messages by age and by size.
//!
//! A topic's messages are cut into *pages*: a page closes when its messages reach
//! `page_size_bytes`, and its record (first and last id, bytes, closing time) is written in the
//! same batch as its last message. The planner (`plan`) is a pure function over those records:
//! walking from the oldest page, a page is deleted only while
//! 1. every consumer group that counts has acknowledged past it (groups idle longer than
//!    `ignore_groups_idle_for` do not count), and
//! 2. it closed longer than `retention` ago, **or** the topic still holds more than
//!    `retention_size_bytes`.
//!
//! The open tail page has no record and so is never deleted. Deleted pages form one contiguous
//! id range per topic, removed with `delete_range` in one batch; the range is then compacted so
//! the space is reclaimed by the same scheduled pass rather than whenever RocksDB gets to it.

use std::time::Duration;

use msgstream::sync::lock;
use msgstream::{Error, Result};

use crate::codec::PageRecord;
use crate::keys::{
    message_id_from_key, message_key, time_mark_key, topic_floor_key, topic_prefix,
    topic_upper_bound,
};
use crate::keys::{CF_MESSAGES, CF_META, CF_PAGES, CF_PROPERTIES};
use crate::store::{db_error, Db};
use crate::time_index;
use crate::writer::now_ms;
use crate::{group, Rocksmq};

/// What retention applies, from [`crate::RocksmqOptions`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Policy {
    pub retention: Duration,
    pub size_budget: u64,
    pub ignore_idle: Option<Duration>,
}

/// A closed page of one topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Page {
    pub first_id: u64,
    pub record: PageRecord,
}

/// What one retention pass removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetentionReport {
    /// Pages deleted, over all topics.
    pub pages: u64,
    /// Messages deleted.
    pub messages: u64,
    /// Payload and property bytes deleted.
    pub bytes: u64,
}

/// What the scheduled retention passes have done so far (see [`Rocksmq::watch_retention`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetentionProgress {
    /// Scheduled passes finished, including failed ones.
    pub passes: u64,
    /// Passes that failed (each is also logged as a warning).
    pub failures: u64,
    /// What the last successful pass removed.
    pub last: RetentionReport,
    /// Everything removed by scheduled passes since the queue was opened.
    pub total: RetentionReport,
}

impl RetentionProgress {
    pub(crate) fn record(&mut self, outcome: &Result<RetentionReport>) {
        self.passes += 1;
        match outcome {
            Ok(report) => {
                self.last = *report;
                self.total.pages += report.pages;
                self.total.messages += report.messages;
                self.total.bytes += report.bytes;
            }
            Err(_) => self.failures += 1,
        }
    }
}

/// Pure planning: how many of the oldest `pages` (sorted by id) to delete, given the bytes of the
/// open page, the smallest committed position of the groups that count (`None`: no group), the
/// current time and the policy.
pub(crate) fn plan(
    pages: &[Page],
    open_page_bytes: u64,
    min_committed: Option<u64>,
    now_ms: u64,
    policy: &Policy,
) -> usize {
    let retention_ms = u64::try_from(policy.retention.as_millis()).unwrap_or(u64::MAX);
    let mut total: u64 = pages.iter().map(|p| p.record.bytes).sum::<u64>() + open_page_bytes;
    let mut count = 0;
    for page in pages {
        let acked = min_committed.is_none_or(|committed| page.record.last_id < committed);
        let expired = page.record.closed_ms.saturating_add(retention_ms) <= now_ms;
        if !(acked && (expired || total > policy.size_budget)) {
            break;
        }
        total -= page.record.bytes;
        count += 1;
    }
    count
}

/// The closed pages of `topic`, oldest first.
pub(crate) fn pages(db: &Db<'_>, topic: u64) -> Result<Vec<Page>> {
    let mut options = rocksdb::ReadOptions::default();
    options.set_iterate_upper_bound(topic_upper_bound(topic));
    let mut iter = db.db.raw_iterator_cf_opt(db.cf(CF_PAGES)?, options);
    iter.seek(topic_prefix(topic));
    let mut pages = Vec::new();
    while let (Some(key), Some(value)) = (iter.key(), iter.value()) {
        let first_id = message_id_from_key(topic, key)
            .ok_or_else(|| Error::Decode(format!("malformed page key {key:02x?}")))?;
        pages.push(Page {
            first_id,
            record: PageRecord::decode(value)?,
        });
        iter.next();
    }
    iter.status().map_err(|e| db_error("listing pages", e))?;
    Ok(pages)
}

/// Deletes the pages `first..=last` of `topic` (the oldest ones, one contiguous id range) in
/// one write and returns the key range to compact.
fn delete_pages(
    db: &Db<'_>,
    topic: u64,
    first: &Page,
    last: &Page,
) -> Result<([u8; 16], [u8; 16])> {
    let from = message_key(topic, first.first_id);
    let to = message_key(topic, last.record.last_id.saturating_add(1));
    let mut batch = rocksdb::WriteBatch::default();
    for cf in [CF_MESSAGES, CF_PROPERTIES, CF_PAGES] {
        batch.delete_range_cf(db.cf(cf)?, from, to);
    }
    // Ids are recovered from the newest key at open; the floor keeps them from restarting once
    // every message of the topic is gone.
    let floor = last.record.last_id + 1;
    batch.put_cf(db.cf(CF_META)?, topic_floor_key(topic), floor.to_be_bytes());
    // The time index marks of the blocks now wholly deleted go with them (the block holding
    // the floor keeps its mark: it covers messages that stay).
    batch.delete_range_cf(
        db.cf(CF_META)?,
        time_mark_key(topic, 0),
        time_mark_key(topic, time_index::block_start(floor)),
    );
    db.write(batch)?;
    Ok((from, to))
}

/// Compacts a deleted range, so that the same pass reclaims its space.
fn compact_deleted(db: &Db<'_>, from: &[u8], to: &[u8]) -> Result<()> {
    for cf in [CF_MESSAGES, CF_PROPERTIES, CF_PAGES] {
        db.db.compact_range_cf(db.cf(cf)?, Some(from), Some(to));
    }
    Ok(())
}

/// The retention pass.
impl Rocksmq {
    /// Follows the scheduled retention passes (`retention_interval`): the receiver sees a new
    /// value after every pass, so a caller can await a pass instead of polling for its effects.
    /// Passes run by [`Rocksmq::run_retention`] directly are not counted.
    pub fn watch_retention(&self) -> tokio::sync::watch::Receiver<RetentionProgress> {
        self.inner.retention_progress.subscribe()
    }

    /// Runs one retention pass over every topic now (the scheduled pass calls this too).
    pub fn run_retention(&self) -> Result<RetentionReport> {
        let mut report = RetentionReport::default();
        let now = now_ms();
        for topic in self.inner.topics.all() {
            let open_bytes = topic.tail().page_bytes;
            let deleted = self.inner.store.with(|db| {
                let mut pages = pages(db, topic.id)?;
                if pages.is_empty() {
                    return Ok(pages);
                }
                let idle_ms = self
                    .inner
                    .policy
                    .ignore_idle
                    .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
                let min_committed = group::list(db, topic.id)?
                    .into_iter()
                    .filter(|(_, g)| {
                        idle_ms.is_none_or(|idle| g.active_ms.saturating_add(idle) > now)
                    })
                    .map(|(_, g)| g.committed)
                    .min();
                let count = plan(&pages, open_bytes, min_committed, now, &self.inner.policy);
                pages.truncate(count);
                Ok(pages)
            })?;
            let (Some(first), Some(last)) = (deleted.first(), deleted.last()) else {
                continue;
            };
            let written = {
                // `destroy_topic` deletes a topic's records under this lock: one it destroyed
                // since the listing above must not get an id floor written after that.
                let _groups = lock(&self.inner.groups);
                if topic.check_live().is_err() {
                    continue;
                }
                let written = self
                    .inner
                    .store
                    .with(|db| delete_pages(db, topic.id, first, last));
                // Even if the deletion failed: the held run may name deleted ids.
                topic.recent.forget();
                written?
            };
            let (from, to) = written;
            // Outside the lock: acks and group changes go on while the space is reclaimed.
            self.inner
                .store
                .with(|db| compact_deleted(db, &from, &to))?;
            report.pages += deleted.len() as u64;
            report.messages += last.record.last_id + 1 - first.first_id;
            report.bytes += deleted.iter().map(|p| p.record.bytes).sum::<u64>();
        }
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(first_id: u64, last_id: u64, closed_ms: u64) -> Page {
        Page {
            first_id,
            record: PageRecord {
                last_id,
                bytes: 100,
                closed_ms,
            },
        }
    }

    const POLICY: Policy = Policy {
        retention: Duration::from_millis(1000),
        size_budget: 1000,
        ignore_idle: None,
    };

    #[test]
    fn age_needs_acks() {
        let pages = [page(1, 10, 0), page(11, 20, 0), page(21, 30, 5000)];
        assert_eq!(plan(&pages, 0, Some(21), 2000, &POLICY), 2);
        assert_eq!(plan(&pages, 0, Some(15), 2000, &POLICY), 1);
        assert_eq!(plan(&pages, 0, Some(1), 2000, &POLICY), 0);
        assert_eq!(
            plan(&pages, 0, None, 2000, &POLICY),
            2,
            "no group: age alone"
        );
        assert_eq!(plan(&pages, 0, None, 500, &POLICY), 0, "too young");
    }

    #[test]
    fn size_removes_oldest_acked_first() {
        let pages: Vec<Page> = (0..12)
            .map(|i| page(i * 10 + 1, i * 10 + 10, 10_000))
            .collect();
        // 1200 bytes + 50 open, budget 1000: three pages go, if acked.
        assert_eq!(plan(&pages, 50, Some(1000), 0, &POLICY), 3);
        assert_eq!(plan(&pages, 50, Some(21), 0, &POLICY), 2);
    }
}
