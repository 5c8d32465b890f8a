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

use std::sync::Arc;

use bytes::{BufMut, BytesMut};
use msgstream::mq::{Delivery, Message, MessageId};
use msgstream::{Error, Result};

use crate::StoredMessage;

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

/// The message ids of `ids`, sharing one 8-bytes-per-id buffer: one allocation per batch
/// instead of one per message.
pub(crate) fn message_ids(ids: impl Iterator<Item = u64>) -> Vec<MessageId> {
    let mut buffer = BytesMut::with_capacity(ids.size_hint().0 * 8);
    for id in ids {
        buffer.put_u64(id);
    }
    let mut buffer = buffer.freeze();
    (0..buffer.len() / 8)
        .map(|_| MessageId::from_backend_bytes(buffer.split_to(8)))
        .collect()
}

/// A batch read from the engine, with its message ids, ready to be delivered one by one.
pub(crate) fn with_ids(
    batch: Vec<StoredMessage>,
) -> impl Iterator<Item = (MessageId, StoredMessage)> {
    message_ids(batch.iter().map(|m| m.id))
        .into_iter()
        .zip(batch)
}

pub(crate) fn to_message(
    topic: &Arc<str>,
    (id, stored): (MessageId, StoredMessage),
    delivery: Delivery,
) -> Message {
    Message {
        topic: topic.clone(),
        id,
        payload: stored.payload,
        properties: stored.properties,
        delivery,
    }
}
