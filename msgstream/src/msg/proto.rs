//! Protobuf types of the wire contract (`shared/protocols/message-model.md`), field-compatible
//! with Milvus's `common.proto` and `msg.proto`.
//!
//! Hand-written prost derives are the one source of truth: no `.proto` compilation step, no
//! system `protoc`. Every message kind has `base` at field 1, so [`MsgHeader`] decodes the kind of
//! any payload.

use std::collections::HashMap;

/// Message kinds. The field holding it is an `i32` (proto3 open enum), so values the application
/// chooses for its own kinds survive decoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum MsgType {
    /// Not set.
    Undefined = 0,
    /// Create a collection.
    CreateCollection = 100,
    /// Drop a collection.
    DropCollection = 101,
    /// Create a partition.
    CreatePartition = 200,
    /// Drop a partition.
    DropPartition = 201,
    /// Insert rows.
    Insert = 400,
    /// Delete rows by primary key.
    Delete = 401,
    /// Flush segments.
    Flush = 402,
    /// Upsert rows.
    Upsert = 404,
    /// A timetick: no later message on this channel has a timestamp at or below this one.
    TimeTick = 1200,
    /// A data node's timetick.
    DataNodeTt = 1208,
}

/// The common header of every message.
#[derive(Clone, PartialEq, prost::Message)]
pub struct MsgBase {
    /// Kind, a [`MsgType`] value or an application-defined one.
    #[prost(enumeration = "MsgType", tag = "1")]
    pub msg_type: i32,
    /// Producer-assigned id; Insert/Delete duplicates inside one tt pack are dropped by it.
    #[prost(int64, tag = "2")]
    pub msg_id: i64,
    /// Timestamp (opaque u64, compared numerically).
    #[prost(uint64, tag = "3")]
    pub timestamp: u64,
    /// Producing node.
    #[prost(int64, tag = "4")]
    pub source_id: i64,
    /// Target node.
    #[prost(int64, tag = "5")]
    pub target_id: i64,
    /// Free-form properties of the message itself (not the transport properties).
    #[prost(map = "string, string", tag = "6")]
    pub properties: HashMap<String, String>,
}

impl MsgBase {
    /// A header of kind `msg_type` at `timestamp`.
    pub fn new(msg_type: i32, msg_id: i64, timestamp: u64) -> Self {
        MsgBase {
            msg_type,
            msg_id,
            timestamp,
            ..MsgBase::default()
        }
    }
}

/// Decodes just the header of any payload.
#[derive(Clone, PartialEq, prost::Message)]
pub struct MsgHeader {
    /// The header; `None` when the payload has no field 1.
    #[prost(message, optional, tag = "1")]
    pub base: Option<MsgBase>,
}

/// One row of opaque data.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Blob {
    /// The bytes.
    #[prost(bytes = "vec", tag = "1")]
    pub value: Vec<u8>,
}

/// Rows to insert.
#[derive(Clone, PartialEq, prost::Message)]
pub struct InsertRequest {
    /// Header.
    #[prost(message, optional, tag = "1")]
    pub base: Option<MsgBase>,
    /// Shard (channel) name.
    #[prost(string, tag = "2")]
    pub shard_name: String,
    /// Database name.
    #[prost(string, tag = "3")]
    pub db_name: String,
    /// Collection name.
    #[prost(string, tag = "4")]
    pub collection_name: String,
    /// Partition name.
    #[prost(string, tag = "5")]
    pub partition_name: String,
    /// Database id.
    #[prost(int64, tag = "6")]
    pub db_id: i64,
    /// Collection id.
    #[prost(int64, tag = "7")]
    pub collection_id: i64,
    /// Partition id.
    #[prost(int64, tag = "8")]
    pub partition_id: i64,
    /// Segment id.
    #[prost(int64, tag = "9")]
    pub segment_id: i64,
    /// One timestamp per row.
    #[prost(uint64, repeated, tag = "10")]
    pub timestamps: Vec<u64>,
    /// One row id per row.
    #[prost(int64, repeated, tag = "11")]
    pub row_ids: Vec<i64>,
    /// Row-based data, one blob per row (may be empty when column data is used).
    #[prost(message, repeated, tag = "12")]
    pub row_data: Vec<Blob>,
    /// Milvus column data (`schema.FieldData`), kept as opaque encoded messages.
    #[prost(bytes = "vec", repeated, tag = "13")]
    pub fields_data: Vec<Vec<u8>>,
    /// Number of rows.
    #[prost(uint64, tag = "14")]
    pub num_rows: u64,
}

