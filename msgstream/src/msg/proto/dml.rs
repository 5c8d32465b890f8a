//! Milvus `msg.proto` data messages: deletes and timeticks (inserts are in `insert`).

use super::common::MsgBase;

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
    /// Primary keys as Milvus before 2.2 wrote them; newer writers use `primary_keys`.
    #[prost(int64, repeated, tag = "9")]
    pub int64_primary_keys: Vec<i64>,
    /// One timestamp per row.
    #[prost(uint64, repeated, tag = "10")]
    pub timestamps: Vec<u64>,
    /// Number of rows.
    #[prost(int64, tag = "11")]
    pub num_rows: i64,
    /// Primary keys of the deleted rows (Milvus ≥ 2.2), integer or string.
    #[prost(message, optional, tag = "12")]
    pub primary_keys: Option<Ids>,
    /// Segment the rows are deleted from.
    #[prost(int64, tag = "13")]
    pub segment_id: i64,
    /// The delete expression, as a serialized plan; a slice of the payload when decoded from
    /// `Bytes` (see [`Blob`](super::common::Blob)).
    #[prost(bytes = "bytes", tag = "14")]
    pub serialized_expr_plan: bytes::Bytes,
}

/// Primary keys (Milvus `schema.IDs`): a list of integers or a list of strings.
#[derive(Clone, PartialEq, Eq, Hash, prost::Message)]
pub struct Ids {
    /// The keys; `None` when neither list is set.
    #[prost(oneof = "IdField", tags = "1, 2")]
    pub id_field: Option<IdField>,
}

/// The two forms of [`Ids`].
#[derive(Clone, PartialEq, Eq, Hash, prost::Oneof)]
pub enum IdField {
    /// Integer keys.
    #[prost(message, tag = "1")]
    IntId(LongArray),
    /// String keys.
    #[prost(message, tag = "2")]
    StrId(StringArray),
}

impl Ids {
    /// Integer keys.
    pub fn ints(data: Vec<i64>) -> Self {
        Ids {
            id_field: Some(IdField::IntId(LongArray { data })),
        }
    }

    /// String keys.
    pub fn strings(data: Vec<String>) -> Self {
        Ids {
            id_field: Some(IdField::StrId(StringArray { data })),
        }
    }

    /// Number of keys, whichever form they are in.
    pub fn len(&self) -> usize {
        match &self.id_field {
            Some(IdField::IntId(ids)) => ids.data.len(),
            Some(IdField::StrId(ids)) => ids.data.len(),
            None => 0,
        }
    }

    /// Whether there are no keys.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The key at `row` alone, in the same form; `None` past the end.
    pub fn row(&self, row: usize) -> Option<Ids> {
        match &self.id_field {
            Some(IdField::IntId(ids)) => ids.data.get(row).map(|&key| Ids::ints(vec![key])),
            Some(IdField::StrId(ids)) => {
                ids.data.get(row).map(|key| Ids::strings(vec![key.clone()]))
            }
            None => None,
        }
    }
}

/// Integer keys (Milvus `schema.LongArray`).
#[derive(Clone, PartialEq, Eq, Hash, prost::Message)]
pub struct LongArray {
    /// The keys.
    #[prost(int64, repeated, tag = "1")]
    pub data: Vec<i64>,
}

/// String keys (Milvus `schema.StringArray`).
#[derive(Clone, PartialEq, Eq, Hash, prost::Message)]
pub struct StringArray {
    /// The keys.
    #[prost(string, repeated, tag = "1")]
    pub data: Vec<String>,
}

/// A timetick.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TimeTickMsg {
    /// Header; `base.timestamp` is the tick.
    #[prost(message, optional, tag = "1")]
    pub base: Option<MsgBase>,
}

/// A data node's timetick, with the row counts of the segments it is writing.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DataNodeTtMsg {
    /// Header.
    #[prost(message, optional, tag = "1")]
    pub base: Option<MsgBase>,
    /// Channel the tick is for.
    #[prost(string, tag = "2")]
    pub channel_name: String,
    /// The tick.
    #[prost(uint64, tag = "3")]
    pub timestamp: u64,
    /// Row counts per segment.
    #[prost(message, repeated, tag = "4")]
    pub segments_stats: Vec<SegmentStats>,
}

/// Rows of one segment, as reported in a [`DataNodeTtMsg`].
#[derive(Clone, PartialEq, Eq, Hash, prost::Message)]
pub struct SegmentStats {
    /// Segment id.
    #[prost(int64, tag = "1")]
    pub segment_id: i64,
    /// Rows in it.
    #[prost(int64, tag = "2")]
    pub num_rows: i64,
}
