//! `MsgStream`: producers on N channels and consumers delivering one message per pack.

use std::collections::HashMap;
use std::sync::Arc;

use futures::Stream;
use tokio::sync::mpsc;

use super::options::StreamOptions;
use super::producers::{Produce, Producers};
use super::pump::{Event, Pumps};
use super::{resolve_position, subscribe_all};
use crate::mq::{validate_channel_name, Client, InitialPosition, MessageId, Reader, ReaderOptions};
use crate::msg::{MsgPack, MsgPosition, TsMsg};
use crate::{Error, Result};

struct ConsumerSide {
    pumps: Pumps,
    tx: mpsc::Sender<super::pump::Delivered>,
    rx: mpsc::Receiver<super::pump::Delivered>,
    open: usize,
}

/// A message stream over one backend (Milvus's `MsgStream`): produce with repacking, broadcast
/// and marks (through [`Produce`]), consumption as packs of one message, seek, readers.
///
/// Per-channel order is the backend's; messages of different channels interleave as they come.
/// Each delivered pack carries the message's position as both start and end position; storing
/// it and passing it to [`MsgStream::seek`] resumes there.
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
            ConsumerSide {
                pumps: Pumps::new(client.as_ref(), options),
                tx,
                rx,
                open: 0,
            }
        });
        for consumer in consumers {
            side.pumps.add(consumer, side.tx.clone());
            side.open += 1;
        }
        Ok(())
    }

    /// The next pack (one message), waiting for it. `None` once every consumer is closed.
    /// Consumer errors and undecodable messages are returned as error items; the stream goes on.
    pub async fn next_pack(&mut self) -> Option<Result<MsgPack>> {
        let side = self.consumers.as_mut()?;
        while side.open > 0 {
            let delivered = side.rx.recv().await?;
            if !side.pumps.is_current(&delivered) {
                continue;
            }
            match delivered.event {
                Event::Msg(msg) => return Some(Ok(single_pack(msg))),
                Event::Failed(error) => return Some(Err(error)),
                Event::Closed => side.open -= 1,
            }
        }
        None
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
        for position in positions {
            let index = side.pumps.index_of(&position.channel_name)?;
            targets.push((index, resolve_position(client.as_ref(), position)?));
        }
        for (index, id) in targets {
            side.pumps.seek(index, &id, inclusive).await?;
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
        for (position, id) in positions.iter().zip(targets) {
            self.reader(&position.channel_name)?
                .seek(&id, inclusive)
                .await?;
        }
        Ok(())
    }

    /// Closes producers, consumers (acked positions stay) and readers.
    pub async fn close(&mut self) {
        self.producers.close().await;
        if let Some(side) = self.consumers.as_mut() {
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
