//! Where a target channel's copy stands: the source id its last message carries.

use std::time::Duration;

use msgstream::mq::{Client, ConsumerOptions, InitialPosition, Message, MessageId, ReaderOptions};

use super::SOURCE_ID_PROPERTY;
use crate::positions::{decode_hex, encode_hex};
use crate::{Error, Result};

/// The subscription a migration opens for a moment on each target channel to ask for its
/// latest id (and deletes again where the backend can).
pub const RESUME_SUBSCRIPTION: &str = "msgstream-migrate";

/// How long reading one message that the target says it holds may take.
const READ_WAIT: Duration = Duration::from_secs(30);

/// The source id of the last message of `channel` at the target: `None` for a channel that is
/// empty or does not exist yet; [`Error::ForeignTarget`] when that message was not copied by a
/// migration (or names an id `source` cannot parse).
pub(super) async fn last_copied(
    source: &dyn Client,
    target: &dyn Client,
    channel: &str,
) -> Result<Option<MessageId>> {
    let capabilities = target.capabilities();
    if !capabilities.readers {
        return Err(msgstream::Error::Unsupported {
            backend: target.backend_name(),
            what: "being a migration target without readers (a restarted migration could not \
                   find where it stopped)",
        }
        .into());
    }
    match target.list_topics().await {
        Ok(topics) if !topics.iter().any(|t| t == channel) => return Ok(None),
        Ok(_) | Err(msgstream::Error::Unsupported { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    let last = if capabilities.latest_id {
        match latest_id(target, channel).await? {
            Some(id) => Some(read_one(target, channel, id).await?),
            None => None,
        }
    } else {
        scan_to_end(target, channel).await?
    };
    let Some(last) = last else {
        return Ok(None);
    };
    source_id_of(&last, source)
        .map(Some)
        .ok_or_else(|| Error::ForeignTarget {
            channel: channel.to_string(),
            id: encode_hex(last.id.as_bytes()),
        })
}

/// The source id a copied message carries, if it carries one `source` can parse.
pub(super) fn source_id_of(message: &Message, source: &dyn Client) -> Option<MessageId> {
    let bytes = decode_hex(message.properties.get(SOURCE_ID_PROPERTY)?)?;
    source.message_id_from_bytes(&bytes).ok()
}

/// The target's latest id of `channel`, through a consumer of a subscription of its own
/// (deleted again where the backend can: it holds no position worth keeping).
async fn latest_id(target: &dyn Client, channel: &str) -> Result<Option<MessageId>> {
    let mut consumer = target
        .subscribe(
            ConsumerOptions::new(channel, RESUME_SUBSCRIPTION)
                .with_initial_position(InitialPosition::Latest)
                .with_buffer(1),
        )
        .await?;
    let latest = consumer.latest_message_id().await;
    consumer.close().await;
    drop(consumer);
    if target.capabilities().delete_subscriptions {
        if let Err(e) = target
            .delete_subscription(channel, RESUME_SUBSCRIPTION)
            .await
        {
            tracing::warn!(channel, error = %e, "migration: subscription {RESUME_SUBSCRIPTION:?} not deleted");
        }
    }
    Ok(latest?)
}

async fn read_one(target: &dyn Client, channel: &str, id: MessageId) -> Result<Message> {
    let mut reader = target
        .create_reader(ReaderOptions {
            topic: channel.to_string(),
            start: id,
            inclusive: true,
        })
        .await?;
    let message = tokio::time::timeout(READ_WAIT, reader.next()).await;
    reader.close().await;
    Ok(message.map_err(|_| msgstream::Error::Timeout(READ_WAIT))??)
}

/// The last message of `channel`, read from its start: for a target that has readers but
/// cannot tell its latest id.
async fn scan_to_end(target: &dyn Client, channel: &str) -> Result<Option<Message>> {
    let mut reader = target
        .create_reader(ReaderOptions {
            topic: channel.to_string(),
            start: target.earliest_message_id(),
            inclusive: true,
        })
        .await?;
    let mut last = None;
    let result = async {
        while reader.has_next().await? {
            last = Some(reader.next().await?);
        }
        Ok::<_, msgstream::Error>(())
    }
    .await;
    reader.close().await;
    result?;
    Ok(last)
}
