//! `MsgStream`: producers on N channels and consumers delivering one message per pack.

use std::sync::Arc;

use futures::Stream;

use crate::consume::batch::Batch;
use crate::consume::commit::AckToken;
use crate::consume::pump::Pumps;
use crate::consume::queue::{queue, Queue, QueueReader};
use crate::consume::runs::Whole;
use crate::consume::{
    check_distinct, precheck_targets, resolve_position, subscribe_all, CommitLog, Readers,
    StreamOptions,
};
use crate::mq::{Client, InitialPosition, MessageId};
use crate::msg::{MsgPack, MsgPosition, TsMsg};
use crate::produce::producers::{producing_methods, Producers};
use crate::{Error, Result};

struct ConsumerSide {
    pumps: Pumps<Whole>,
    tx: Queue<()>,
    rx: QueueReader<()>,
    open: usize,
    commits: CommitLog,
    /// The last message handed to the application (channel index, id), not yet committed.
    delivered: Option<(usize, MessageId)>,
    /// Per channel, the last message handed to the application since the channel last moved:
    /// where a seek that fails midway puts the channel back.
    handed: Vec<Option<MessageId>>,
    /// A permanent failure ended the stream.
    failed: bool,
    /// The batch being handed over, one message per pack (boxed: one allocation per batch
    /// keeps the stream itself small).
    handing: Option<Box<Batch<()>>>,
}

/// One delivery of a batch, moved once, straight into the pack it becomes: boxing the
/// message would add an allocation per message.
#[allow(clippy::large_enum_variant)]
enum Handed {
    Msg(TsMsg, AckToken),
    Failed(Error, Option<AckToken>),
    Closed,
}

/// The next delivery of `batch`, in its order: messages, the failure, the end.
fn next_delivery(batch: &mut Batch<()>) -> Option<Handed> {
    if let Some((msg, _, token)) = batch.pop_front() {
        return Some(Handed::Msg(msg, token));
    }
    if let Some((error, token)) = batch.failure.take() {
        return Some(Handed::Failed(error, token));
    }
    std::mem::take(&mut batch.closed).then_some(Handed::Closed)
}

impl ConsumerSide {
    /// Commits everything handed to the application so far.
    async fn commit_delivered(&mut self) -> Result<()> {
        match self.delivered.take() {
            Some((channel, id)) => self.commits.commit(&[(channel, &id)]).await,
            None => Ok(()),
        }
    }
}

/// A message stream over one backend (Milvus's `MsgStream`): produce with repacking, broadcast
/// and marks (`produce`, `broadcast`, `produce_mark`, …), consumption as packs of one message, seek, readers.
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
    readers: Readers,
}

