//! `TsMsg`: a typed message with its routing keys and stream position.

use bytes::Bytes;
use prost::Message as _;

use super::proto::{
    CreateCollectionRequest, CreatePartitionRequest, DataNodeTtMsg, DeleteRequest,
    DropCollectionRequest, DropPartitionRequest, InsertRequest, MsgBase, MsgHeader, MsgPosition,
    MsgType, TimeTickMsg,
};
use super::received::ReceivedInsert;
use crate::base::Properties;
use crate::{Error, Result};

/// A message kind the core does not decode, carried as its full protobuf encoding.
///
/// The payload must hold `base` at field 1 (checked by [`CustomMsg::from_payload`]); the
/// application decodes the rest with its own prost type. Re-encoding gives back the payload
/// unchanged, so nothing in it is lost on the way through.
#[derive(Debug, Clone, PartialEq)]
pub struct CustomMsg {
    /// The decoded header.
    pub base: MsgBase,
    /// The whole encoded message, header included.
    pub payload: Bytes,
}

impl CustomMsg {
    /// Wraps an encoded message, reading its header.
    pub fn from_payload(payload: impl Into<Bytes>) -> Result<Self> {
        let payload = payload.into();
        let base = MsgHeader::decode(payload.as_ref())?
            .base
            .ok_or_else(|| Error::Decode("payload has no MsgBase at field 1".to_string()))?;
        Ok(CustomMsg { base, payload })
    }

    /// Encodes an application message (which must have its `MsgBase` at field 1).
    pub fn encode_from(message: &impl prost::Message) -> Result<Self> {
        Self::from_payload(message.encode_to_vec())
    }
}

/// The typed body of a [`TsMsg`].
#[derive(Debug, Clone, PartialEq)]
pub enum MsgBody {
    /// Rows to insert.
    Insert(InsertRequest),
    /// Rows to delete.
    Delete(DeleteRequest),
    /// A timetick.
    TimeTick(TimeTickMsg),
    /// Create a collection.
    CreateCollection(CreateCollectionRequest),
    /// Drop a collection.
    DropCollection(DropCollectionRequest),
    /// Create a partition.
    CreatePartition(CreatePartitionRequest),
    /// Drop a partition.
    DropPartition(DropPartitionRequest),
    /// A data node's timetick (an ordinary message here, not a stream timetick).
    DataNodeTt(DataNodeTtMsg),
    /// An application-defined kind, registered with [`crate::msg::DecoderRegistry::register_custom`].
    Custom(CustomMsg),
    /// A kind no decoder is registered for. It still reaches the application, header decoded
    /// and payload intact, because dropping it would lose a message another writer meant for
    /// someone.
    Unknown(CustomMsg),
}

impl MsgBody {
    /// Earliest timestamp: min of the row timestamps for Insert/Delete, else the header's.
    pub fn begin_ts(&self) -> u64 {
        self.row_timestamps()
            .and_then(|ts| ts.iter().copied().min())
            .unwrap_or_else(|| self.header_timestamp())
    }

    /// Latest timestamp: max of the row timestamps for Insert/Delete, else the header's.
    pub fn end_ts(&self) -> u64 {
        self.row_timestamps()
            .and_then(|ts| ts.iter().copied().max())
            .unwrap_or_else(|| self.header_timestamp())
    }

    fn row_timestamps(&self) -> Option<&[u64]> {
        match self {
            MsgBody::Insert(m) if !m.timestamps.is_empty() => Some(&m.timestamps),
            MsgBody::Delete(m) if !m.timestamps.is_empty() => Some(&m.timestamps),
            _ => None,
        }
    }

    fn header_timestamp(&self) -> u64 {
        self.header().map_or(0, |b| b.timestamp)
    }

    /// The header, if the body has one.
    pub fn header(&self) -> Option<&MsgBase> {
        match self {
            MsgBody::Insert(m) => m.base.as_ref(),
            MsgBody::Delete(m) => m.base.as_ref(),
            MsgBody::TimeTick(m) => m.base.as_ref(),
            MsgBody::CreateCollection(m) => m.base.as_ref(),
            MsgBody::DropCollection(m) => m.base.as_ref(),
            MsgBody::CreatePartition(m) => m.base.as_ref(),
            MsgBody::DropPartition(m) => m.base.as_ref(),
            MsgBody::DataNodeTt(m) => m.base.as_ref(),
            MsgBody::Custom(m) | MsgBody::Unknown(m) => Some(&m.base),
        }
    }
}

