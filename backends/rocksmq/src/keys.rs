//! Key layout: pure byte encodings, no I/O.
//!
//! Every per-topic key starts with the topic's numeric id as 8 big-endian bytes, never with its
//! name. The prefix therefore has a fixed length, so topics `a` and `ab` (or any name that is a
//! prefix of another) can never see each other's keys, and no character of a name is ever read as
//! key syntax. Message ids follow as 8 big-endian bytes, so byte order is id order.

/// Column family of message payloads: `topic id ‖ message id` → payload.
pub(crate) const CF_MESSAGES: &str = "messages";
/// Column family of message properties, same keys as [`CF_MESSAGES`], only for messages that
/// have properties.
pub(crate) const CF_PROPERTIES: &str = "properties";
/// Column family of consumer groups: `topic id ‖ group name` → group record.
pub(crate) const CF_GROUPS: &str = "groups";
/// Column family of closed pages: `topic id ‖ first message id` → page record.
pub(crate) const CF_PAGES: &str = "pages";
/// Column family of topic metadata (names, id counters, open-page state).
pub(crate) const CF_META: &str = "meta";

/// Every column family the database holds besides `default`.
pub(crate) const COLUMN_FAMILIES: [&str; 5] =
    [CF_MESSAGES, CF_PROPERTIES, CF_GROUPS, CF_PAGES, CF_META];

/// `meta` key holding the next topic id to allocate.
pub(crate) const META_NEXT_TOPIC_ID: &[u8] = b"C";
const META_TOPIC_NAME: u8 = b'T';
const META_TOPIC_FLOOR: u8 = b'N';
const META_PAGE_MARK: u8 = b'P';
const META_TIME_FROM: u8 = b'S';
const META_TIME_MARK: u8 = b'I';

/// `meta` key mapping a topic name to its numeric id.
pub(crate) fn topic_name_key(name: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(1 + name.len());
    key.push(META_TOPIC_NAME);
    key.extend_from_slice(name.as_bytes());
    key
}

/// The first byte of every [`topic_name_key`], to list topics.
pub(crate) const TOPIC_NAME_PREFIX: &[u8] = &[META_TOPIC_NAME];

/// The name encoded in a [`topic_name_key`], if `key` is one.
pub(crate) fn topic_name_from_key(key: &[u8]) -> Option<&str> {
    match key.split_first() {
        Some((&META_TOPIC_NAME, name)) => std::str::from_utf8(name).ok(),
        _ => None,
    }
}

/// `meta` key of a topic's id floor: no id below it will ever be given out again. Written when
/// the topic is created and whenever retention deletes its oldest messages, so ids never restart
/// even if retention deleted every message.
pub(crate) fn topic_floor_key(topic: u64) -> [u8; 9] {
    let mut key = [0u8; 9];
    key[0] = META_TOPIC_FLOOR;
    key[1..].copy_from_slice(&topic.to_be_bytes());
    key
}

/// `meta` key of a topic's page mark (see [`crate::codec::PageMark`]): how many bytes its open
/// page held after some recent write, so that opening the queue counts only the bytes since.
pub(crate) fn page_mark_key(topic: u64) -> [u8; 9] {
    let mut key = [0u8; 9];
    key[0] = META_PAGE_MARK;
    key[1..].copy_from_slice(&topic.to_be_bytes());
    key
}

/// `meta` key of the first id a topic's time index covers (see [`crate::time_index`]).
pub(crate) fn time_from_key(topic: u64) -> [u8; 9] {
    let mut key = [0u8; 9];
    key[0] = META_TIME_FROM;
    key[1..].copy_from_slice(&topic.to_be_bytes());
    key
}

/// `meta` key of the time index mark of the block of `topic` starting at `block_first`.
pub(crate) fn time_mark_key(topic: u64, block_first: u64) -> [u8; 17] {
    let mut key = [0u8; 17];
    key[0] = META_TIME_MARK;
    key[1..].copy_from_slice(&message_key(topic, block_first));
    key
}

/// Length of a [`message_key`]: topic id, then message id, both big-endian.
pub(crate) const MESSAGE_KEY_LEN: usize = 16;

/// Key of message `id` of `topic` in [`CF_MESSAGES`], [`CF_PROPERTIES`] and [`CF_PAGES`].
pub(crate) fn message_key(topic: u64, id: u64) -> [u8; MESSAGE_KEY_LEN] {
    let mut key = [0u8; MESSAGE_KEY_LEN];
    key[..8].copy_from_slice(&topic.to_be_bytes());
    key[8..].copy_from_slice(&id.to_be_bytes());
    key
}

/// The message id of a [`message_key`] of `topic`, or `None` for a key of another topic.
pub(crate) fn message_id_from_key(topic: u64, key: &[u8]) -> Option<u64> {
    let (prefix, id) = key.split_at_checked(8)?;
    if prefix != topic.to_be_bytes() {
        return None;
    }
    Some(u64::from_be_bytes(id.try_into().ok()?))
}

/// The 8-byte prefix of every key of `topic`.
pub(crate) fn topic_prefix(topic: u64) -> [u8; 8] {
    topic.to_be_bytes()
}

/// The exclusive upper bound of every key of `topic`: the next topic's prefix (topic ids never
/// reach `u64::MAX`, see the topic registry).
pub(crate) fn topic_upper_bound(topic: u64) -> [u8; 8] {
    topic.saturating_add(1).to_be_bytes()
}

/// Key of consumer group `group` of `topic` in [`CF_GROUPS`].
pub(crate) fn group_key(topic: u64, group: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(8 + group.len());
    key.extend_from_slice(&topic.to_be_bytes());
    key.extend_from_slice(group.as_bytes());
    key
}

/// The group name encoded in a [`group_key`] of `topic`.
pub(crate) fn group_name_from_key(topic: u64, key: &[u8]) -> Option<&str> {
    let (prefix, name) = key.split_at_checked(8)?;
    if prefix != topic.to_be_bytes() {
        return None;
    }
    std::str::from_utf8(name).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_keys_sort_by_topic_then_id() {
        let keys = [
            message_key(1, 0),
            message_key(1, 255),
            message_key(1, 256),
            message_key(2, 0),
        ];
        assert!(keys.windows(2).all(|w| w[0] < w[1]));
        assert!(message_key(1, u64::MAX).as_slice() < topic_upper_bound(1).as_slice());
        assert_eq!(message_id_from_key(1, &message_key(1, 42)), Some(42));
        assert_eq!(message_id_from_key(2, &message_key(1, 42)), None);
    }

    #[test]
    fn names_round_trip() {
        assert_eq!(topic_name_from_key(&topic_name_key("ab")), Some("ab"));
        assert_eq!(topic_name_from_key(&topic_floor_key(3)), None);
        assert_eq!(topic_name_from_key(&page_mark_key(3)), None);
        assert_ne!(page_mark_key(3), topic_floor_key(3));
        assert_ne!(time_from_key(3), topic_floor_key(3));
        assert_eq!(topic_name_from_key(&time_from_key(3)), None);
        assert_eq!(topic_name_from_key(&time_mark_key(3, 0)), None);
        assert!(time_mark_key(3, u64::MAX) < time_mark_key(4, 0));
        assert_eq!(group_name_from_key(7, &group_key(7, "g")), Some("g"));
        assert_eq!(group_name_from_key(8, &group_key(7, "g")), None);
    }
}
