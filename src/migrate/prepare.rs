//! Everything a migration checks before it writes anything.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use msgstream::mq::{validate_channel_name, Client, ReaderOptions};
use msgstream::msg::MsgPosition;

use super::copy::{ChannelCopy, ChannelStats};
use super::resume::{fence, last_copied};
use super::MigrateOptions;
use crate::positions::encode_hex;
use crate::{Error, Result};

/// How long reading the message a position names may take.
const READ_WAIT: Duration = Duration::from_secs(30);

/// Checks the inputs (see [`super::Migration::prepare`]) and finds where each target channel's
/// copy stands.
pub(super) async fn check(
    source: &Arc<dyn Client>,
    target: &Arc<dyn Client>,
    options: &MigrateOptions,
) -> Result<Vec<ChannelCopy>> {
    if std::ptr::addr_eq(Arc::as_ptr(source), Arc::as_ptr(target)) {
        return Err(Error::SameStore("one client is both".to_string()));
    }
    check_channel_names(&options.channels)?;
    if !source.capabilities().readers {
        return Err(msgstream::Error::Unsupported {
            backend: source.backend_name(),
            what: "being a migration source without readers",
        }
        .into());
    }
    if !options.positions.is_empty() && !target.capabilities().seek {
        return Err(msgstream::Error::Unsupported {
            backend: target.backend_name(),
            what: "translating positions to a backend without seek (no consumer could resume \
                   at them)",
        }
        .into());
    }
    match source.list_topics().await {
        Ok(topics) => {
            if let Some(missing) = options.channels.iter().find(|c| !topics.contains(c)) {
                return Err(Error::UnknownSourceChannel {
                    channel: missing.clone(),
                });
            }
        }
        Err(msgstream::Error::Unsupported { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    check_positions(source.as_ref(), &options.channels, &options.positions).await?;
    fence(target.as_ref()).await?;
    // Together, so that their settling overlaps.
    let ends = futures::future::try_join_all(
        options
            .channels
            .iter()
            .map(|channel| last_copied(source.as_ref(), target.as_ref(), channel, options.settle)),
    )
    .await?;
    Ok(options
        .channels
        .iter()
        .zip(ends)
        .map(|(channel, resume_after)| ChannelCopy {
            stats: Arc::new(ChannelStats::new(channel, resume_after.is_some())),
            channel: channel.clone(),
            resume_after,
        })
        .collect())
}

fn check_channel_names(channels: &[String]) -> Result<()> {
    if channels.is_empty() {
        return Err(msgstream::Error::InvalidArgument("no channel to migrate".into()).into());
    }
    let mut seen = BTreeSet::new();
    for channel in channels {
        validate_channel_name("channel", channel)?;
        if !seen.insert(channel.as_str()) {
            return Err(msgstream::Error::InvalidArgument(format!(
                "channel {channel:?} is named twice"
            ))
            .into());
        }
    }
    Ok(())
}

/// Each position is of a migrated channel, at most one per channel, and names a message the
/// source holds (or no message at all).
async fn check_positions(
    source: &dyn Client,
    channels: &[String],
    positions: &[MsgPosition],
) -> Result<()> {
    let mut seen = BTreeSet::new();
    for position in positions {
        let channel = position.channel_name.as_str();
        if !channels.iter().any(|c| c == channel) {
            return Err(Error::MigrationPositions(format!(
                "a position of channel {channel:?}, which is not migrated (channels: {})",
                channels.join(",")
            )));
        }
        if !seen.insert(channel) {
            return Err(Error::MigrationPositions(format!(
                "two positions of channel {channel:?}"
            )));
        }
        if position.msg_id.is_empty() {
            continue;
        }
        let hex = encode_hex(position.msg_id.as_bytes());
        let not_held = |why: String| {
            Error::MigrationPositions(format!(
                "the position of channel {channel:?} names message {hex}, {why}"
            ))
        };
        let id = source
            .message_id_from_bytes(position.msg_id.as_bytes())
            .map_err(|e| {
                not_held(format!(
                    "not an id of the {} source: {e}",
                    source.backend_name()
                ))
            })?;
        let opened = source
            .create_reader(ReaderOptions {
                topic: channel.to_string(),
                start: id.clone(),
                inclusive: true,
            })
            .await;
        let mut reader = match opened {
            Ok(reader) => reader,
            Err(
                e @ (msgstream::Error::PastEnd { .. }
                | msgstream::Error::BelowRetention { .. }
                | msgstream::Error::Decode(_)
                | msgstream::Error::InvalidArgument(_)),
            ) => return Err(not_held(format!("which the source does not hold: {e}"))),
            Err(e) => return Err(e.into()),
        };
        let first = async {
            if !reader.has_next().await? {
                return Ok(None);
            }
            tokio::time::timeout(READ_WAIT, reader.next())
                .await
                .map_err(|_| msgstream::Error::Timeout(READ_WAIT))?
                .map(Some)
        }
        .await;
        reader.close().await;
        match first? {
            Some(message) if message.id == id => {}
            _ => return Err(not_held("which the source does not hold".to_string())),
        }
    }
    Ok(())
}
