//! The message model: protobuf types of the wire contract, `TsMsg`, decoding by header, packs.

mod build;
mod dispatcher;
mod pack;
mod proto;
mod received;
mod row_vec;
mod tsmsg;

pub use crate::base::SharedStr;
pub use dispatcher::{Decoder, DecoderRegistry};
pub use pack::MsgPack;
pub use proto::{
    Blob, CreateCollectionRequest, CreatePartitionRequest, DataNodeTtMsg, DeleteRequest,
    DropCollectionRequest, DropPartitionRequest, IdField, Ids, InsertDataVersion, InsertRequest,
    LongArray, MsgBase, MsgHeader, MsgPosition, MsgType, Property, ReplicateInfo, SegmentStats,
    StringArray, TimeTickMsg, WalName,
};
pub use row_vec::{RowVec, RowVecIntoIter};
pub use tsmsg::{CustomMsg, MsgBody, TsMsg};
