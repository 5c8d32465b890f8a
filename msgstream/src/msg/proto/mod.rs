//! Protobuf types of the wire contract (`shared/protocols/message-model.md`), field-compatible
//! with Milvus's `common.proto`, `msg.proto` and `schema.proto`.
//!
//! Hand-written prost derives are the one source of truth: no `.proto` compilation step, no
//! system `protoc`; `wire_tests` holds every field number against hand-written bytes. Every
//! message kind has `base` at field 1, so [`MsgHeader`] decodes the kind of any payload. Nested
//! Milvus schema messages msgstream does not interpret (`FieldData`, `CollectionSchema`) stay
//! opaque bytes under their own tag, which is the same wire encoding, so they survive re-encoding.

mod common;
mod ddl;
mod dml;
mod insert;
mod insert_fast;
#[cfg(test)]
mod roundtrip_tests;
#[cfg(test)]
mod wire_tests;

pub use common::{
    Blob, MsgBase, MsgHeader, MsgPosition, MsgType, Property, ReplicateInfo, WalName,
};
pub use ddl::{
    CreateCollectionRequest, CreatePartitionRequest, DropCollectionRequest, DropPartitionRequest,
};
pub use dml::{
    DataNodeTtMsg, DeleteRequest, IdField, Ids, LongArray, SegmentStats, StringArray, TimeTickMsg,
};
pub use insert::{InsertDataVersion, InsertRequest};
pub(crate) use insert_fast::{check_insert, decode_insert, decode_insert_into, InsertHead};