/// A typed message: body, routing keys, and where it was read from.
///
/// The body is read through [`TsMsg::body`]. A message built by the application holds it
/// decoded; an insert a stream received holds its checked payload and decodes the body on the
/// first call (see `ReceivedInsert`): kind, id and timestamps ([`TsMsg::msg_type`],
/// [`TsMsg::id`], [`TsMsg::begin_ts`], [`TsMsg::end_ts`]) are known without decoding. Either
/// way the body is the same value: a payload that does not decode never becomes a `TsMsg`
/// (the stream reports it in its place), and [`TsMsg::encode`] of a received message gives
/// back the payload as it was received.
#[derive(Clone)]
pub struct TsMsg {
    held: Held,
    /// Routing keys for repacking (`key % channels`); Insert and Delete have one per row.
    pub hash_keys: Vec<u32>,
    /// Where it was consumed from; `None` for a message not read from a channel.
    pub position: Option<MsgPosition>,
    /// Transport properties (trace context, user key/values) as produced.
    pub properties: Properties,
}

/// How a message holds its body: boxed, so that a message is small to move whatever its kind.
#[derive(Clone)]
enum Held {
    Decoded(Box<MsgBody>),
    Received(ReceivedInsert),
}

impl TsMsg {
    /// A message with no hash keys, position or properties.
    #[inline]
    pub fn new(body: MsgBody) -> Self {
        TsMsg::holding(Held::Decoded(Box::new(body)))
    }

    /// A received insert, its body decoded on first access.
    #[inline]
    pub(crate) fn received(insert: ReceivedInsert) -> Self {
        TsMsg::holding(Held::Received(insert))
    }

    #[inline(always)]
    fn holding(held: Held) -> Self {
        TsMsg {
            held,
            hash_keys: Vec::new(),
            position: None,
            properties: Properties::new(),
        }
    }

    /// A timetick at `timestamp`.
    pub fn time_tick(timestamp: u64) -> Self {
        TsMsg::new(MsgBody::TimeTick(TimeTickMsg {
            base: Some(MsgBase::new(MsgType::TimeTick as i32, 0, timestamp)),
        }))
    }

    /// Same message with these hash keys.
    pub fn with_hash_keys(mut self, keys: Vec<u32>) -> Self {
        self.hash_keys = keys;
        self
    }

    /// The message itself (a received insert is decoded on the first call).
    #[inline]
    pub fn body(&self) -> &MsgBody {
        match &self.held {
            Held::Decoded(body) => body,
            Held::Received(insert) => insert.body(),
        }
    }

    /// Replaces the message itself (to change a received body: [`TsMsg::into_body`] or a
    /// clone of [`TsMsg::body`], changed, then set back).
    pub fn set_body(&mut self, body: MsgBody) {
        self.held = Held::Decoded(Box::new(body));
    }

    /// The message itself, taken out.
    pub fn into_body(self) -> MsgBody {
        match self.held {
            Held::Decoded(body) => *body,
            Held::Received(insert) => insert.into_body(),
        }
    }

    /// The header, if the body has one.
    pub fn header(&self) -> Option<&MsgBase> {
        self.body().header()
    }

    /// A copy of the header (a default one when the body has none).
    pub fn base(&self) -> MsgBase {
        self.header().cloned().unwrap_or_default()
    }

    /// The kind, as the raw `msg_type` value.
    pub fn msg_type(&self) -> i32 {
        let body = match &self.held {
            Held::Decoded(body) => body,
            Held::Received(insert) => return insert.head().msg_type,
        };
        match &**body {
            MsgBody::Insert(_) => MsgType::Insert as i32,
            MsgBody::Delete(_) => MsgType::Delete as i32,
            MsgBody::TimeTick(_) => MsgType::TimeTick as i32,
            MsgBody::CreateCollection(_) => MsgType::CreateCollection as i32,
            MsgBody::DropCollection(_) => MsgType::DropCollection as i32,
            MsgBody::CreatePartition(_) => MsgType::CreatePartition as i32,
            MsgBody::DropPartition(_) => MsgType::DropPartition as i32,
            MsgBody::DataNodeTt(_) => MsgType::DataNodeTt as i32,
            MsgBody::Custom(m) | MsgBody::Unknown(m) => m.base.msg_type,
        }
    }

    /// Whether this is a timetick.
    #[inline]
    pub fn is_time_tick(&self) -> bool {
        matches!(&self.held, Held::Decoded(body) if matches!(**body, MsgBody::TimeTick(_)))
    }

