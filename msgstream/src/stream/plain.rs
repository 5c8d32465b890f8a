//! `MsgStream`: producers on N channels and consumers delivering one message per pack.

use std::collections::HashMap;
use std::sync::Arc;

use futures::Stream;
use tokio::sync::mpsc;

use super::options::StreamOptions;
use super::producers::{Produce, Producers};
use super::pump::{Event, Pumps};
use super::{check_distinct, precheck_targets, resolve_position, subscribe_all, CommitLog};
use crate::mq::{validate_channel_name, Client, InitialPosition, MessageId, Reader, ReaderOptions};
use crate::msg::{MsgPack, MsgPosition, TsMsg};
use crate::{Error, Result};

struct ConsumerSide {
    pumps: Pumps,
    tx: mpsc::Sender<super::pump::Delivered>,
    rx: mpsc::Receiver<super::pump::Delivered>,
    open: usize,
    commits: CommitLog,
    /// Per channel, the last message handed to the application and not yet committed.
    delivered: Vec<Option<MessageId>>,
    /// A permanent failure ended the stream.
    failed: bool,
}

impl ConsumerSide {
    /// Commits everything handed to the application so far.
    async fn commit_delivered(&mut self) -> Result<()> {
        for (channel, last) in self.delivered.iter_mut().enumerate() {
            if let Some(id) = last.take() {
                self.commits.commit(channel, &id).await?;
            }
        }
        Ok(())
    }
}

/// A message stream over one backend (Milvus's `MsgStream`): produce with repacking, broadcast
/// and marks (through [`Produce`]), consumption as packs of one message, seek, readers.
///
/// Per-channel order is the backend's; messages of different channels interleave as they come.
/// Each delivered pack carries the message's position as both start and end position; storing
/// it and passing it to [`MsgStream::seek`] resumes there.
///
/// **Delivery guarantee.** A message is acked on its subscription only once the application has
/// had it: when it asks for the next pack (auto-commit, the default), on [`MsgStream::close`],
/// or through [`MsgStream::commit`] when `StreamOptions::auto_commit` is off. So a consumer that
/// dies at any point and restarts from its subscription receives again the message it was
/// handling, and none before it (at-least-once); restarting from stored positions with
/// [`MsgStream::seek`] is exact.
pub struct MsgStream {
    client: Arc<dyn Client>,
    options: StreamOptions,
    producers: Producers,
    consumers: Option<ConsumerSide>,
    readers: HashMap<String, Box<dyn Reader>>,
}

impl MsgStream {
    /// A stream with no producers or consumers yet.
    pub fn new(client: Arc<dyn Client>, options: StreamOptions) -> Self {
        MsgStream {
            producers: Producers::new(client.clone(), options.retry),
            client,
            options,
            consumers: None,
            readers: HashMap::new(),
        }
    }

    /// The client this stream uses.
    pub fn client(&self) -> &Arc<dyn Client> {
        &self.client
    }

    /// Subscribes `subscription` on `channels`, a new subscription starting at `position`.
    pub async fn as_consumer(
        &mut self,
        channels: &[&str],
        subscription: &str,
        position: InitialPosition,
    ) -> Result<()> {
        check_distinct(channels, |c| {
            self.consumers
                .as_ref()
                .is_some_and(|side| side.pumps.contains(c))
        })?;
        let consumers = subscribe_all(
            &self.client,
            &self.options,
            channels,
            subscription,
            position,
        )
        .await?;
        let (client, options) = (&self.client, &self.options);
        let side = self.consumers.get_or_insert_with(|| {
            let (tx, rx) = mpsc::channel(options.buffer.max(1));
            let pumps = Pumps::new(client.as_ref(), options);
            ConsumerSide {
                commits: CommitLog::new(pumps.cumulative_acks()),
                pumps,
                tx,
                rx,
                open: 0,
                delivered: Vec::new(),
                failed: false,
            }
        });
        for consumer in consumers {
            let (_, acker) = side.pumps.add(consumer, side.tx.clone());
            side.commits.add_channel(acker);
            side.delivered.push(None);
            side.open += 1;
        }
        Ok(())
    }

