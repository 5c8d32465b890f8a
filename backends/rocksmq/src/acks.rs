//! Staged acknowledgements: checked when they are made, written together later.
//!
//! A stream commits a pack by acking one message per channel. Written one by one, a pack of
//! sixteen channels costs sixteen WAL writes (and sixteen memtable look-ups of the group
//! records): about a tenth of the CPU of the timetick stream over this queue. A staged ack
//! waits in memory, under the lock that serialises every change of a group record, until
//! [`Rocksmq::flush_acks`] writes every staged ack of the queue in one `WriteBatch`.
//!
//! Guarantees:
//! - An ack is checked (topic, group name, id range) when it is staged; the group record is
//!   moved forward (never back) when it is flushed, exactly as [`Rocksmq::ack`] does. The
//!   position a flush (or a direct ack, which writes its own group's entry the same way)
//!   starts from is the one it last wrote for the group, kept here; every other write of a
//!   group record happens under the same lock and forgets it, so the record is read again
//!   after a seek or a re-creation.
//! - Until a flush returns `Ok`, a staged ack may be lost with the process: its messages are
//!   delivered again (at least once, never a skip). A failed write leaves the acks staged, and
//!   the next flush tries again. [`Rocksmq::close`] flushes what is left and refuses staging
//!   from then on (`Error::Closed`), so nothing staged concurrently with it goes unwritten;
//!   dropping the last handle of the queue flushes what is left too.
//! - A seek of the group, or deleting the group or its topic, discards what the group had
//!   staged: an ack from before a seek never moves the group past where the seek put it.

use std::collections::HashMap;
use std::sync::Arc;

use msgstream::sync::lock;
use msgstream::{Error, Result};

use crate::ack_grouping::AckWrite;
use crate::codec::GroupRecord;
use crate::group::{get, validate_group};
use crate::keys::{group_key, CF_GROUPS};
use crate::store::Store;
use crate::topics::{TopicState, FIRST_MESSAGE_ID};
use crate::writer::now_ms;
use crate::Rocksmq;

/// The acks staged per (topic id, group), guarded by the engine's group lock.
///
/// Entries stay after a flush (empty) while their group lives, so staging the next ack of a
/// group allocates nothing.
#[derive(Debug, Default)]
pub(crate) struct StagedAcks {
    by_topic: HashMap<u64, HashMap<String, Staged>>,
    /// Whether an ack may be staged and unwritten: set by every staging, cleared by a write of
    /// everything staged. A stream commits a pack by staging an ack on each of its channels
    /// and then flushing once per channel: the first flush writes them all, and the others
    /// must not each look through every group of every topic to find nothing (at 256
    /// channels that search, repeated per channel, cost more than the write).
    dirty: bool,
    /// Set by [`Rocksmq::close`] once it wrote what was staged: nothing is staged after that
    /// (it would never be written), staging is `Error::Closed`.
    closed: bool,
}

#[derive(Debug)]
struct Staged {
    /// The topic's name, for errors.
    topic: String,
    /// The highest id acknowledged and not yet written.
    acked: Option<u64>,
    /// The group's committed position as this module last wrote it; `None`: read the record.
    committed: Option<u64>,
    /// The position the flush in progress writes (set only while it runs).
    writing: Option<u64>,
}

impl StagedAcks {
    fn stage(&mut self, topic_id: u64, topic: &str, group: &str, id: u64) -> Result<()> {
        if self.closed {
            return Err(Error::Closed("rocksmq client"));
        }
        self.dirty = true;
        let groups = self.by_topic.entry(topic_id).or_default();
        match groups.get_mut(group) {
            Some(staged) => staged.acked = Some(staged.acked.map_or(id, |a| a.max(id))),
            None => {
                groups.insert(
                    group.to_owned(),
                    Staged {
                        topic: topic.to_owned(),
                        acked: Some(id),
                        committed: None,
                        writing: None,
                    },
                );
            }
        }
        Ok(())
    }

    /// Forgets what `group` of topic `topic_id` has staged (a seek moved it), and where it
    /// stood.
    pub(crate) fn discard(&mut self, topic_id: u64, group: &str) {
        if let Some(staged) = self.entry(topic_id, group) {
            staged.acked = None;
            staged.committed = None;
        }
    }

    /// Forgets where `group` stood: its record was written elsewhere (a direct ack, a
    /// creation); what it staged stays, and moves it forward from the record.
    pub(crate) fn record_written(&mut self, topic_id: u64, group: &str) {
        if let Some(staged) = self.entry(topic_id, group) {
            staged.committed = None;
        }
    }

