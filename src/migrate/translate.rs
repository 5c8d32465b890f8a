//! Positions saved on a migration's source, as positions on its target.

use std::time::Duration;

use msgstream::mq::{Client, ReaderOptions};
use msgstream::msg::MsgPosition;

use super::SOURCE_ID_PROPERTY;
use crate::positions::encode_hex;
use crate::{Error, Result};

/// How long the search for a position's message waits for the next message of its channel.
const READ_WAIT: Duration = Duration::from_secs(10);

/// Translates positions saved on a migration's source into the target's: each position names
/// the target id of the message its source id names (found by its [`SOURCE_ID_PROPERTY`]), with
/// the same channel, group and timestamp. The target channel holds the same messages in the
/// same order from there on, so a `TtMsgStream` seeking to the translated positions yields
/// exactly the packs one seeking to the originals on the source does. A position with no
/// message id (taken before its channel delivered anything) stays as it is.
///
/// Each position costs one read of its target channel from the start, up to its message (the
/// target ids of copied messages are kept nowhere else). A message that is not at the target
/// is [`Error::PositionNotMigrated`], once its channel offered nothing more for ten seconds.
pub async fn translate_positions(
    target: &dyn Client,
    positions: &[MsgPosition],
) -> Result<Vec<MsgPosition>> {
    let mut translated = Vec::with_capacity(positions.len());
    for position in positions {
        if position.msg_id.is_empty() {
            translated.push(position.clone());
            continue;
        }
        let wanted = encode_hex(position.msg_id.as_bytes());
        let mut reader = target
            .create_reader(ReaderOptions {
                topic: position.channel_name.to_string(),
                start: target.earliest_message_id(),
                inclusive: true,
            })
            .await?;
        // `next`, not `has_next`: a broker may make a message readable a moment after it
        // acknowledged it (RocketMQ indexes stored messages asynchronously), and every message
        // a position names was acknowledged by then. Only a wait this long ends the search.
        let found = async {
            while let Ok(message) = tokio::time::timeout(READ_WAIT, reader.next()).await {
                let message = message?;
                if message.properties.get(SOURCE_ID_PROPERTY) == Some(&wanted) {
                    return Ok(Some(message.id));
                }
            }
            Ok::<_, msgstream::Error>(None)
        }
        .await;
        reader.close().await;
        let id = found?.ok_or_else(|| Error::PositionNotMigrated {
            channel: position.channel_name.to_string(),
            id: wanted,
        })?;
        translated.push(MsgPosition {
            msg_id: id,
            ..position.clone()
        });
    }
    Ok(translated)
}
