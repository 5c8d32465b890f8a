//! Milvus `common.proto`: the header every message starts with, and stream positions.

use bytes::{Buf, BufMut, Bytes};
use prost::encoding::{self, DecodeContext, WireType};

use crate::base::{MessageId, SharedStr};

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
    /// Free-form properties of the message itself (not the transport properties). A protobuf
    /// `map<string, string>` on the wire, kept as a list so that re-encoding writes the entries
    /// in the order they came in, which a hash map would shuffle.
    #[prost(message, repeated, tag = "6")]
    pub properties: Vec<Property>,
    /// Cross-cluster replication details (deprecated by Milvus, still written by older nodes).
    #[prost(message, optional, tag = "7")]
    pub replicate_info: Option<ReplicateInfo>,
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

/// One entry of [`MsgBase::properties`].
///
/// Go and C++ protobuf write both fields of a map entry even when they are empty, while a derived
/// prost message would leave empty ones out; this type writes both, so an entry Milvus wrote
/// re-encodes to the same bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Property {
    /// Key (entry field 1).
    pub key: String,
    /// Value (entry field 2).
    pub value: String,
}

impl prost::Message for Property {
    fn encode_raw(&self, buf: &mut impl BufMut) {
        encoding::string::encode(1, &self.key, buf);
        encoding::string::encode(2, &self.value, buf);
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl Buf,
        ctx: DecodeContext,
    ) -> Result<(), prost::DecodeError> {
        match tag {
            1 => encoding::string::merge(wire_type, &mut self.key, buf, ctx),
            2 => encoding::string::merge(wire_type, &mut self.value, buf, ctx),
            _ => encoding::skip_field(wire_type, tag, buf, ctx),
        }
    }

    fn encoded_len(&self) -> usize {
        encoding::string::encoded_len(1, &self.key) + encoding::string::encoded_len(2, &self.value)
    }

    fn clear(&mut self) {
        self.key.clear();
        self.value.clear();
    }
}

/// Replication details of a message copied from another cluster.
#[derive(Clone, PartialEq, Eq, Hash, prost::Message)]
pub struct ReplicateInfo {
    /// Whether the message is a replicated copy.
    #[prost(bool, tag = "1")]
    pub is_replicate: bool,
    /// Timestamp of the original message.
    #[prost(uint64, tag = "2")]
    pub msg_timestamp: u64,
    /// Id of the replication source.
    #[prost(string, tag = "3")]
    pub replicate_id: String,
}

/// Decodes just the header of any payload.
#[derive(Clone, PartialEq, prost::Message)]
pub struct MsgHeader {
    /// The header; `None` when the payload has no field 1.
    #[prost(message, optional, tag = "1")]
    pub base: Option<MsgBase>,
}

/// One row of opaque data.
///
/// `Bytes`, not `Vec<u8>`: decoded from a payload held as `Bytes` (as every consumer delivers
/// it), the row is a slice of the payload, with no allocation or copy. It then keeps the
/// buffer it was read into alive (on rocksmq, the buffer of the read that brought it, a few
/// KiB to a few MiB) for as long as the application holds it; `Bytes::copy_from_slice` of it
/// detaches it. The wire encoding is the same.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Blob {
    /// The bytes.
    #[prost(bytes = "bytes", tag = "1")]
    pub value: bytes::Bytes,
}

/// Which write-ahead log a position was taken on (Milvus `WALName`), so a position stored by
/// one kind of log is recognisable when fed back to another.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum WalName {
    /// Not recorded.
    Unknown = 0,
    /// Milvus's embedded RocksMQ.
    RocksMq = 1,
    /// Apache Pulsar.
    Pulsar = 2,
    /// Apache Kafka.
    Kafka = 3,
    /// Woodpecker.
    WoodPecker = 4,
    /// Milvus's test log.
    Test = 999,
}

