//! Where a target channel's copy stands: the source id its last message carries.

use std::time::Duration;

use msgstream::mq::{
    Client, ConsumerOptions, InitialPosition, Message, MessageId, ProducerMessage, ReaderOptions,
};

use super::SOURCE_ID_PROPERTY;
use crate::positions::{decode_hex, encode_hex};
use crate::{Error, Result};

/// The subscription a migration opens for a moment on each target channel to ask for its
/// latest id (and deletes again where the backend can).
pub const RESUME_SUBSCRIPTION: &str = "msgstream-migrate";

/// The channel a migration writes one message to before it looks where the target channels
/// end (see [`fence`]), and deletes again where the backend can.
pub const FENCE_CHANNEL: &str = "msgstream-migrate-fence";

/// How long reading one message that the target says it holds may take.
const READ_WAIT: Duration = Duration::from_secs(30);

/// The source id of the last message of `channel` at the target: `None` for a channel that is
/// empty or does not exist yet; [`Error::ForeignTarget`] when that message was not copied by a
/// migration (or names an id `source` cannot parse).
///
/// A channel that holds messages is looked at again after `settle`, until its end stays put:
/// a write of a run that was killed may still land (a broker processes a request that arrived
/// before the writer died, or indexes a stored message a moment later), and resuming before it
/// would copy its messages twice.
pub(super) async fn last_copied(
    source: &dyn Client,
    target: &dyn Client,
    channel: &str,
    settle: Duration,
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
    // Not `list_topics`: a broker may list a channel a moment after its first messages (a
    // RocketMQ broker registers a new topic with its name servers asynchronously).
    let last = if capabilities.latest_id {
        match settled_latest_id(target, channel, settle).await? {
            Some(id) => Some(read_one(target, channel, id).await?),
            None => None,
        }
    } else {
        settled_scan(target, channel, settle).await?
    };
    let Some(last) = last else {
        return Ok(None);
    };
    tracing::debug!(
        channel,
        target_id = %encode_hex(last.id.as_bytes()),
        source_id = ?last.properties.get(SOURCE_ID_PROPERTY),
        "migration: the target channel ends here"
    );
    source_id_of(&last, source)
        .map(Some)
        .ok_or_else(|| Error::ForeignTarget {
            channel: channel.to_string(),
            id: encode_hex(last.id.as_bytes()),
        })
}

/// Writes one message to [`FENCE_CHANNEL`] at the target, so that a broker that indexes its
/// stored messages only when a write arrives has indexed every write of a killed run before
/// the target channels' ends are read: the rocketmq-rust broker stores the last write of a
/// connection that closes mid-request but indexes it (makes it readable, counts it in the
/// latest id) only when its next write arrives. The fence is deleted again where the backend
/// can (failures to are only logged: it holds nothing of the migration's).
pub(super) async fn fence(target: &dyn Client) -> Result<()> {
    let producer = target.create_producer(FENCE_CHANNEL).await?;
    let sent = producer
        .send(ProducerMessage::new(&b"msgstream migrate fence"[..]))
        .await;
    producer.close().await;
    sent?;
    if target.capabilities().delete_topics {
        if let Err(e) = target.delete_topic(FENCE_CHANNEL).await {
            tracing::warn!(error = %e, "migration: fence channel {FENCE_CHANNEL:?} not deleted");
        }
    }
    Ok(())
}

/// The source id a copied message carries, if it carries one `source` can parse.
pub(super) fn source_id_of(message: &Message, source: &dyn Client) -> Option<MessageId> {
    let bytes = decode_hex(message.properties.get(SOURCE_ID_PROPERTY)?)?;
    source.message_id_from_bytes(&bytes).ok()
}

/// The target's latest id of `channel`, once it stayed the same for `settle`, through a
/// consumer of a subscription of its own (deleted again where the backend can: it holds no
/// position worth keeping).
async fn settled_latest_id(
    target: &dyn Client,
    channel: &str,
    settle: Duration,
) -> Result<Option<MessageId>> {
    let mut consumer = target
        .subscribe(
            ConsumerOptions::new(channel, RESUME_SUBSCRIPTION)
                .with_initial_position(InitialPosition::Latest)
                .with_buffer(1),
        )
        .await?;
    let latest = async {
        let mut latest = consumer.latest_message_id().await?;
        while latest.is_some() && !settle.is_zero() {
            tokio::time::sleep(settle).await;
            let again = consumer.latest_message_id().await?;
            if again == latest {
                break;
            }
            latest = again;
        }
        Ok::<_, msgstream::Error>(latest)
    }
    .await;
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

/// The last message of `channel`, read from its start (for a target that has readers but
/// cannot tell its latest id), then again from there after `settle` until nothing follows.
async fn settled_scan(
    target: &dyn Client,
    channel: &str,
    settle: Duration,
) -> Result<Option<Message>> {
    let mut last: Option<Message> = None;
    loop {
        let before = last.as_ref().map(|m| m.id.clone());
        let mut reader = target
            .create_reader(ReaderOptions {
                topic: channel.to_string(),
                start: before
                    .clone()
                    .unwrap_or_else(|| target.earliest_message_id()),
                inclusive: before.is_none(),
            })
            .await?;
        let result = async {
            while reader.has_next().await? {
                last = Some(reader.next().await?);
            }
            Ok::<_, msgstream::Error>(())
        }
        .await;
        reader.close().await;
        result?;
        let after = last.as_ref().map(|m| m.id.clone());
        if after.is_none() || settle.is_zero() || (before.is_some() && after == before) {
            return Ok(last);
        }
        tokio::time::sleep(settle).await;
    }
}
