//! `TsMsg`: a decoded, typed message with its routing keys and stream position.

use bytes::Bytes;
use prost::Message as _;

use super::proto::{
    CreateCollectionRequest, CreatePartitionRequest, DataNodeTtMsg, DeleteRequest,
    DropCollectionRequest, DropPartitionRequest, InsertRequest, MsgBase, MsgHeader, MsgPosition,
    MsgType, TimeTickMsg,
};
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
#[derive(Debug, Clone, PartialEq)]
pub struct TsMsg {
    /// The message itself.
    pub body: MsgBody,
    /// Routing keys for repacking (`key % channels`); Insert and Delete have one per row.
    pub hash_keys: Vec<u32>,
    /// Where it was consumed from; `None` for a message not read from a channel.
    pub position: Option<MsgPosition>,
    /// Transport properties (trace context, user key/values) as produced.
    pub properties: Properties,
}

impl TsMsg {
    /// A message with no hash keys, position or properties.
    #[inline]
    pub fn new(body: MsgBody) -> Self {
        TsMsg {
            body,
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

    /// The header, if the body has one.
    pub fn header(&self) -> Option<&MsgBase> {
        self.body.header()
    }

    /// A copy of the header (a default one when the body has none).
    pub fn base(&self) -> MsgBase {
        self.header().cloned().unwrap_or_default()
    }

    /// The kind, as the raw `msg_type` value.
    pub fn msg_type(&self) -> i32 {
        match &self.body {
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
    pub fn is_time_tick(&self) -> bool {
        matches!(self.body, MsgBody::TimeTick(_))
    }

    /// Producer-assigned id from the header.
    pub fn id(&self) -> i64 {
        self.header().map_or(0, |b| b.msg_id)
    }

    /// Earliest timestamp: min of the row timestamps for Insert/Delete, else the header's.
    pub fn begin_ts(&self) -> u64 {
        self.body.begin_ts()
    }

    /// Latest timestamp: max of the row timestamps for Insert/Delete, else the header's.
    pub fn end_ts(&self) -> u64 {
        self.body.end_ts()
    }

    /// The protobuf payload (header at field 1). Properties travel separately.
    pub fn encode(&self) -> Bytes {
        match &self.body {
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