/// Rows to delete, by primary key.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DeleteRequest {
    /// Header.
    #[prost(message, optional, tag = "1")]
    pub base: Option<MsgBase>,
    /// Shard (channel) name.
    #[prost(string, tag = "2")]
    pub shard_name: String,
    /// Database name.
    #[prost(string, tag = "3")]
    pub db_name: String,
    /// Collection name.
    #[prost(string, tag = "4")]
    pub collection_name: String,
    /// Partition name.
    #[prost(string, tag = "5")]
    pub partition_name: String,
    /// Database id.
    #[prost(int64, tag = "6")]
    pub db_id: i64,
    /// Collection id.
    #[prost(int64, tag = "7")]
    pub collection_id: i64,
    /// Partition id.
    #[prost(int64, tag = "8")]
    pub partition_id: i64,
    /// Primary keys of the deleted rows.
    #[prost(int64, repeated, tag = "9")]
    pub int64_primary_keys: Vec<i64>,
    /// One timestamp per row.
    #[prost(uint64, repeated, tag = "10")]
    pub timestamps: Vec<u64>,
    /// Number of rows.
    #[prost(int64, tag = "11")]
    pub num_rows: i64,
}

/// A timetick.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TimeTickMsg {
    /// Header; `base.timestamp` is the tick.
    #[prost(message, optional, tag = "1")]
    pub base: Option<MsgBase>,
}

/// Create a collection.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CreateCollectionRequest {
    /// Header.
    #[prost(message, optional, tag = "1")]
    pub base: Option<MsgBase>,
    /// Database name.
    #[prost(string, tag = "2")]
    pub db_name: String,
    /// Collection name.
    #[prost(string, tag = "3")]
    pub collection_name: String,
    /// Partition name.
    #[prost(string, tag = "4")]
    pub partition_name: String,
    /// Database id.
    #[prost(int64, tag = "7")]
    pub db_id: i64,
    /// Collection id.
    #[prost(int64, tag = "8")]
    pub collection_id: i64,
    /// Partition id.
    #[prost(int64, tag = "9")]
    pub partition_id: i64,
    /// Encoded schema.
    #[prost(bytes = "vec", tag = "10")]
    pub schema: Vec<u8>,
    /// Virtual channel names.
    #[prost(string, repeated, tag = "11")]
    pub virtual_channel_names: Vec<String>,
    /// Physical channel names.
    #[prost(string, repeated, tag = "12")]
    pub physical_channel_names: Vec<String>,
}

/// Drop a collection.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DropCollectionRequest {
    /// Header.
    #[prost(message, optional, tag = "1")]
    pub base: Option<MsgBase>,
    /// Database name.
    #[prost(string, tag = "2")]
    pub db_name: String,
    /// Collection name.
    #[prost(string, tag = "3")]
    pub collection_name: String,
    /// Database id.
    #[prost(int64, tag = "4")]
    pub db_id: i64,
    /// Collection id.
    #[prost(int64, tag = "5")]
    pub collection_id: i64,
}

/// Where a consumer was on one channel, plus the time watermark at that point.
#[derive(Clone, PartialEq, Eq, Hash, prost::Message)]
pub struct MsgPosition {
    /// Channel.
    #[prost(string, tag = "1")]
    pub channel_name: String,
    /// Serialized [`crate::mq::MessageId`] of the backend.
    #[prost(bytes = "vec", tag = "2")]
    pub msg_id: Vec<u8>,
    /// Subscription the position was taken by.
    #[prost(string, tag = "3")]
    pub msg_group: String,
    /// Watermark: everything at or below it on this channel was already delivered.
    #[prost(uint64, tag = "4")]
    pub timestamp: u64,
}

impl MsgPosition {
    /// The protobuf encoding, for applications that store positions.
    pub fn to_bytes(&self) -> Vec<u8> {
        prost::Message::encode_to_vec(self)
    }

    /// Parses stored position bytes. Garbage and positions without a channel are `Error::Decode`.
    pub fn from_bytes(bytes: &[u8]) -> crate::Result<Self> {
        let position: MsgPosition = prost::Message::decode(bytes)?;
        if position.channel_name.is_empty() {
            return Err(crate::Error::Decode(
                "position has no channel name".to_string(),
            ));
        }
        Ok(position)
    }
}
