//! `msgstream positions show|save`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::error::Result;
use clap::Subcommand;
use msgstream_facade::msgstream::mq::{Client, ConsumerOptions, InitialPosition, MessageId};
use msgstream_facade::msgstream::msg::MsgPosition;
use msgstream_facade::msgstream::Error as StreamError;
use msgstream_facade::{positions as positions_file, Factory};

use super::short_id;
use crate::out;

/// `positions` subcommands.
#[derive(Debug, Subcommand)]
pub enum PositionsCommand {
    /// Print a positions file (does not open the backend, so it works while a consumer runs).
    Show {
        /// The file.
        file: PathBuf,
    },
    /// Save the position of the newest message of each channel (for a plain consumer resuming
    /// after it with `consume --from-positions`). Creates no channel or group.
    Save {
        /// Channels (comma-separated).
        #[arg(long, value_delimiter = ',', required = true)]
        channels: Vec<String>,
        /// Where to write.
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
    },
}

/// Prints a positions file.
pub fn show(file: &Path) -> Result<ExitCode> {
    let positions = positions_file::load(file)?;
    out::line(format_args!(
        "{:<40} {:>20} {:<20} {:>12}",
        "channel", "msg_id", "group", "timestamp"
    ))?;
    for p in positions {
        out::line(format_args!(
            "{:<40} {:>20} {:<20} {:>12}",
            p.channel_name,
            short_id(p.msg_id.as_bytes()),
            p.msg_group,
            p.timestamp
        ))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Saves the newest position of each channel.
pub async fn save(factory: &Factory, channels: &[String], file: &Path) -> Result<ExitCode> {
    let client = factory.client();
    let mut saved = Vec::new();
    for channel in channels {
        match latest_id(client.as_ref(), channel).await? {
            Some(id) => saved.push(MsgPosition {
                channel_name: channel.clone().into(),
                msg_id: id,
                ..MsgPosition::default()
            }),
            None => eprintln!("{channel}: empty, no position"),
        }
    }
    if saved.is_empty() {
        eprintln!("no position to save: {} left as it was", file.display());
        return Ok(ExitCode::SUCCESS);
    }
    positions_file::save(file, &saved)?;
    out::line(format_args!(
        "saved {} position(s) to {}",
        saved.len(),
        file.display()
    ))?;
    Ok(ExitCode::SUCCESS)
}

/// The newest message id of `channel`, leaving nothing behind.
///
/// The mq traits tell the newest id only through a consumer, and subscribing creates the channel
/// and a group on durable backends. So a channel the backend does not list is reported empty
/// without subscribing, and the group used to ask is a fresh one deleted right after.
async fn latest_id(client: &dyn Client, channel: &str) -> Result<Option<MessageId>> {
    if let Ok(topics) = client.list_topics().await {
        if !topics.iter().any(|t| t == channel) {
            return Ok(None);
        }
    }
    let group = format!("msgstream-positions-{}", std::process::id());
    let options =
        ConsumerOptions::new(channel, &group).with_initial_position(InitialPosition::Latest);
    let mut consumer = client.subscribe(options).await?;
    let latest = consumer.latest_message_id().await;
    consumer.close().await;
    match client.delete_subscription(channel, &group).await {
        Ok(()) => {}
        Err(e @ StreamError::Unsupported { .. }) => {
            eprintln!("note: {e}: group {group} of {channel} stays");
        }
        Err(e) => return Err(e.into()),
    }
    Ok(latest?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use msgstream_facade::msgstream::mem::MemoryClient;
    use msgstream_facade::msgstream::mq::ProducerMessage;

    #[tokio::test]
    async fn asking_for_the_newest_id_leaves_no_group_or_channel() {
        let client = MemoryClient::new();
        let producer = client.create_producer("c").await.expect("producer");
        let mut last = None;
        for payload in [1u8, 2] {
            last = Some(
                producer
                    .send(ProducerMessage::new(vec![payload]))
                    .await
                    .expect("send"),
            );
        }
        assert_eq!(latest_id(&client, "c").await.expect("latest"), last);
        assert!(client
            .list_subscriptions("c")
            .await
            .expect("groups")
            .is_empty());
        assert_eq!(latest_id(&client, "absent").await.expect("absent"), None);
        assert_eq!(client.list_topics().await.expect("topics"), vec!["c"]);
    }
}
