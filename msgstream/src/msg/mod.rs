//! The message model: protobuf types of the wire contract, `TsMsg`, decoding by header, packs.

mod dispatcher;
mod pack;
mod proto;
mod tsmsg;

pub use dispatcher::{Decoder, DecoderRegistry};
pub use pack::MsgPack;
pub use proto::{
    Blob, CreateCollectionRequest, DeleteRequest, DropCollectionRequest, InsertRequest, MsgBase,
    MsgHeader, MsgPosition, MsgType, TimeTickMsg,
};
pub use tsmsg::{CustomMsg, MsgBody, TsMsg};
