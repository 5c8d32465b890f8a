//! `msgstream topics` and `msgstream groups`: list, and delete through the mq traits.

use std::process::ExitCode;

use crate::error::{Error, Result};
use clap::{Args, Subcommand};
use msgstream_facade::msgstream::mq::Client;
use msgstream_facade::msgstream::Error as StreamError;
use msgstream_facade::Factory;

use crate::out;

/// Options of `topics`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct TopicsArgs {
    #[command(subcommand)]
    action: Option<TopicsAction>,
}

/// `topics` subcommands; without one, `topics` lists.
#[derive(Debug, Subcommand)]
enum TopicsAction {
    /// List the channels the backend holds.
    List,
    /// Delete a channel with its messages and groups (nothing to do if it does not exist).
    Delete {
        /// The channel.
        topic: String,
    },
}

/// Options of `groups`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct GroupsArgs {
    /// Only this channel (default: every channel).
    #[arg(long)]
    channel: Option<String>,
    #[command(subcommand)]
    action: Option<GroupsAction>,
}

/// `groups` subcommands; without one, `groups` lists.
#[derive(Debug, Subcommand)]
enum GroupsAction {
    /// Delete a subscription and its stored position (nothing to do if it does not exist).
    Delete {
        /// The channel.
        topic: String,
        /// The subscription (consumer group).
        group: String,
    },
}

/// Lists or deletes topics.
pub async fn topics(factory: &Factory, args: TopicsArgs) -> Result<ExitCode> {
    let client = factory.client();
    match args.action {
        None | Some(TopicsAction::List) => {
            for topic in client.list_topics().await? {
                out::line(topic)?;
            }
        }
        Some(TopicsAction::Delete { topic }) => {
            out::line(delete_topic(client.as_ref(), &topic).await?)?
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Lists subscriptions with their lag, or deletes one.
pub async fn groups(factory: &Factory, args: GroupsArgs) -> Result<ExitCode> {
    let client = factory.client();
    if let Some(GroupsAction::Delete { topic, group }) = args.action {
        out::line(delete_group(client.as_ref(), &topic, &group).await?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let topics = match args.channel {
        Some(channel) => vec![channel],
        None => client.list_topics().await?,
    };
    out::line(format_args!(
        "{:<40} {:<30} {:>10}",
        "channel", "subscription", "lag"
    ))?;
    for topic in topics {
        for sub in client.list_subscriptions(&topic).await? {
            let lag = sub.lag.map_or_else(|| "?".to_string(), |l| l.to_string());
            out::line(format_args!("{topic:<40} {:<30} {lag:>10}", sub.name))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Deletes `topic`; says whether it was there (when the backend can list channels).
pub async fn delete_topic(client: &dyn Client, topic: &str) -> Result<String> {
    let existed = client
        .list_topics()
        .await
        .ok()
        .map(|topics| topics.iter().any(|t| t == topic));
    let action = format!("delete channel {topic:?}");
    client
        .delete_topic(topic)
        .await
        .map_err(|e| busy(action, e))?;
    Ok(match existed {
        Some(false) => format!("no channel {topic:?}: nothing to delete"),
        _ => format!("deleted channel {topic:?} with its messages and groups"),
    })
}

/// Deletes `group` of `topic`; says whether it was there (when the backend can list groups).
pub async fn delete_group(client: &dyn Client, topic: &str, group: &str) -> Result<String> {
    let topic_listed = client
        .list_topics()
        .await
        .ok()
        .map(|topics| topics.iter().any(|t| t == topic));
    let existed = match topic_listed {
        Some(false) => Some(false),
        _ => client
            .list_subscriptions(topic)
            .await
            .ok()
            .map(|subs| subs.iter().any(|s| s.name == group)),
    };
    let action = format!("delete group {group:?} of channel {topic:?}");
    client
        .delete_subscription(topic, group)
        .await
        .map_err(|e| busy(action, e))?;
    Ok(match existed {
        Some(false) => format!("no group {group:?} on channel {topic:?}: nothing to delete"),
        _ => format!("deleted group {group:?} of channel {topic:?}"),
    })
}

/// A delete refused because a consumer is live gets an error that says what to do.
fn busy(action: String, e: StreamError) -> Error {
    match e {
        StreamError::SubscriptionBusy { .. } => Error::Busy {
            action,
            detail: e.to_string(),
        },
        other => other.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use msgstream_facade::msgstream::mem::MemoryClient;
    use msgstream_facade::msgstream::mq::{ConsumerOptions, ProducerMessage};

    #[tokio::test]
    async fn deletes_say_what_they_did_and_refuse_a_live_consumer() {
        let client = MemoryClient::new();
        let producer = client.create_producer("t").await.expect("producer");
        producer
            .send(ProducerMessage::new(vec![1u8]))
            .await
            .expect("send");
        let mut consumer = client
            .subscribe(ConsumerOptions::new("t", "g"))
            .await
            .expect("subscribe");

        let busy = delete_group(&client, "t", "g")
            .await
            .expect_err("live consumer");
        assert!(matches!(busy, Error::Busy { .. }), "{busy}");
        assert!(busy.to_string().contains("stop that consumer"), "{busy}");
        let busy = delete_topic(&client, "t").await.expect_err("live consumer");
        assert!(matches!(busy, Error::Busy { .. }), "{busy}");

        consumer.close().await;
        let done = delete_group(&client, "t", "g").await.expect("delete group");
        assert_eq!(done, "deleted group \"g\" of channel \"t\"");
        let again = delete_group(&client, "t", "g").await.expect("idempotent");
        assert!(again.contains("nothing to delete"), "{again}");
        let done = delete_topic(&client, "t").await.expect("delete topic");
        assert!(done.starts_with("deleted channel"), "{done}");
        assert!(client.list_topics().await.expect("list").is_empty());
        let again = delete_topic(&client, "t").await.expect("idempotent");
        assert!(again.contains("nothing to delete"), "{again}");
    }
}
