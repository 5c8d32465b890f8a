//! Milvus `msg.proto` `InsertRequest`: rows to insert, and its protobuf encoding.
//!
//! Its per-row fields are [`RowVec`]s (one row inline), which prost's derive does not know, so
//! the `prost::Message` implementation is written out here, field by field, with prost's own
//! encoding functions: the wire format is exactly the derive's (`wire_tests` holds every field
//! number against hand-written bytes, and the fast decoder's property test holds decoding to
//! this implementation).

use bytes::{Buf, BufMut};
use prost::encoding::{self, DecodeContext, WireType};
use prost::DecodeError;

use super::common::{Blob, MsgBase};
use crate::msg::RowVec;

/// How an [`InsertRequest`] holds its data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum InsertDataVersion {
    /// One [`Blob`] per row in `row_data`.
    RowBased = 0,
    /// Column data in `fields_data`.
    ColumnBased = 1,
}

/// Rows to insert.
#[derive(Clone, PartialEq, Debug, Default)]
pub struct InsertRequest {
    /// Header (field 1).
    pub base: Option<MsgBase>,
    /// Shard (channel) name (2).
    pub shard_name: String,
    /// Database name (3).
    pub db_name: String,
    /// Collection name (4).
    pub collection_name: String,
    /// Partition name (5).
    pub partition_name: String,
    /// Database id (6).
    pub db_id: i64,
    /// Collection id (7).
    pub collection_id: i64,
    /// Partition id (8).
    pub partition_id: i64,
    /// Segment id (9).
    pub segment_id: i64,
    /// One timestamp per row (10, packed).
    pub timestamps: RowVec<u64>,
    /// One row id per row (11, packed).
    pub row_ids: RowVec<i64>,
    /// Row-based data, one blob per row (12; may be empty when column data is used).
    pub row_data: RowVec<Blob>,
    /// Milvus column data (`schema.FieldData`, 13), kept as opaque encoded messages; slices of
    /// the payload when decoded from `Bytes` (see [`Blob`]).
    pub fields_data: Vec<bytes::Bytes>,
    /// Number of rows (14).
    pub num_rows: u64,
    /// Row or column layout (15), an [`InsertDataVersion`] value.
    pub version: i32,
    /// Namespace of the rows (16); `Some("")` and `None` differ on the wire, so it stays an
    /// `Option`.
    pub namespace: Option<String>,
}

impl InsertRequest {
    /// The layout, [`InsertDataVersion::RowBased`] for a value this version does not know.
    pub fn version(&self) -> InsertDataVersion {
        InsertDataVersion::try_from(self.version).unwrap_or(InsertDataVersion::RowBased)
    }

    /// The namespace, `""` when unset.
    pub fn namespace(&self) -> &str {
        self.namespace.as_deref().unwrap_or_default()
    }
}

/// Decodes a repeated field into a `RowVec` through prost's `Vec` merge (the path of inserts
/// the fast decoder leaves to prost, and of re-merges).
fn merge_rows<T>(
    rows: &mut RowVec<T>,
    merge: impl FnOnce(&mut Vec<T>) -> Result<(), DecodeError>,
) -> Result<(), DecodeError> {
    let mut values = std::mem::take(rows).into_vec();
    let merged = merge(&mut values);
    *rows = values.into();
    merged
}