    /// The next pack (one message), waiting for it. `None` once every consumer is closed.
    ///
    /// With auto-commit (the default) it first commits what was handed over before. An
    /// undecodable message is returned as an `Error::Decode` item naming its channel and id (and
    /// counts as handed over); a permanent consumer failure is returned as an item and ends the
    /// stream.
    pub async fn next_pack(&mut self) -> Option<Result<MsgPack>> {
        let auto_commit = self.options.auto_commit;
        let side = self.consumers.as_mut()?;
        if auto_commit {
            if let Err(error) = side.commit_delivered().await {
                return Some(Err(error));
            }
        }
        while side.open > 0 && !side.failed {
            let delivered = side.rx.recv().await?;
            if !side.pumps.is_current(&delivered) {
                continue;
            }
            let channel = delivered.channel;
            let handed = delivered.token.as_ref().map(|t| t.id.clone());
            let per_message = handed.is_some();
            if let Some(token) = delivered.token {
                side.commits.received(channel, token, true);
            }
            if let (Some(id), Some(slot)) = (handed, side.delivered.get_mut(channel)) {
                *slot = Some(id);
            }
            match delivered.event {
                Event::Msg(msg) => return Some(Ok(single_pack(msg))),
                Event::Failed(error) => {
                    // A message that does not decode is one item; a failure with no message
                    // behind it ended its channel for good.
                    side.failed |= !per_message;
                    return Some(Err(error));
                }
                Event::Closed => side.open -= 1,
            }
        }
        None
    }

    /// Commits (acks) every message up to and including each position (as carried by packs of
    /// this stream), so a restart from the subscription resumes after them. For streams with
    /// `auto_commit` off; harmless with it on. Positions of unknown channels are errors.
    pub async fn commit(&mut self, positions: &[MsgPosition]) -> Result<()> {
        let client = self.client.clone();
        let Some(side) = self.consumers.as_mut() else {
            return match positions.first() {
                Some(p) => Err(Error::NotSubscribed {
                    channel: p.channel_name.clone(),
                }),
                None => Ok(()),
            };
        };
        let mut targets = Vec::with_capacity(positions.len());
        for position in positions {
            let index = side.pumps.index_of(&position.channel_name)?;
            targets.push((index, resolve_position(client.as_ref(), position)?));
        }
        for (index, id) in targets {
            side.commits.commit(index, &id).await?;
            if let Some(slot) = side.delivered.get_mut(index) {
                if slot.as_ref() == Some(&id) {
                    *slot = None;
                }
            }
        }
        Ok(())
    }

    /// The stream as a `futures::Stream` of packs.
    pub fn into_stream(self) -> impl Stream<Item = Result<MsgPack>> {
        futures::stream::unfold(self, |mut stream| async move {
            stream.next_pack().await.map(|item| (item, stream))
        })
    }

    /// Moves each named channel's subscription to its position: the message at `msg_id` is the
    /// next one delivered when `inclusive`, else the one right after it. Channels not named keep
    /// going. Unsubscribed channels and undecodable ids are errors, checked before anything moves.
    pub async fn seek(&mut self, positions: &[MsgPosition], inclusive: bool) -> Result<()> {
        let client = self.client.clone();
        let side = self
            .consumers
            .as_mut()
            .ok_or_else(|| Error::NotSubscribed {
                channel: positions
                    .first()
                    .map(|p| p.channel_name.clone())
                    .unwrap_or_default(),
            })?;
        let mut targets = Vec::with_capacity(positions.len());
        for (i, position) in positions.iter().enumerate() {
            let index = side.pumps.index_of(&position.channel_name)?;
            if positions[..i]
                .iter()
                .any(|p| p.channel_name == position.channel_name)
            {
                return Err(Error::InvalidArgument(format!(
                    "two positions for channel {:?}",
                    position.channel_name
                )));
            }
            targets.push((index, resolve_position(client.as_ref(), position)?));
        }
        let named: Vec<(String, MessageId)> = positions
            .iter()
            .zip(&targets)
            .map(|(p, (_, id))| (p.channel_name.clone(), id.clone()))
            .collect();
        precheck_targets(client.as_ref(), &named, inclusive).await?;
        for (index, id) in targets {
            side.pumps.seek(index, &id, inclusive).await?;
            side.commits.reset(index);
            if let Some(slot) = side.delivered.get_mut(index) {
                *slot = None;
            }
        }
        Ok(())
    }