    fn entry(&mut self, topic_id: u64, group: &str) -> Option<&mut Staged> {
        self.by_topic
            .get_mut(&topic_id)
            .and_then(|groups| groups.get_mut(group))
    }

    /// Forgets `group` of topic `topic_id` altogether (it was deleted).
    pub(crate) fn remove_group(&mut self, topic_id: u64, group: &str) {
        if let Some(groups) = self.by_topic.get_mut(&topic_id) {
            groups.remove(group);
        }
    }

    /// Forgets every group of topic `topic_id` (it was deleted).
    pub(crate) fn remove_topic(&mut self, topic_id: u64) {
        self.by_topic.remove(&topic_id);
    }

    /// Whether `only` that group, or any group (`None`), has an ack staged and unwritten.
    fn has_pending(&self, only: Option<(u64, &str)>) -> bool {
        match only {
            Some((topic_id, group)) => self
                .by_topic
                .get(&topic_id)
                .and_then(|groups| groups.get(group))
                .is_some_and(|staged| staged.acked.is_some()),
            None => {
                self.dirty
                    && self
                        .by_topic
                        .values()
                        .flat_map(HashMap::values)
                        .any(|staged| staged.acked.is_some())
            }
        }
    }
}

/// Staged acknowledgements (see the module docs).
impl Rocksmq {
    /// Acknowledges `id` and everything before it for `group`: its committed position moves to
    /// `id + 1` unless it is already further. Written at once (unsynced, see
    /// [`Rocksmq::flush_acks`]), with whatever the group had staged; other groups' staged acks
    /// stay staged.
    pub fn ack(&self, topic: &str, group: &str, id: u64) -> Result<()> {
        self.ack_on(&*self.acked_topic(topic, group)?, group, id)
    }

    /// [`Rocksmq::ack`] on a topic's state and a group already checked.
    fn ack_on(&self, topic: &TopicState, group: &str, id: u64) -> Result<()> {
        check_ack(topic, id)?;
        let mut staged = lock(&self.inner.groups);
        staged.stage(topic.id, &topic.name, group, id)?;
        write_staged(&self.inner.store, &mut staged, Some((topic.id, group)))
    }

    /// Acknowledges as the queue's [`AckWrite`] says: written before returning, as
    /// [`Rocksmq::ack`] (`Immediate`), or staged for the background write (`Grouped`).
    pub fn ack_as_configured(&self, topic: &str, group: &str, id: u64) -> Result<()> {
        self.ack_as_configured_on(&*self.acked_topic(topic, group)?, group, id)
    }

    /// [`Rocksmq::ack_as_configured`] for a consumer, which holds the state of the topic it
    /// subscribed to and a group checked then: the mq consumer's `ack` is this.
    pub(crate) fn ack_as_configured_on(
        &self,
        topic: &TopicState,
        group: &str,
        id: u64,
    ) -> Result<()> {
        match self.inner.ack_write {
            AckWrite::Immediate => self.ack_on(topic, group, id),
            AckWrite::Grouped(_) => {
                self.stage_ack_on(topic, group, id)?;
                self.inner.ack_flusher.arm();
                Ok(())
            }
        }
    }

    /// [`Rocksmq::close`]'s last word on acks: writes what is staged, and refuses staging from
    /// then on, so that no ack made concurrently with closing is staged after this write and
    /// silently never written.
    pub(crate) fn close_acks(&self) -> Result<()> {
        let mut staged = lock(&self.inner.groups);
        staged.closed = true;
        write_staged(&self.inner.store, &mut staged, None)
    }

    /// Writes what `group` of `topic` has staged (nothing to do when it staged nothing): a
    /// consumer closing, or a group subscribed again, starts from every ack made so far. A
    /// topic that no longer exists has nothing staged (deleting it discarded that).
    pub(crate) fn flush_group_acks(&self, topic: &str, group: &str) -> Result<()> {
        self.check_open()?;
        let Some(state) = self.inner.topics.get(topic) else {
            return Ok(());
        };
        let topic_id = state.id;
        let mut staged = lock(&self.inner.groups);
        write_staged(&self.inner.store, &mut staged, Some((topic_id, group)))
    }

