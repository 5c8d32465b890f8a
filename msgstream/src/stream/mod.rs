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

use std::sync::Arc;

use crate::mq::{
    validate_channel_name, Client, Consumer, ConsumerOptions, InitialPosition, MessageId,
};
use crate::msg::MsgPosition;
use crate::{Error, Result};

/// Validates every name, then subscribes `subscription` on each channel (retrying transient
/// failures): a stream starts consuming all its new channels or none of them.
pub(crate) async fn subscribe_all(
    client: &Arc<dyn Client>,
    options: &StreamOptions,
    channels: &[&str],
    subscription: &str,
    position: InitialPosition,
) -> Result<Vec<Box<dyn Consumer>>> {
    for channel in channels {
        validate_channel_name("channel", channel)?;
    }
    validate_channel_name("subscription", subscription)?;
    let mut consumers = Vec::with_capacity(channels.len());
    for channel in channels {
        let consumer_options = ConsumerOptions {
            buffer: options.buffer.max(1),
            ..ConsumerOptions::new(*channel, subscription).with_initial_position(position)
        };
        let consumer = options
            .retry
            .run("subscribe", || client.subscribe(consumer_options.clone()))
            .await?;
        consumers.push(consumer);
    }
    Ok(consumers)
}

/// The backend id stored in a position; wrong bytes are `Error::Decode` naming the channel.
pub(crate) fn resolve_position(client: &dyn Client, position: &MsgPosition) -> Result<MessageId> {
    client.message_id_from_bytes(&position.msg_id).map_err(|e| {
        Error::Decode(format!(
            "position of channel {:?}: {e}",
            position.channel_name
        ))
    })
}