    /// The newest message id of a subscribed channel (`None` when it is empty).
    pub async fn latest_message_id(&mut self, channel: &str) -> Result<Option<MessageId>> {
        let side = self
            .consumers
            .as_mut()
            .ok_or_else(|| Error::NotSubscribed {
                channel: channel.to_string(),
            })?;
        let index = side.pumps.index_of(channel)?;
        side.pumps.latest_message_id(index).await
    }

    /// Opens readers on `channels`, from the earliest message. `subscription` only names them in
    /// diagnostics: readers keep no durable state.
    pub async fn as_reader(&mut self, channels: &[&str], subscription: &str) -> Result<()> {
        validate_channel_name("subscription", subscription)?;
        check_distinct(channels, |c| self.readers.contains_key(c))?;
        for channel in channels {
            validate_channel_name("channel", channel)?;
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
    pub async fn next(&mut self, channel: &str) -> Result<TsMsg> {
        let subscription = String::new();
        let registry = self.options.registry.clone();
        let msg = self.reader(channel)?.next().await?;
        let mut ts = TsMsg::new(registry.decode(&msg.payload)?);
        ts.position = Some(MsgPosition {
            channel_name: msg.topic.to_string(),
            msg_id: msg.id.as_bytes().to_vec(),
            msg_group: subscription,
            timestamp: ts.end_ts(),
            ..MsgPosition::default()
        });
        ts.properties = msg.properties;
        Ok(ts)
    }

    /// Whether a reader channel has a message available now.
    pub async fn has_next(&mut self, channel: &str) -> Result<bool> {
        self.reader(channel)?.has_next().await
    }

    /// Moves readers to positions (each must name a reader channel).
    pub async fn seek_readers(&mut self, positions: &[MsgPosition], inclusive: bool) -> Result<()> {
        let mut targets = Vec::with_capacity(positions.len());
        for position in positions {
            self.reader(&position.channel_name)?;
            targets.push(resolve_position(self.client.as_ref(), position)?);
        }
        let named: Vec<(String, MessageId)> = positions
            .iter()
            .zip(&targets)
            .map(|(p, id)| (p.channel_name.clone(), id.clone()))
            .collect();
        precheck_targets(self.client.as_ref(), &named, inclusive).await?;
        for (position, id) in positions.iter().zip(targets) {
            self.reader(&position.channel_name)?
                .seek(&id, inclusive)
                .await?;
        }
        Ok(())
    }

    /// Closes producers, consumers and readers. With auto-commit, what the application was
    /// handed is committed first; acked positions stay.
    pub async fn close(&mut self) {
        self.producers.close().await;
        let auto_commit = self.options.auto_commit;
        if let Some(side) = self.consumers.as_mut() {
            if auto_commit {
                if let Err(error) = side.commit_delivered().await {
                    tracing::warn!(%error, "committing on close failed");
                }
            }
            side.pumps.close().await;
            side.open = 0;
        }
        for (_, mut reader) in self.readers.drain() {
            reader.close().await;
        }
    }
}

impl Produce for MsgStream {
    fn producers(&self) -> &Producers {
        &self.producers
    }

    fn producers_mut(&mut self) -> &mut Producers {
        &mut self.producers
    }
}

/// A plain-stream pack: one message, its position as start and end.
fn single_pack(msg: TsMsg) -> MsgPack {
    let position: Vec<MsgPosition> = msg.position.clone().into_iter().collect();
    MsgPack {
        begin_ts: msg.begin_ts(),
        end_ts: msg.end_ts(),
        start_positions: position.clone(),
        end_positions: position,
        msgs: vec![msg],
    }
}
