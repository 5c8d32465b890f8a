//! Checks and set-up both streams do when they take channels on: names, distinctness, seek
//! targets, subscribing every channel or none, resolving stored positions.

use std::sync::Arc;

use super::options::{StreamOptions, MAX_BUFFER};
use crate::mq::{
    validate_channel_name, Client, Consumer, ConsumerOptions, InitialPosition, MessageId,
};
use crate::msg::MsgPosition;
use crate::{Error, Result};

/// Milvus's `CheckTopicValid`: the channel exists on the backend (it was created and not
/// deleted). `Error::UnknownChannel` otherwise; `Error::Unsupported` where the backend cannot
/// list its channels.
pub(crate) async fn check_topic_valid(client: &dyn Client, channel: &str) -> Result<()> {
    validate_channel_name("channel", channel)?;
    if client.list_topics().await?.iter().any(|t| t == channel) {
        Ok(())
    } else {
        Err(Error::UnknownChannel {
            channel: channel.to_string(),
        })
    }
}

/// Rejects a channel named twice in `channels`, or one in `taken` (already consumed by the
/// stream): delivering a channel twice would duplicate every message.
pub(crate) fn check_distinct(channels: &[&str], taken: impl Fn(&str) -> bool) -> Result<()> {
    for (i, channel) in channels.iter().enumerate() {
        if channels[..i].contains(channel) {
            return Err(Error::InvalidArgument(format!(
                "channel {channel:?} is named twice"
            )));
        }
        if taken(channel) {
            return Err(Error::InvalidArgument(format!(
                "channel {channel:?} is consumed by this stream already"
            )));
        }
    }
    Ok(())
}

/// Checks, before anything moves, that each target of a seek is one the channel holds, by
/// opening (and closing) a reader there: a seek that would fail midway fails here instead,
/// leaving every channel as it was. Backends without readers are not checked this way.
/// Targets are (channel, id, inclusive).
pub(crate) async fn precheck_targets(
    client: &dyn Client,
    targets: &[(String, MessageId, bool)],
) -> Result<()> {
    if !client.capabilities().readers {
        return Ok(());
    }
    for (channel, id, inclusive) in targets {
        let options = crate::mq::ReaderOptions {
            topic: channel.clone(),
            start: id.clone(),
            inclusive: *inclusive,
        };
        let mut reader = client.create_reader(options).await?;
        reader.close().await;
    }
    Ok(())
}

/// Validates every name, then subscribes `subscription` on each channel (retrying transient
/// failures): a stream starts consuming all its new channels or none of them. `ordered` asks
/// the backend for strict channel order ([`ConsumerOptions::ordered`]).
pub(crate) async fn subscribe_all(
    client: &Arc<dyn Client>,
    options: &StreamOptions,
    channels: &[&str],
    subscription: &str,
    position: InitialPosition,
    ordered: bool,
) -> Result<Vec<Box<dyn Consumer>>> {
    if options.buffer > MAX_BUFFER {
        return Err(Error::InvalidArgument(format!(
            "buffer {} is above the limit of {MAX_BUFFER} messages per channel",
            options.buffer
        )));
    }
    for channel in channels {
        validate_channel_name("channel", channel)?;
    }
    validate_channel_name("subscription", subscription)?;
    let mut consumers: Vec<Box<dyn Consumer>> = Vec::with_capacity(channels.len());
    for channel in channels {
        let consumer_options = ConsumerOptions {
            buffer: options.buffer.max(1),
            ordered,
            ..ConsumerOptions::new(*channel, subscription).with_initial_position(position)
        };
        let subscribed = options
            .retry
            .run("subscribe", || client.subscribe(consumer_options.clone()))
            .await;
        match subscribed {
            Ok(consumer) => consumers.push(consumer),
            Err(error) => {
                for mut consumer in consumers {
                    consumer.close().await;
                }
                return Err(error);
            }
        }
    }
    Ok(consumers)
}

/// The backend id stored in a position; wrong bytes are `Error::Decode` naming the channel.
pub(crate) fn resolve_position(client: &dyn Client, position: &MsgPosition) -> Result<MessageId> {
    client
        .message_id_from_bytes(position.msg_id.as_bytes())
        .map_err(|e| {
            Error::Decode(format!(
                "position of channel {:?}: {e}",
                position.channel_name
            ))
        })
}