    /// Checks an acknowledgement of `id` (and everything before it) for `group` as
    /// [`Rocksmq::ack`] does, and stages it: the next [`Rocksmq::flush_acks`] writes it.
    pub fn stage_ack(&self, topic: &str, group: &str, id: u64) -> Result<()> {
        self.stage_ack_on(&*self.acked_topic(topic, group)?, group, id)
    }

    /// [`Rocksmq::stage_ack`] on a topic's state and a group already checked: a consumer holds
    /// both from when it subscribed, and finds neither by name (a stream commits a pack with
    /// one of these per channel, on the task that hands the packs out). A consumer of a topic
    /// destroyed since is refused, even when a new topic took the name.
    pub(crate) fn stage_ack_on(&self, topic: &TopicState, group: &str, id: u64) -> Result<()> {
        check_ack(topic, id)?;
        lock(&self.inner.groups).stage(topic.id, &topic.name, group, id)
    }

    /// Writes every staged acknowledgement of the queue in one unsynced write: a power cut can
    /// only move a group back (redelivery), never forward. The acks of a group deleted since
    /// they were staged are dropped, and that is the error returned once the others are
    /// written; if the write fails, everything stays staged.
    pub fn flush_acks(&self) -> Result<()> {
        let mut staged = lock(&self.inner.groups);
        write_staged(&self.inner.store, &mut staged, None)
    }

    /// The live topic named `topic`, if `group` is a valid group name: what an ack by name
    /// checks before the ack itself.
    fn acked_topic(&self, topic: &str, group: &str) -> Result<Arc<TopicState>> {
        let state = self.topic(topic)?;
        validate_group(group)?;
        Ok(state)
    }
}

/// Whether `id` may be acknowledged on `topic`: the topic was not destroyed, and gave the id
/// out.
fn check_ack(topic: &TopicState, id: u64) -> Result<()> {
    topic.check_live()?;
    let next = topic.tail().next_id;
    if id < FIRST_MESSAGE_ID || id >= next {
        return Err(Error::InvalidArgument(format!(
            "cannot ack message {id} of topic {:?}: ids so far are {FIRST_MESSAGE_ID}..{next}",
            topic.name
        )));
    }
    Ok(())
}

/// Writes the staged acks of every group, or of `only` that one, in one write (see
/// [`Rocksmq::flush_acks`] for what happens to a missing group and on failure).
pub(crate) fn write_staged(
    store: &Store,
    staged: &mut StagedAcks,
    only: Option<(u64, &str)>,
) -> Result<()> {
    let wanted = |topic_id: u64, group: &str| only.is_none_or(|(t, g)| t == topic_id && g == group);
    if !staged.has_pending(only) {
        if only.is_none() {
            staged.dirty = false;
        }
        return Ok(());
    }
    let mut missing: Vec<(u64, String)> = Vec::new();
    let mut first_error = None;
    let wrote = store.with(|db| {
        let cf = db.cf(CF_GROUPS)?;
        let mut batch = rocksdb::WriteBatch::default();
        let now = now_ms();
        for (&topic_id, groups) in staged.by_topic.iter_mut() {
            for (group, entry) in groups.iter_mut() {
                let Some(acked) = entry.acked.filter(|_| wanted(topic_id, group)) else {
                    continue;
                };
                let committed = match entry.committed {
                    Some(committed) => committed,
                    None => match get(db, topic_id, group)? {
                        Some(record) => record.committed,
                        None => {
                            first_error.get_or_insert_with(|| {
                                Error::InvalidArgument(format!(
                                    "consumer group {group:?} of topic {:?} does not exist",
                                    entry.topic
                                ))
                            });
                            missing.push((topic_id, group.clone()));
                            continue;
                        }
                    },
                };
                let record = GroupRecord {
                    committed: committed.max(acked + 1),
                    active_ms: now,
                };
                batch.put_cf(cf, group_key(topic_id, group), record.encode());
                entry.writing = Some(record.committed);
            }
        }
        db.write_unsynced(batch)
    });
    for entry in staged.by_topic.values_mut().flat_map(HashMap::values_mut) {
        if let Some(committed) = entry.writing.take() {
            if wrote.is_ok() {
                entry.acked = None;
                entry.committed = Some(committed);
            }
        }
    }
    wrote?;
    if only.is_none() {
        // Every staged ack was written, or dropped with its missing group just below.
        staged.dirty = false;
    }
    for (topic_id, group) in missing {
        staged.remove_group(topic_id, &group);
    }
    first_error.map_or(Ok(()), Err)
}