    /// Producer-assigned id from the header.
    pub fn id(&self) -> i64 {
        match &self.held {
            Held::Decoded(body) => body.header().map_or(0, |b| b.msg_id),
            Held::Received(insert) => insert.head().msg_id,
        }
    }

    /// Earliest timestamp: min of the row timestamps for Insert/Delete, else the header's.
    #[inline]
    pub fn begin_ts(&self) -> u64 {
        match &self.held {
            Held::Decoded(body) => body.begin_ts(),
            Held::Received(insert) => insert.head().begin_ts,
        }
    }

    /// Latest timestamp: max of the row timestamps for Insert/Delete, else the header's.
    #[inline]
    pub fn end_ts(&self) -> u64 {
        match &self.held {
            Held::Decoded(body) => body.end_ts(),
            Held::Received(insert) => insert.head().end_ts,
        }
    }

    /// The first row id of an insert, or the first legacy primary key of a delete (0 when it
    /// has none); `None` for other kinds. Part of a message's de-duplication identity, known
    /// without decoding a received insert.
    #[inline]
    pub(crate) fn first_row(&self) -> Option<i64> {
        match &self.held {
            Held::Received(insert) => Some(insert.head().first_row),
            Held::Decoded(body) => match &**body {
                MsgBody::Insert(m) => Some(m.row_ids.first().copied().unwrap_or_default()),
                MsgBody::Delete(m) => {
                    Some(m.int64_primary_keys.first().copied().unwrap_or_default())
                }
                _ => None,
            },
        }
    }

    /// Whether the body is decoded (always, but for a received insert not read yet).
    #[cfg(test)]
    pub(crate) fn is_decoded(&self) -> bool {
        match &self.held {
            Held::Decoded(_) => true,
            Held::Received(insert) => insert.is_decoded(),
        }
    }

    /// The body if it is held decoded; `None` for a received insert (whose body is an insert
    /// whether or not it was read).
    #[inline]
    pub(crate) fn decoded_body(&self) -> Option<&MsgBody> {
        match &self.held {
            Held::Decoded(body) => Some(body),
            Held::Received(_) => None,
        }
    }

    /// The protobuf payload (header at field 1). Properties travel separately. A received
    /// insert gives back its payload as received.
    pub fn encode(&self) -> Bytes {
        let body = match &self.held {
            Held::Decoded(body) => body,
            Held::Received(insert) => return insert.payload().clone(),
        };
        match &**body {
            MsgBody::Insert(m) => m.encode_to_vec().into(),
            MsgBody::Delete(m) => m.encode_to_vec().into(),
            MsgBody::TimeTick(m) => m.encode_to_vec().into(),
            MsgBody::CreateCollection(m) => m.encode_to_vec().into(),
            MsgBody::DropCollection(m) => m.encode_to_vec().into(),
            MsgBody::CreatePartition(m) => m.encode_to_vec().into(),
            MsgBody::DropPartition(m) => m.encode_to_vec().into(),
            MsgBody::DataNodeTt(m) => m.encode_to_vec().into(),
            MsgBody::Custom(m) | MsgBody::Unknown(m) => m.payload.clone(),
        }
    }
}

impl PartialEq for TsMsg {
    /// Equal bodies (however held), hash keys, positions and properties.
    fn eq(&self, other: &Self) -> bool {
        self.body() == other.body()
            && self.hash_keys == other.hash_keys
            && self.position == other.position
            && self.properties == other.properties
    }
}

impl std::fmt::Debug for TsMsg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TsMsg")
            .field("body", self.body())
            .field("hash_keys", &self.hash_keys)
            .field("position", &self.position)
            .field("properties", &self.properties)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_of_rows_and_headers() {
        let insert = TsMsg::new(MsgBody::Insert(InsertRequest {
            base: Some(MsgBase::new(MsgType::Insert as i32, 1, 99)),
            timestamps: [7, 3, 5].into(),
            ..Default::default()
        }));
        assert_eq!((insert.begin_ts(), insert.end_ts()), (3, 7));
        let tick = TsMsg::time_tick(42);
        assert_eq!((tick.begin_ts(), tick.end_ts()), (42, 42));
        assert!(tick.is_time_tick());
    }

    #[test]
    fn custom_needs_a_header() {
        assert!(CustomMsg::from_payload(vec![0xff, 0xff]).is_err());
        let tick = TimeTickMsg {
            base: Some(MsgBase::new(5000, 1, 3)),
        };
        let custom = CustomMsg::encode_from(&tick).expect("header present");
        assert_eq!(custom.base.msg_type, 5000);
    }
}