/// Where a consumer was on one channel, plus the time watermark at that point.
///
/// Every delivered message carries one, so its parts are cheap to make and to drop: the names
/// are [`SharedStr`]s, which the stream's consumer holds once per channel, and `msg_id` is a
/// [`MessageId`], whose bytes (up to 23, every backend's) are held inline. Making a message's
/// position therefore allocates nothing and touches no shared reference count: three
/// `String`/`Vec` fields cost three allocations on the consumer task and three frees on the
/// application's thread, and an id sliced from one buffer per received batch still cost an
/// atomic increment there and a decrement here (the tt stream over rocksmq reads about 9 %
/// more per second without it). The encoding is the protobuf message Milvus writes, field
/// for field (written by hand below, as prost derives neither type).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct MsgPosition {
    /// Channel.
    pub channel_name: SharedStr,
    /// The backend's id of the message (field 2, its bytes as the backend serializes them).
    pub msg_id: MessageId,
    /// Subscription the position was taken by.
    pub msg_group: SharedStr,
    /// Watermark: everything at or below it on this channel was already delivered.
    pub timestamp: u64,
    /// The log the position belongs to, a [`WalName`] value (others survive decoding).
    pub wal_name: i32,
}

/// Encodes a proto3 `string` field as prost does: nothing when it is empty.
fn encode_str(tag: u32, value: &str, buf: &mut impl BufMut) {
    if !value.is_empty() {
        encoding::encode_key(tag, WireType::LengthDelimited, buf);
        encoding::encode_varint(value.len() as u64, buf);
        buf.put_slice(value.as_bytes());
    }
}

/// The encoded length of what [`encode_str`] writes.
fn str_len(tag: u32, value: &str) -> usize {
    if value.is_empty() {
        0
    } else {
        encoding::key_len(tag) + encoding::encoded_len_varint(value.len() as u64) + value.len()
    }
}

/// Decodes a proto3 `string` field (a later occurrence replaces an earlier one, as in prost).
fn merge_str(
    wire_type: WireType,
    value: &mut SharedStr,
    buf: &mut impl Buf,
    ctx: DecodeContext,
) -> Result<(), prost::DecodeError> {
    let mut decoded = String::new();
    encoding::string::merge(wire_type, &mut decoded, buf, ctx)?;
    *value = SharedStr::from(decoded);
    Ok(())
}

impl prost::Message for MsgPosition {
    fn encode_raw(&self, buf: &mut impl BufMut) {
        encode_str(1, &self.channel_name, buf);
        let id = self.msg_id.as_bytes();
        if !id.is_empty() {
            encoding::encode_key(2, WireType::LengthDelimited, buf);
            encoding::encode_varint(id.len() as u64, buf);
            buf.put_slice(id);
        }
        encode_str(3, &self.msg_group, buf);
        if self.timestamp != 0 {
            encoding::uint64::encode(4, &self.timestamp, buf);
        }
        if self.wal_name != 0 {
            encoding::int32::encode(5, &self.wal_name, buf);
        }
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl Buf,
        ctx: DecodeContext,
    ) -> Result<(), prost::DecodeError> {
        match tag {
            1 => merge_str(wire_type, &mut self.channel_name, buf, ctx),
            2 => {
                let mut id = Bytes::new();
                encoding::bytes::merge(wire_type, &mut id, buf, ctx)?;
                self.msg_id = MessageId::from_backend_bytes(id);
                Ok(())
            }
            3 => merge_str(wire_type, &mut self.msg_group, buf, ctx),
            4 => encoding::uint64::merge(wire_type, &mut self.timestamp, buf, ctx),
            5 => encoding::int32::merge(wire_type, &mut self.wal_name, buf, ctx),
            _ => encoding::skip_field(wire_type, tag, buf, ctx),
        }
    }

    fn encoded_len(&self) -> usize {
        str_len(1, &self.channel_name)
            + match self.msg_id.as_bytes().len() {
                0 => 0,
                len => encoding::key_len(2) + encoding::encoded_len_varint(len as u64) + len,
            }
            + str_len(3, &self.msg_group)
            + if self.timestamp == 0 {
                0
            } else {
                encoding::uint64::encoded_len(4, &self.timestamp)
            }
            + if self.wal_name == 0 {
                0
            } else {
                encoding::int32::encoded_len(5, &self.wal_name)
            }
    }

    fn clear(&mut self) {
        *self = MsgPosition::default();
    }
}

impl MsgPosition {
    /// [`Self::wal_name`] as a [`WalName`] ([`WalName::Unknown`] for values it does not name).
    pub fn wal_name(&self) -> WalName {
        WalName::try_from(self.wal_name).unwrap_or(WalName::Unknown)
    }

    /// Sets [`Self::wal_name`].
    pub fn set_wal_name(&mut self, value: WalName) {
        self.wal_name = value as i32;
    }

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
