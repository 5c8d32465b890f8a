//! Consumer-group records: durable positions in the `groups` column family.
//!
//! A group's record holds its *committed* position, the first id it has not acknowledged. It is
//! written on every seek (with the queue's durability) and every ack (unsynced; acks can also be
//! staged and written together, see `acks`), so a group resumes where it left off after a
//! restart (Milvus keeps these in memory only). The record functions are single reads and
//! writes; the [`Rocksmq`] methods below and in `acks` serialise read-modify-write sequences
//! under one lock.

use msgstream::mq::{validate_channel_name, InitialPosition};
use msgstream::sync::lock;
use msgstream::{Error, Result};

use crate::codec::GroupRecord;
use crate::keys::{group_key, group_name_from_key, topic_prefix, topic_upper_bound, CF_GROUPS};
use crate::read::Cursor;
use crate::store::{db_error, Db};
use crate::topics::FIRST_MESSAGE_ID;
use crate::writer::now_ms;
use crate::{Rocksmq, Subscription};

/// A consumer group as listed by [`crate::Rocksmq::consumer_groups`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupInfo {
    /// Group name.
    pub name: String,
    /// First id not yet acknowledged: delivery resumes here.
    pub committed: u64,
    /// Messages in the topic at or after `committed`.
    pub lag: u64,
}

/// Checks a consumer-group name (the portable channel-name rule).
pub(crate) fn validate_group(name: &str) -> Result<()> {
    validate_channel_name("consumer group", name)
}

/// The record of `group` of `topic`, if the group exists.
pub(crate) fn get(db: &Db<'_>, topic: u64, group: &str) -> Result<Option<GroupRecord>> {
    db.db
        .get_pinned_cf(db.cf(CF_GROUPS)?, group_key(topic, group))
        .map_err(|e| db_error("reading a consumer group", e))?
        .map(|bytes| GroupRecord::decode(&bytes))
        .transpose()
}

/// The record of `group`, or `InvalidArgument` naming the missing group.
pub(crate) fn require(
    db: &Db<'_>,
    topic: u64,
    topic_name: &str,
    group: &str,
) -> Result<GroupRecord> {
    get(db, topic, group)?.ok_or_else(|| {
        Error::InvalidArgument(format!(
            "consumer group {group:?} of topic {topic_name:?} does not exist"
        ))
    })
}

/// Writes the record of `group`.
pub(crate) fn put(db: &Db<'_>, topic: u64, group: &str, record: GroupRecord) -> Result<()> {
    let mut batch = rocksdb::WriteBatch::default();
    batch.put_cf(db.cf(CF_GROUPS)?, group_key(topic, group), record.encode());
    db.write(batch)
}

/// Deletes the record of `group`.
pub(crate) fn delete(db: &Db<'_>, topic: u64, group: &str) -> Result<()> {
    let mut batch = rocksdb::WriteBatch::default();
    batch.delete_cf(db.cf(CF_GROUPS)?, group_key(topic, group));
    db.write(batch)
}

/// Every group of `topic`, sorted by name.
pub(crate) fn list(db: &Db<'_>, topic: u64) -> Result<Vec<(String, GroupRecord)>> {
    let mut options = rocksdb::ReadOptions::default();
    options.set_iterate_upper_bound(topic_upper_bound(topic));
    let mut iter = db.db.raw_iterator_cf_opt(db.cf(CF_GROUPS)?, options);
    iter.seek(topic_prefix(topic));
    let mut groups = Vec::new();
    while let (Some(key), Some(value)) = (iter.key(), iter.value()) {
        let name = group_name_from_key(topic, key)
            .ok_or_else(|| Error::Decode(format!("malformed consumer-group key {key:02x?}")))?;
        groups.push((name.to_owned(), GroupRecord::decode(value)?));
        iter.next();
    }
    iter.status()
        .map_err(|e| db_error("listing consumer groups", e))?;
    Ok(groups)
}

/// Consumer-group administration and positions.
impl Rocksmq {
    /// Creates consumer group `group` on `topic`, starting at the oldest message or after the
    /// newest. `InvalidArgument` if it already exists.
    pub fn create_consumer_group(
        &self,
        topic: &str,
        group: &str,
        start: InitialPosition,
    ) -> Result<()> {
        if self.create_group_if_missing(topic, group, start)? {
            Ok(())
        } else {
            Err(Error::InvalidArgument(format!(
                "consumer group {group:?} of topic {topic:?} already exists"
            )))
        }
    }

