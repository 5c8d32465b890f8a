//! [`Readers`]: the non-durable readers of a stream, one per channel, shared by both streams.

use std::collections::HashMap;
use std::sync::Arc;

use super::{check_distinct, precheck_targets, resolve_position, StreamOptions};
use crate::mq::{validate_channel_name, Client, MessageId, Reader, ReaderOptions};
use crate::msg::{MsgPosition, TsMsg};
use crate::{Error, Result};

/// Readers by channel. They keep no durable state: each starts at the earliest message and
/// moves only by `seek`.
pub(crate) struct Readers {
    client: Arc<dyn Client>,
    options: StreamOptions,
    readers: HashMap<String, Box<dyn Reader>>,
}

impl Readers {
    pub(crate) fn new(client: Arc<dyn Client>, options: StreamOptions) -> Self {
        Readers {
            client,
            options,
            readers: HashMap::new(),
        }
    }

    /// Opens readers on `channels` from the earliest message; a channel named twice or read
    /// already is `InvalidArgument`.
    pub(crate) async fn add(&mut self, channels: &[&str], subscription: &str) -> Result<()> {
        validate_channel_name("subscription", subscription)?;
        check_distinct(channels, |c| self.readers.contains_key(c))?;
        for channel in channels {
            validate_channel_name("channel", channel)?;
        }
        for channel in channels {
            let options = ReaderOptions {
                topic: channel.to_string(),
                start: self.client.earliest_message_id(),
                inclusive: true,
            };
            let client = &self.client;
            let reader = self
                .options
                .retry
                .run("create reader", || client.create_reader(options.clone()))
                .await?;
            self.readers.insert(channel.to_string(), reader);
        }
        Ok(())
    }

    fn reader(&mut self, channel: &str) -> Result<&mut Box<dyn Reader>> {
        self.readers
            .get_mut(channel)
            .ok_or_else(|| Error::NotSubscribed {
                channel: channel.to_string(),
            })
    }

    /// The next message of a reader channel, waiting for it; undecodable payloads are errors.
    pub(crate) async fn next(&mut self, channel: &str) -> Result<TsMsg> {
        let registry = self.options.registry.clone();
        let msg = self.reader(channel)?.next().await?;
        let mut ts = TsMsg::new(registry.decode(&msg.payload)?);
        ts.position = Some(MsgPosition {
            channel_name: msg.topic.clone(),
            msg_id: msg.id.clone(),
            timestamp: ts.begin_ts(),
            ..MsgPosition::default()
        });
        ts.properties = msg.properties;
        Ok(ts)
    }

    /// Whether a reader channel has a message available now.
    pub(crate) async fn has_next(&mut self, channel: &str) -> Result<bool> {
        self.reader(channel)?.has_next().await
    }

    /// Moves readers to positions (each must name a reader channel); every target is checked
    /// before any reader moves.
    pub(crate) async fn seek(&mut self, positions: &[MsgPosition], inclusive: bool) -> Result<()> {
        let mut targets: Vec<(String, MessageId, bool)> = Vec::with_capacity(positions.len());
        for position in positions {
            self.reader(&position.channel_name)?;
            let id = resolve_position(self.client.as_ref(), position)?;
            targets.push((position.channel_name.to_string(), id, inclusive));
        }
        precheck_targets(self.client.as_ref(), &targets).await?;
        for (channel, id, _) in &targets {
            self.reader(channel)?.seek(id, inclusive).await?;
        }
        Ok(())
    }

    /// Closes every reader.
    pub(crate) async fn close(&mut self) {
        for (_, mut reader) in self.readers.drain() {
            reader.close().await;
        }
    }
}