impl prost::Message for InsertRequest {
    fn encode_raw(&self, buf: &mut impl BufMut) {
        if let Some(base) = &self.base {
            encoding::message::encode(1, base, buf);
        }
        for (tag, value) in [
            (2, &self.shard_name),
            (3, &self.db_name),
            (4, &self.collection_name),
            (5, &self.partition_name),
        ] {
            if !value.is_empty() {
                encoding::string::encode(tag, value, buf);
            }
        }
        for (tag, value) in [
            (6, &self.db_id),
            (7, &self.collection_id),
            (8, &self.partition_id),
            (9, &self.segment_id),
        ] {
            if *value != 0 {
                encoding::int64::encode(tag, value, buf);
            }
        }
        encoding::uint64::encode_packed(10, &self.timestamps, buf);
        encoding::int64::encode_packed(11, &self.row_ids, buf);
        encoding::message::encode_repeated(12, &self.row_data, buf);
        encoding::bytes::encode_repeated(13, &self.fields_data, buf);
        if self.num_rows != 0 {
            encoding::uint64::encode(14, &self.num_rows, buf);
        }
        if self.version != 0 {
            encoding::int32::encode(15, &self.version, buf);
        }
        if let Some(namespace) = &self.namespace {
            encoding::string::encode(16, namespace, buf);
        }
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl Buf,
        ctx: DecodeContext,
    ) -> Result<(), DecodeError> {
        match tag {
            1 => encoding::message::merge(
                wire_type,
                self.base.get_or_insert_with(MsgBase::default),
                buf,
                ctx,
            ),
            2 => encoding::string::merge(wire_type, &mut self.shard_name, buf, ctx),
            3 => encoding::string::merge(wire_type, &mut self.db_name, buf, ctx),
            4 => encoding::string::merge(wire_type, &mut self.collection_name, buf, ctx),
            5 => encoding::string::merge(wire_type, &mut self.partition_name, buf, ctx),
            6 => encoding::int64::merge(wire_type, &mut self.db_id, buf, ctx),
            7 => encoding::int64::merge(wire_type, &mut self.collection_id, buf, ctx),
            8 => encoding::int64::merge(wire_type, &mut self.partition_id, buf, ctx),
            9 => encoding::int64::merge(wire_type, &mut self.segment_id, buf, ctx),
            10 => merge_rows(&mut self.timestamps, |values| {
                encoding::uint64::merge_repeated(wire_type, values, buf, ctx)
            }),
            11 => merge_rows(&mut self.row_ids, |values| {
                encoding::int64::merge_repeated(wire_type, values, buf, ctx)
            }),
            12 => merge_rows(&mut self.row_data, |values| {
                encoding::message::merge_repeated(wire_type, values, buf, ctx)
            }),
            13 => encoding::bytes::merge_repeated(wire_type, &mut self.fields_data, buf, ctx),
            14 => encoding::uint64::merge(wire_type, &mut self.num_rows, buf, ctx),
            15 => encoding::int32::merge(wire_type, &mut self.version, buf, ctx),
            16 => encoding::string::merge(
                wire_type,
                self.namespace.get_or_insert_with(String::new),
                buf,
                ctx,
            ),
            _ => encoding::skip_field(wire_type, tag, buf, ctx),
        }
    }

    fn encoded_len(&self) -> usize {
        let strings: usize = [
            (2, &self.shard_name),
            (3, &self.db_name),
            (4, &self.collection_name),
            (5, &self.partition_name),
        ]
        .into_iter()
        .filter(|(_, value)| !value.is_empty())
        .map(|(tag, value)| encoding::string::encoded_len(tag, value))
        .sum();
        let ids: usize = [
            (6, &self.db_id),
            (7, &self.collection_id),
            (8, &self.partition_id),
            (9, &self.segment_id),
        ]
        .into_iter()
        .filter(|(_, value)| **value != 0)
        .map(|(tag, value)| encoding::int64::encoded_len(tag, value))
        .sum();
        self.base
            .as_ref()
            .map_or(0, |base| encoding::message::encoded_len(1, base))
            + strings
            + ids
            + encoding::uint64::encoded_len_packed(10, &self.timestamps)
            + encoding::int64::encoded_len_packed(11, &self.row_ids)
            + encoding::message::encoded_len_repeated(12, &self.row_data)
            + encoding::bytes::encoded_len_repeated(13, &self.fields_data)
            + if self.num_rows != 0 {
                encoding::uint64::encoded_len(14, &self.num_rows)
            } else {
                0
            }
            + if self.version != 0 {
                encoding::int32::encoded_len(15, &self.version)
            } else {
                0
            }
            + self
                .namespace
                .as_ref()
                .map_or(0, |namespace| encoding::string::encoded_len(16, namespace))
    }

    fn clear(&mut self) {
        *self = InsertRequest::default();
    }
}