    /// Creates `group` at `start` unless it exists (then its position is kept). Returns whether
    /// it was created.
    pub(crate) fn create_group_if_missing(
        &self,
        topic: &str,
        group: &str,
        start: InitialPosition,
    ) -> Result<bool> {
        let state = self.topic(topic)?;
        validate_group(group)?;
        let mut groups = lock(&self.inner.groups);
        // `destroy_topic` deletes under this lock: a topic it destroyed since the look-up must
        // not get a group record nothing would ever delete.
        state.check_live()?;
        self.inner.store.with(|db| {
            if get(db, state.id, group)?.is_some() {
                return Ok(false);
            }
            groups.record_written(state.id, group);
            let committed = match start {
                InitialPosition::Earliest => 0,
                InitialPosition::Latest => state.tail().next_id,
                InitialPosition::Timestamp(_) => {
                    return Err(Error::Unsupported {
                        backend: "rocksmq",
                        what: "seeking by time",
                    })
                }
            };
            let record = GroupRecord {
                committed,
                active_ms: now_ms(),
            };
            put(db, state.id, group, record)?;
            Ok(true)
        })
    }

    /// Whether consumer group `group` of `topic` exists.
    pub fn consumer_group_exists(&self, topic: &str, group: &str) -> Result<bool> {
        let state = self.topic(topic)?;
        validate_group(group)?;
        self.inner
            .store
            .with(|db| Ok(get(db, state.id, group)?.is_some()))
    }

    /// Deletes consumer group `group` of `topic`; `InvalidArgument` if it does not exist.
    pub fn destroy_consumer_group(&self, topic: &str, group: &str) -> Result<()> {
        let state = self.topic(topic)?;
        validate_group(group)?;
        let mut groups = lock(&self.inner.groups);
        self.inner.store.with(|db| {
            require(db, state.id, topic, group)?;
            delete(db, state.id, group)
        })?;
        groups.remove_group(state.id, group);
        Ok(())
    }

    /// The consumer groups of `topic` with their positions and lag, sorted by name.
    pub fn consumer_groups(&self, topic: &str) -> Result<Vec<GroupInfo>> {
        let state = self.topic(topic)?;
        let next = state.tail().next_id;
        let groups = self.inner.store.with(|db| list(db, state.id))?;
        Ok(groups
            .into_iter()
            .map(|(name, record)| GroupInfo {
                name,
                committed: record.committed,
                lag: next.saturating_sub(record.committed.max(FIRST_MESSAGE_ID)),
            })
            .collect())
    }

    /// The committed position (first unacknowledged id) of `group`.
    pub fn committed_position(&self, topic: &str, group: &str) -> Result<u64> {
        let state = self.topic(topic)?;
        validate_group(group)?;
        self.inner
            .store
            .with(|db| Ok(require(db, state.id, topic, group)?.committed))
    }

    /// Moves `group` so that the next message delivered is `id` (inclusive); backwards is allowed.
    /// The move is durable: it is the group's committed position from now on.
    pub fn seek(&self, topic: &str, group: &str, id: u64) -> Result<()> {
        let state = self.topic(topic)?;
        validate_group(group)?;
        let next = state.tail().next_id;
        if id > next {
            return Err(Error::InvalidArgument(format!(
                "cannot seek topic {topic:?} to {id}: the next id is {next}"
            )));
        }
        let mut groups = lock(&self.inner.groups);
        self.inner.store.with(|db| {
            require(db, state.id, topic, group)?;
            put(
                db,
                state.id,
                group,
                GroupRecord {
                    committed: id,
                    active_ms: now_ms(),
                },
            )
        })?;
        groups.discard(state.id, group);
        Ok(())
    }

    /// Moves `group` past every message produced so far; returns its new position.
    pub fn seek_to_latest(&self, topic: &str, group: &str) -> Result<u64> {
        let next = self.topic(topic)?.tail().next_id;
        self.seek(topic, group, next)?;
        Ok(next)
    }

    /// A cursor of existing consumer group `group`, starting at its committed position, after
    /// writing what the group had staged (so that it starts after every ack made so far).
    pub fn subscribe(&self, topic: &str, group: &str) -> Result<Subscription> {
        self.flush_group_acks(topic, group)?;
        let committed = self.committed_position(topic, group)?;
        let state = self.topic(topic)?;
        Ok(Subscription::new(
            self.clone(),
            group.to_owned(),
            Cursor::new(state, committed),
        ))
    }
}
