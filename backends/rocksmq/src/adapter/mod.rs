//! The mq-layer adapter: `msgstream::mq` traits over the engine.
//!
//! Message ids are the engine's `u64` ids as 8 big-endian bytes ([`MessageId::from_u64`]), so
//! byte order is id order; [`RocksmqClient::earliest_message_id`] is id 0, which precedes every
//! message (ids start at 1).

mod client;
mod consumer;
mod producer;
mod reader;

pub use client::RocksmqClient;
pub use consumer::RocksmqConsumer;
pub use producer::RocksmqProducer;
pub use reader::RocksmqReader;

use msgstream::mq::{Delivery, Message, MessageId};
use msgstream::msg::SharedStr;
use msgstream::{Error, Result};

use crate::{Rocksmq, StoredMessage};

/// The engine id of a message id of this backend; other shapes are `Error::Decode`.
pub(crate) fn engine_id(id: &MessageId) -> Result<u64> {
    id.as_u64().ok_or_else(|| {
        Error::Decode(format!(
            "a rocksmq message id is 8 bytes, got {} ({id:?})",
            id.as_bytes().len()
        ))
    })
}

/// The position a seek to `id` moves to: `id` itself, or the one after it.
pub(crate) fn seek_position(id: &MessageId, inclusive: bool) -> Result<u64> {
    let id = engine_id(id)?;
    Ok(if inclusive { id } else { id.saturating_add(1) })
}

/// The engine position of a seek (or reader start) to `id` on `topic`, checked against what the
/// topic holds now: id 0 (the earliest id) is always valid; an id past the newest is
/// `Error::PastEnd`; a position below the oldest message retention left is
/// `Error::BelowRetention`. Never a silent continue somewhere else.
pub(crate) fn checked_position(
    engine: &Rocksmq,
    topic: &str,
    id: &MessageId,
    inclusive: bool,
) -> Result<u64> {
    let raw = engine_id(id)?;
    if raw == 0 {
        return Ok(0);
    }
    let latest = engine.latest_message_id(topic)?;
    if latest.is_none_or(|latest| raw > latest) {
        return Err(Error::PastEnd {
            channel: topic.to_string(),
            id: id.clone(),
            latest: latest.map(MessageId::from_u64),
        });
    }
    let position = seek_position(id, inclusive)?;
    let next = latest.map_or(0, |latest| latest + 1);
    let oldest = engine.oldest_message_id(topic)?;
    if position < oldest.unwrap_or(next) {
        return Err(Error::BelowRetention {
            channel: topic.to_string(),
            id: id.clone(),
            oldest: oldest.map(MessageId::from_u64),
        });
    }
    Ok(position)
}

/// A stored message as delivered (ids are inline: no allocation per message).
#[inline(always)]
pub(crate) fn to_message(topic: &SharedStr, stored: StoredMessage, delivery: Delivery) -> Message {
    Message {
        topic: topic.clone(),
        id: MessageId::from_u64(stored.id),
        payload: stored.payload,
        properties: stored.properties,
        delivery,
    }
}
