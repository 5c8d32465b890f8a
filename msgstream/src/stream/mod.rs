//! The plain message stream and the parts both streams share.

mod options;
mod plain;
pub(crate) mod producers;
pub(crate) mod pump;
mod repack;

pub use options::StreamOptions;
pub use plain::MsgStream;
pub use producers::{ChannelIds, Produce, Producers};
pub use repack::{default_repack, RepackFn};

use crate::mq::{Client, MessageId};
use crate::msg::MsgPosition;
use crate::{Error, Result};

/// The backend id stored in a position; wrong bytes are `Error::Decode` naming the channel.
pub(crate) fn resolve_position(client: &dyn Client, position: &MsgPosition) -> Result<MessageId> {
    client.message_id_from_bytes(&position.msg_id).map_err(|e| {
        Error::Decode(format!(
            "position of channel {:?}: {e}",
            position.channel_name
        ))
    })
}