impl MsgStream {
    /// A stream with no producers or consumers yet.
    pub fn new(client: Arc<dyn Client>, options: StreamOptions) -> Self {
        MsgStream {
            producers: Producers::new(client.clone(), options.retry),
            readers: Readers::new(client.clone(), options.clone()),
            client,
            options,
            consumers: None,
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
            false,
        )
        .await?;
        let (client, options) = (&self.client, &self.options);
        let side = self.consumers.get_or_insert_with(|| {
            let (tx, rx) = queue(options.buffer.max(1));
            let pumps = Pumps::new(client.as_ref(), options);
            ConsumerSide {
                commits: CommitLog::new(pumps.cumulative_acks()),
                pumps,
                tx,
                rx,
                open: 0,
                delivered: None,
                handed: Vec::new(),
                failed: false,
                handing: None,
            }
        });
        for consumer in consumers {
            let topic = consumer.topic().to_string();
            let (_, acker) = side.pumps.add(consumer, side.tx.clone());
            side.commits.add_channel(acker, &topic);
            side.handed.push(None);
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
            let next = match side.handing.as_mut() {
                Some(handing)
                    if side
                        .pumps
                        .is_current_in(handing.channel, handing.generation) =>
                {
                    next_delivery(handing).map(|handed| (handing.channel, handed))
                }
                _ => None,
            };
            let Some((channel, handed)) = next else {
                let Some(batch) = side.rx.recv().await else {
                    // The stream holds a sender itself: the queue cannot end while it lives.
                    side.failed = true;
                    return Some(Err(Error::backend(
                        "msgstream",
                        "stream: broken invariant: the queue of the consumers ended",
                    )));
                };
                side.handing = side.pumps.is_current(&batch).then(|| Box::new(batch));
                continue;
            };
            let (token, outcome) = match handed {
                Handed::Msg(msg, token) => (Some(token), Ok(single_pack(msg))),
                Handed::Failed(error, token) => {
                    // A message that does not decode is one item; a failure with no message
                    // behind it ended its channel for good.
                    side.failed |= token.is_none();
                    (token, Err(error))
                }
                Handed::Closed => {
                    side.open -= 1;
                    continue;
                }
            };
            if let Some(token) = token {
                let id = token.id.clone();
                side.commits.received(channel, token, true);
                if let Some(slot) = side.handed.get_mut(channel) {
                    *slot = Some(id.clone());
                }
                side.delivered = Some((channel, id));
            }
            return Some(outcome);
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
                    channel: p.channel_name.to_string(),
                }),
                None => Ok(()),
            };
        };
        let mut targets = Vec::with_capacity(positions.len());
        for position in positions {
            let index = side.pumps.index_of(&position.channel_name)?;
            targets.push((index, resolve_position(client.as_ref(), position)?));
        }
        let points: Vec<(usize, &MessageId)> = targets.iter().map(|(i, id)| (*i, id)).collect();
        side.commits.commit(&points).await?;
        if side
            .delivered
            .as_ref()
            .is_some_and(|delivered| targets.contains(delivered))
        {
            side.delivered = None;
        }
        Ok(())
    }

    /// The packs as a `futures::Stream` borrowing the stream, which stays usable afterwards
    /// (to seek, commit or close it). Boxed, so it is `Unpin` and `Send` like any stream a
    /// caller would poll with `StreamExt::next`.
    pub fn packs(&mut self) -> futures::stream::BoxStream<'_, Result<MsgPack>> {
        Box::pin(futures::stream::unfold(self, |stream| async move {
            stream.next_pack().await.map(|item| (item, stream))
        }))
    }

    /// Whether `channel` exists on the backend (Milvus's `CheckTopicValid`):
    /// `Error::UnknownChannel` if not.
    pub async fn check_topic_valid(&self, channel: &str) -> Result<()> {
        crate::consume::check_topic_valid(self.client.as_ref(), channel).await
    }

    /// The stream as a `futures::Stream` of packs.
    pub fn into_stream(self) -> impl Stream<Item = Result<MsgPack>> {
        futures::stream::unfold(self, |mut stream| async move {
            stream.next_pack().await.map(|item| (item, stream))
        })
    }

    /// Moves each named channel's subscription to just after its position, so the next message
    /// delivered is the one after `msg_id`: stored `end_positions` of a pack give the packs that
    /// followed it, as on [`crate::tt::TtMsgStream::seek`]. Channels not named keep going.
    /// Unsubscribed channels and undecodable ids are errors, checked before anything moves. If a
    /// backend call fails midway, the channels moved before it are put back right after the last
    /// message the application had from each: a failed seek changes nothing.
    pub async fn seek(&mut self, positions: &[MsgPosition]) -> Result<()> {
        self.seek_to(positions, false).await
    }

    /// [`MsgStream::seek`], but the message at each position's `msg_id` is delivered again.
    pub async fn seek_inclusive(&mut self, positions: &[MsgPosition]) -> Result<()> {
        self.seek_to(positions, true).await
    }

    /// Moves every consumed channel to the first message whose timestamp is ≥ `timestamp`
    /// (timestamps and "first" as in [`crate::mq::time`]: channel order, and messages after it
    /// may still be below `timestamp`, since timestamps are ordered only across timeticks).
    /// A channel with no such message yet continues with the first message produced after
    /// the call. Each channel's target is found by [`Client::message_id_at_time`] before
    /// anything moves; then it moves as [`MsgStream::seek`] does (a failed seek changes
    /// nothing). `Error::Unsupported` where the backend cannot seek by time.
    pub async fn seek_to_time(&mut self, timestamp: u64) -> Result<()> {
        let client = self.client.clone();
        let side = self
            .consumers
            .as_ref()
            .ok_or_else(|| Error::NotSubscribed {
                channel: String::new(),
            })?;
        let mut targets = Vec::new();
        for (index, channel) in side.pumps.channels().enumerate() {
            let at = client.message_id_at_time(channel, timestamp).await?;
            targets.push((channel.to_string(), index, at.id, at.inclusive));
        }
        self.seek_targets(targets).await
    }

    async fn seek_to(&mut self, positions: &[MsgPosition], inclusive: bool) -> Result<()> {
        let client = self.client.clone();
        let side = self
            .consumers
            .as_mut()
            .ok_or_else(|| Error::NotSubscribed {
                channel: positions
                    .first()
                    .map(|p| p.channel_name.to_string())
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
            let id = resolve_position(client.as_ref(), position)?;
            targets.push((position.channel_name.to_string(), index, id, inclusive));
        }
        self.seek_targets(targets).await
    }

    /// Moves each target (channel, its index, id, inclusive), checking every target first.
    async fn seek_targets(&mut self, targets: Vec<(String, usize, MessageId, bool)>) -> Result<()> {
        let client = self.client.clone();
        let Some(side) = self.consumers.as_mut() else {
            return Ok(());
        };
        let named: Vec<(String, MessageId, bool)> = targets
            .iter()
            .map(|(channel, _, id, inclusive)| (channel.clone(), id.clone(), *inclusive))
            .collect();
        precheck_targets(client.as_ref(), &named).await?;
        let targets: Vec<(usize, MessageId, bool)> = targets
            .into_iter()
            .map(|(_, index, id, inclusive)| (index, id, inclusive))
            .collect();
        // A channel put back resumes right after the last message the application had from
        // it, or else at the first one its pump had received.
        let handed = &side.handed;
        let sought = side
            .pumps
            .seek_all(&targets, |index, first| {
                match handed.get(index).cloned().flatten() {
                    Some(last) => Some((last, false)),
                    None => first.map(|id| (id, true)),
                }
            })
            .await;
        let moved: Vec<usize> = match sought {
            Ok(()) => targets.iter().map(|(index, _, _)| *index).collect(),
            Err(failed) => {
                // Tokens received before the move carry the old delivery epoch: dropped, so
                // the messages they stand for are acked when they come again.
                for index in failed.restored {
                    side.commits.reset(index);
                }
                return Err(failed.error);
            }
        };
        for index in moved {
            side.commits.reset(index);
            if let Some(slot) = side.handed.get_mut(index) {
                *slot = None;
            }
            if side.delivered.as_ref().is_some_and(|(c, _)| *c == index) {
                side.delivered = None;
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
        self.readers.add(channels, subscription).await
    }

    /// The next message of a reader channel, waiting for it; undecodable payloads are errors.
    pub async fn next(&mut self, channel: &str) -> Result<TsMsg> {
        self.readers.next(channel).await
    }

    /// Whether a reader channel has a message available now.
    pub async fn has_next(&mut self, channel: &str) -> Result<bool> {
        self.readers.has_next(channel).await
    }

    /// Moves readers to positions (each must name a reader channel); every target is checked
    /// before any reader moves.
    pub async fn seek_readers(&mut self, positions: &[MsgPosition], inclusive: bool) -> Result<()> {
        self.readers.seek(positions, inclusive).await
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
        self.readers.close().await;
    }
}

producing_methods!(MsgStream);

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
