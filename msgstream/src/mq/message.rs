//! What travels through the mq layer: outgoing and delivered messages.

use bytes::Bytes;

use crate::base::{MessageId, Properties, SharedStr};

/// A message to send: payload plus properties.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProducerMessage {
    /// Encoded payload (for streams: the protobuf of a `TsMsg`).
    pub payload: Bytes,
    /// Properties stored beside the payload.
    pub properties: Properties,
    /// The message's timestamp ([`crate::mq::message_timestamp`] of the payload), for
    /// backends that keep a time index (rocksmq). The streams set it; `None` tells such an
    /// index nothing, so it must assume the latest possible time and a time search reads
    /// from that message on (still exact, only longer). A wrong value makes time searches
    /// miss messages: leave it `None` rather than guess.
    pub timestamp: Option<u64>,
}

impl ProducerMessage {
    /// A message with no properties and no timestamp.
    pub fn new(payload: impl Into<Bytes>) -> Self {
        ProducerMessage {
            payload: payload.into(),
            properties: Properties::new(),
            timestamp: None,
        }
    }

    /// Same message carrying `timestamp` (see [`ProducerMessage::timestamp`]).
    pub fn with_timestamp(mut self, timestamp: u64) -> Self {
        self.timestamp = Some(timestamp);
        self
    }
}

/// Identifies the delivery a message came from, so that an ack can tell whether the consumer
/// cursor it would move still belongs to that delivery (the idea of lapin's `Acker::usable()`).
///
/// A consumer bumps its epoch on every seek and reconnect; acking a message of an older epoch
/// returns [`crate::Error::StaleDelivery`] instead of moving the wrong cursor or doing nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Delivery {
    /// Consumer-local counter, bumped on seek and reconnect.
    pub epoch: u64,
}

/// A message delivered by a consumer or a reader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Channel it was read from. Backends intern their consumers' channel names
    /// ([`SharedStr::interned`]), so that making and dropping a message's copy touches no
    /// reference count shared with the application's thread.
    pub topic: SharedStr,
    /// Its id in that channel.
    pub id: MessageId,
    /// Payload as produced.
    pub payload: Bytes,
    /// Properties as produced.
    pub properties: Properties,
    /// Which delivery of the consumer produced it (readers use the default).
    pub delivery: Delivery,
}
