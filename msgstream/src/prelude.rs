//! The names most applications need, in one import: `use msgstream::prelude::*;`.
//!
//! Only types are here (no `Result` or `Error`, which would shadow the standard ones); the rest
//! of the API is in its modules.

pub use crate::mq::InitialPosition;
pub use crate::msg::{MsgBody, MsgPack, MsgPosition, TsMsg};
pub use crate::stream::{MsgStream, StreamOptions};
pub use crate::tt::TtMsgStream;
