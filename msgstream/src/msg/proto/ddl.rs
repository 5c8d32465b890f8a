//! Milvus `msg.proto` definition messages: collections and partitions.

use super::common::MsgBase;

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
    #[prost(int64, tag = "5")]
    pub db_id: i64,
    /// Collection id.
    #[prost(int64, tag = "6")]
    pub collection_id: i64,
    /// Partition id (deprecated by Milvus in favour of `partition_ids`).
    #[prost(int64, tag = "7")]
    pub partition_id: i64,
    /// Encoded schema (deprecated by Milvus in favour of `collection_schema`).
    #[prost(bytes = "vec", tag = "8")]
    pub schema: Vec<u8>,
    /// Virtual channel names.
    #[prost(string, repeated, tag = "9")]
    pub virtual_channel_names: Vec<String>,
    /// Physical channel names.
    #[prost(string, repeated, tag = "10")]
    pub physical_channel_names: Vec<String>,
    /// Ids of the partitions created with the collection.
    #[prost(int64, repeated, tag = "11")]
    pub partition_ids: Vec<i64>,
    /// Names of the partitions created with the collection.
    #[prost(string, repeated, tag = "12")]
    pub partition_names: Vec<String>,
    /// Milvus `schema.CollectionSchema`, kept as its encoding: msgstream does not interpret it,
    /// and opaque bytes under the same tag re-encode exactly.
    #[prost(bytes = "vec", optional, tag = "13")]
    pub collection_schema: Option<Vec<u8>>,
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

/// Create a partition.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CreatePartitionRequest {
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
    #[prost(int64, tag = "5")]
    pub db_id: i64,
    /// Collection id.
    #[prost(int64, tag = "6")]
    pub collection_id: i64,
    /// Partition id.
    #[prost(int64, tag = "7")]
    pub partition_id: i64,
}

/// Drop a partition.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DropPartitionRequest {
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
    #[prost(int64, tag = "5")]
    pub db_id: i64,
    /// Collection id.
    #[prost(int64, tag = "6")]
    pub collection_id: i64,
    /// Partition id.
    #[prost(int64, tag = "7")]
    pub partition_id: i64,
}
