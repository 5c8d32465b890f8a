//! The `msgstream::mq` adapter: channels are one-queue topics, subscriptions consumer groups,
//! message ids queue offsets (8 bytes, big-endian).

mod client;
mod consumer;
mod producer;
mod reader;
mod staged;

pub use client::RocketMqClient;
pub use consumer::RocketMqConsumer;
pub use producer::RocketMqProducer;
pub use reader::RocketMqReader;

use msgstream::mq::{validate_channel_name, Delivery, Message, MessageId, Properties};
use msgstream::msg::SharedStr;
use msgstream::{Error, Result};

use crate::protocol::properties::SYSTEM_KEYS;
use crate::protocol::stored::StoredMessage;

/// Longest broker-side topic or group name.
const MAX_NAME: usize = 127;

/// The broker-side name of a channel or subscription: RocketMQ names allow `|` but not `.`,
/// channel names the reverse, so `.` maps to `|` (and back in listings).
pub(crate) fn broker_name(kind: &str, name: &str) -> Result<String> {
    validate_channel_name(kind, name)?;
    if name.len() > MAX_NAME {
        return Err(Error::InvalidArgument(format!(
            "{kind} name {name:?} is longer than RocketMQ's {MAX_NAME} bytes"
        )));
    }
    Ok(name.replace('.', "|"))
}

/// The channel name of a broker-side name; `None` for names no channel maps to.
pub(crate) fn channel_name(broker: &str) -> Option<String> {
    let name = broker.replace('|', ".");
    validate_channel_name("channel", &name).ok().map(|()| name)
}

/// The queue offset a message id stands for; other shapes are `Error::Decode`.
pub(crate) fn offset_of(id: &MessageId) -> Result<i64> {
    id.as_u64()
        .and_then(|v| i64::try_from(v).ok())
        .ok_or_else(|| {
            Error::Decode(format!(
                "a rocketmq message id is an 8-byte queue offset, got {id:?}"
            ))
        })
}

/// The offset a seek or reader start at `id` moves to, refused outside what the queue holds:
/// past the end is `PastEnd` (right after the newest is the end, and allowed), below the
/// oldest still stored is `BelowRetention`.
pub(crate) async fn checked_offset(
    shared: &client::Shared,
    channel: &str,
    queue: &crate::MessageQueue,
    id: &MessageId,
    inclusive: bool,
) -> Result<i64> {
    let offset = offset_of(id)? + i64::from(!inclusive);
    let max = shared.max_offset(queue).await?;
    if offset > max {
        return Err(Error::PastEnd {
            channel: channel.to_owned(),
            id: id.clone(),
            latest: (max > 0).then(|| id_of(max - 1)),
        });
    }
    let min = shared.admin.min_offset(queue).await?;
    // The earliest id (offset 0, inclusive) means "from the oldest message still held".
    if offset == 0 && inclusive {
        return Ok(min);
    }
    if offset < min {
        return Err(Error::BelowRetention {
            channel: channel.to_owned(),
            id: id.clone(),
            oldest: (min < max).then(|| id_of(min)),
        });
    }
    Ok(offset)
}

/// A client error as the mq layer reports it for `channel`: a corrupt record names the
/// channel and the message id, not the broker-side topic and offset.
pub(crate) fn channel_error(channel: &str, error: crate::Error) -> Error {
    match error {
        crate::Error::CorruptRecord { offset, detail, .. } => Error::Corrupt {
            channel: channel.to_owned(),
            id: id_of(offset),
            detail,
        },
        other => other.into(),
    }
}

/// The id of the message at `offset`.
pub(crate) fn id_of(offset: i64) -> MessageId {
    MessageId::from_u64(u64::try_from(offset).unwrap_or(0))
}

/// A stored message as delivered: user properties only.
pub(crate) fn to_message(topic: &SharedStr, stored: StoredMessage, delivery: Delivery) -> Message {
    let properties: Properties = stored
        .properties
        .into_iter()
        .filter(|(k, _)| !SYSTEM_KEYS.contains(&k.as_str()))
        .collect();
    Message {
        topic: topic.clone(),
        id: id_of(stored.queue_offset),
        payload: stored.body,
        properties,
        delivery,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_ids() {
        assert_eq!(
            broker_name("channel", "by-dev.dml_0").expect("ok"),
            "by-dev|dml_0"
        );
        assert_eq!(
            channel_name("by-dev|dml_0").as_deref(),
            Some("by-dev.dml_0")
        );
        assert_eq!(channel_name("%RETRY%g"), None);
        assert!(matches!(
            broker_name("channel", "a/b"),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            broker_name("channel", &"x".repeat(128)),
            Err(Error::InvalidArgument(_))
        ));
        assert_eq!(offset_of(&id_of(42)).expect("id"), 42);
        for bad in [&[][..], &[1, 2, 3][..], &[0xFF; 8][..], &[0; 9][..]] {
            assert!(matches!(
                offset_of(&MessageId::from_backend_bytes(bad)),
                Err(Error::Decode(_))
            ));
        }
    }
}
