//! Consumer-group records: durable positions in the `groups` column family.
//!
//! A group's record holds its *committed* position, the first id it has not acknowledged. It is
//! written with the queue's durability on every ack and seek, so a group resumes where it left
//! off after a restart (Milvus keeps these in memory only). The functions here are single
//! reads and writes; the engine serialises read-modify-write sequences.

use msgstream::mq::validate_channel_name;
use msgstream::{Error, Result};

use crate::codec::GroupRecord;
use crate::keys::{group_key, group_name_from_key, topic_prefix, topic_upper_bound, CF_GROUPS};
use crate::store::{db_error, Db};

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
