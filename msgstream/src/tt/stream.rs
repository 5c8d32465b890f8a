//! `TtMsgStream`: the tt stream's public interface around its consuming side.
//!
//! One pump task per channel receives and decodes into that channel's own bounded queue; the
//! driver ([`super::driver`]) reads only the channels the aligner asks for (those holding the
//! watermark back). A channel far ahead therefore fills its queue and its pump stops receiving:
//! memory does not grow with lag. Everything about packs — boundaries, order, positions, late
//! messages — is decided by the aligner, so the driver adds no nondeterminism.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::SystemTime;

use futures::Stream;

use super::aligner::{TimetickAligner, WatermarkHolder};
use super::driver::TtSide;
use crate::consume::pump::Pumps;
use crate::consume::queue::queue;
use crate::consume::{
    check_distinct, precheck_targets, resolve_position, subscribe_all, CommitLog, Readers,
    StreamOptions,
};
use crate::mq::{Client, InitialPosition, MessageId};
use crate::msg::{MsgPack, MsgPosition};
use crate::produce::producers::{producing_methods, Producers};
use crate::{Error, Result};

/// Counters of a tt stream, for diagnostics and benchmarks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TtStats {
    /// Packs emitted.
    pub packs: u64,
    /// `end_ts` of the last pack (or the resume timestamp).
    pub last_end: u64,
    /// Messages held by the aligner now.
    pub buffered: usize,
    /// Highest number of messages held at once: aligner, per-channel queues and what the
    /// consumer tasks hold before them (sampled once per pack). Each backend consumer may
    /// prefetch up to `buffer` more per channel on top.
    pub peak_buffered: usize,
    /// Messages received but not yet committed (the commit log's ack tokens: ids, no payloads).
    pub uncommitted: usize,
    /// Late messages seen.
    pub late_messages: u64,
    /// Channels the stream stopped reading because they hold `max_held_per_channel` messages
    /// without a tick, in subscription order.
    pub capped: Vec<CappedChannel>,
}

/// A channel the tt stream stopped reading at its cap (see `StreamOptions::max_held_per_channel`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CappedChannel {
    /// Its name.
    pub channel: String,
    /// Messages the stream holds for it.
    pub held: usize,
    /// When it reached the cap.
    pub since: SystemTime,
}

/// A timetick-aligned stream (Milvus's `MqTtMsgStream`), producing with the same methods as
/// [`crate::stream::MsgStream`].
///
/// Consumption yields one [`MsgPack`] each time the watermark (minimum over channels of the last
/// timetick) rises: every message with `begin_ts < ts ≤ end_ts` from all channels, channels in
/// subscription order, each in arrival order. Replaying from the end positions of pack *k* (with
/// [`TtMsgStream::seek`] on a new stream) yields exactly packs *k+1, k+2, …* again.
///
/// **Delivery guarantee.** Messages are acked on the subscription only once the application
/// has had their pack: when it asks for the next pack (auto-commit, the default), on
/// [`TtMsgStream::close`], or through [`TtMsgStream::commit`] with a pack's end positions when
/// `StreamOptions::auto_commit` is off. Each commit moves a channel to that pack's end position
/// (the first message still held, or past the last tick read). So a consumer killed at any point
/// and restarted from its subscription receives again every message of every pack it had not
/// finished, and none of the packs before (at-least-once; a channel whose own messages are out of
/// timestamp order can also repeat those of the last finished pack). Restarting from stored end
/// positions with [`TtMsgStream::seek`] is exact.
pub struct TtMsgStream {
    client: Arc<dyn Client>,
    options: StreamOptions,
    producers: Producers,
    side: Option<TtSide>,
    readers: Readers,
}

impl TtMsgStream {
    /// A stream with no producers or consumers yet.
    pub fn new(client: Arc<dyn Client>, options: StreamOptions) -> Self {
        TtMsgStream {
            producers: Producers::new(client.clone(), options.retry),
            readers: Readers::new(client.clone(), options.clone()),
            client,
            options,
            side: None,
        }
    }

    /// Subscribes to all `channels` at once (their order is the order of messages in packs).
    ///
    /// A new subscription at [`InitialPosition::Timestamp`] starts at each channel's first
    /// message at or after that time (the plain rule, which may cut a pack in two); for exactly
    /// the packs of a time, use [`TtMsgStream::seek_to_time`].
    pub async fn as_consumer(
        &mut self,
        channels: &[&str],
        subscription: &str,
        position: InitialPosition,
    ) -> Result<()> {
        if self.side.is_some() {
            return Err(Error::InvalidArgument(
                "a tt stream subscribes to all its channels in one as_consumer call".into(),
            ));
        }
        if channels.is_empty() {
            return Err(Error::InvalidArgument("no channels to consume".into()));
        }
        check_distinct(channels, |_| false)?;
        let consumers = subscribe_all(
            &self.client,
            &self.options,
            channels,
            subscription,
            position,
            true,
        )
        .await?;
        let buffer = self.options.buffer.max(1);
        let mut pumps = Pumps::new(self.client.as_ref(), &self.options);
        let mut commits = CommitLog::new(pumps.cumulative_acks());
        let mut receivers = Vec::with_capacity(channels.len());
        for consumer in consumers {
            let (tx, rx) = queue(buffer);
            let topic = consumer.topic().to_string();
            let (_, acker) = pumps.add(consumer, tx);
            commits.add_channel(acker, &topic);
            receivers.push(rx);
        }
        let names = channels.iter().map(|c| c.to_string()).collect();
        self.side = Some(TtSide {
            subscription: subscription.to_string(),
            pumps,
            receivers,
            aligner: TimetickAligner::new(names, self.options.late_policy),
            closed: false,
            packs: 0,
            peak_buffered: 0,
            commits,
            delivered: None,
            ticks_taken: vec![0; channels.len()],
            capped_since: vec![None; channels.len()],
        });
        Ok(())
    }

    /// The next pack, waiting for the watermark to rise. `None` once the consumers are closed.
    ///
    /// With auto-commit (the default) it first commits the pack handed over before. A late
    /// message (under the default policy) or an undecodable one is returned as an `Err` item and
    /// the stream goes on; a permanent consumer failure is returned as an item and ends it.
    pub async fn next_pack(&mut self) -> Option<Result<MsgPack>> {
        let max_held = self.options.max_held_per_channel.max(1);
        let side = self.side.as_mut()?;
        if self.options.auto_commit {
            if let Err(error) = side.commit_delivered().await {
                return Some(Err(error));
            }
        }
        side.next_pack(max_held).await
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

    /// The newest message id of a subscribed channel (`None` when it is empty), Milvus's
    /// `GetLatestMsgID`.
    pub async fn latest_message_id(&mut self, channel: &str) -> Result<Option<MessageId>> {
        let side = self.side.as_mut().ok_or_else(|| Error::NotSubscribed {
            channel: channel.to_string(),
        })?;
        let index = side.pumps.index_of(channel)?;
        side.pumps.latest_message_id(index).await
    }

    /// Opens readers on `channels`, from the earliest message, as the plain stream does.
    /// Readers keep no durable state and are independent of the stream's consumers.
    pub async fn as_reader(&mut self, channels: &[&str], subscription: &str) -> Result<()> {
        self.readers.add(channels, subscription).await
    }

    /// The next message of a reader channel, waiting for it; undecodable payloads are errors.
    pub async fn next(&mut self, channel: &str) -> Result<crate::msg::TsMsg> {
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

    /// The stream as a `futures::Stream` of packs.
    pub fn into_stream(self) -> impl Stream<Item = Result<MsgPack>> {
        futures::stream::unfold(self, |mut stream| async move {
            stream.next_pack().await.map(|item| (item, stream))
        })
    }

    /// Commits (acks) each channel up to a pack's end positions, so a restart from the
    /// subscription resumes there. For streams with `auto_commit` off; harmless with it on.
    /// Every subscribed channel needs its position, as with [`TtMsgStream::seek`].
    pub async fn commit(&mut self, positions: &[MsgPosition]) -> Result<()> {
        let Some(side) = self.side.as_mut() else {
            return match positions.first() {
                Some(p) => Err(Error::NotSubscribed {
                    channel: p.channel_name.to_string(),
                }),
                None => Ok(()),
            };
        };
        let ordered = order_positions(side, positions)?;
        side.commit_to(&ordered).await?;
        if side.delivered.as_deref() == Some(&ordered[..]) {
            side.delivered = None;
        }
        Ok(())
    }

    /// Resumes from stored positions (one per subscribed channel, any order): each channel is
    /// re-read inclusively from its `msg_id`, and messages at or below its `timestamp` are
    /// dropped. Everything is checked before anything moves, and a seek the backend refuses
    /// (an id past the end, or below retention) leaves the stream as it was. If a backend call
    /// still fails midway, the channels moved before it are put back at the aligner's resume
    /// point and the same packs follow as without the seek.
    pub async fn seek(&mut self, positions: &[MsgPosition]) -> Result<()> {
        let client = self.client.clone();
        let late_policy = self.options.late_policy;
        let side = self.side.as_mut().ok_or_else(|| Error::NotSubscribed {
            channel: positions
                .first()
                .map(|p| p.channel_name.to_string())
                .unwrap_or_default(),
        })?;
        let ordered = order_positions(side, positions)?;
        let mut ids = Vec::with_capacity(ordered.len());
        for position in &ordered {
            ids.push(resolve_position(client.as_ref(), position)?);
        }
        let aligner = TimetickAligner::resume(&ordered, late_policy)?;
        let named: Vec<(String, MessageId, bool)> = ordered
            .iter()
            .zip(&ids)
            .map(|(p, id)| (p.channel_name.to_string(), id.clone(), true))
            .collect();
        precheck_targets(client.as_ref(), &named).await?;
        // A channel put back re-reads from where it would resume now (the first message its
        // aligner holds, or its last tick), or else from the first message its pump received.
        let resume_points = side.aligner.positions();
        let targets: Vec<(usize, MessageId, bool)> = ids
            .into_iter()
            .enumerate()
            .map(|(index, id)| (index, id, true))
            .collect();
        let sought = side
            .pumps
            .seek_all(&targets, |index, first| {
                let here = resume_points
                    .get(index)
                    .filter(|p| !p.msg_id.is_empty())
                    .and_then(|p| resolve_position(client.as_ref(), p).ok());
                here.or(first).map(|id| (id, true))
            })
            .await;
        if let Err(failed) = sought {
            for index in failed.restored {
                // What it held comes again from its pump; the tokens of the old delivery
                // epoch go (the messages are acked when they come again).
                side.aligner.forget_buffered(index);
                side.commits.reset(index);
            }
            return Err(failed.error);
        }
        for index in 0..targets.len() {
            side.commits.reset(index);
        }
        side.delivered = None;
        side.aligner = aligner;
        side.closed = false;
        Ok(())
    }

    /// Moves the stream so that it yields exactly the packs a consumer positioned at the last
    /// timetick before `timestamp` would read: per channel, its last tick with a timestamp
    /// below `timestamp` (before its first tick at or above it), or the channel's start where
    /// it has none; then [`TtMsgStream::seek`] to those positions, which it returns (one per
    /// channel, in subscription order; save them to come back). When every channel ticks at
    /// the same timestamps, the first pack is the one whose `begin_ts < timestamp ≤ end_ts`,
    /// followed by every later pack, exactly as in an uninterrupted run.
    ///
    /// Each tick is found from the backend's time index (probes at `timestamp − 1, − 2, − 4,
    /// …`, reading forward from each lower bound, see `Client::time_lower_bound`), never by
    /// reading the channel from its start unless the tick is near it. `Error::Unsupported`
    /// where the backend cannot seek by time; nothing moves on any error.
    pub async fn seek_to_time(&mut self, timestamp: u64) -> Result<Vec<MsgPosition>> {
        let client = self.client.clone();
        let side = self.side.as_ref().ok_or_else(|| Error::NotSubscribed {
            channel: String::new(),
        })?;
        let channels: Vec<String> = side.aligner.channel_names().map(str::to_string).collect();
        let mut positions = Vec::with_capacity(channels.len());
        for channel in &channels {
            positions
                .push(super::time_seek::tick_before(client.as_ref(), channel, timestamp).await?);
        }
        self.seek(&positions).await?;
        Ok(positions)
    }

    /// Where each channel would resume now (the end positions of the last pack, or better).
    pub fn positions(&self) -> Vec<MsgPosition> {
        self.side
            .as_ref()
            .map(|s| s.aligner.positions())
            .unwrap_or_default()
    }

    /// The channel holding the watermark back and by how much.
    pub fn watermark_holder(&self) -> Option<WatermarkHolder> {
        self.side.as_ref().and_then(|s| s.aligner.holder())
    }

    /// Counters so far.
    pub fn stats(&self) -> TtStats {
        self.side
            .as_ref()
            .map(|s| TtStats {
                packs: s.packs,
                last_end: s.aligner.last_end(),
                buffered: s.aligner.buffered(),
                peak_buffered: s.peak_buffered.max(s.aligner.peak_buffered()),
                late_messages: s.aligner.late_messages(),
                uncommitted: s.commits.len(),
                capped: s
                    .capped_since
                    .iter()
                    .zip(s.aligner.channel_names())
                    .enumerate()
                    .filter_map(|(index, (since, name))| {
                        since.map(|since| CappedChannel {
                            channel: name.to_string(),
                            held: s.aligner.buffered_in(index),
                            since,
                        })
                    })
                    .collect(),
            })
            .unwrap_or_default()
    }

    /// Closes producers and consumers. With auto-commit, the last pack handed over is
    /// committed first; acked positions stay.
    pub async fn close(&mut self) {
        self.producers.close().await;
        let auto_commit = self.options.auto_commit;
        if let Some(side) = self.side.as_mut() {
            if auto_commit {
                if let Err(error) = side.commit_delivered().await {
                    tracing::warn!(%error, "committing on close failed");
                }
            }
            side.pumps.close().await;
            side.closed = true;
        }
        self.readers.close().await;
    }
}

/// One position per subscribed channel, in subscription order; an unknown channel, a channel
/// named twice, or a missing one is an error.
fn order_positions(side: &TtSide, positions: &[MsgPosition]) -> Result<Vec<MsgPosition>> {
    let mut by_channel: HashMap<&str, &MsgPosition> = HashMap::new();
    for position in positions {
        side.pumps.index_of(&position.channel_name)?;
        if by_channel
            .insert(position.channel_name.as_str(), position)
            .is_some()
        {
            return Err(Error::InvalidArgument(format!(
                "two positions for channel {:?}",
                position.channel_name
            )));
        }
    }
    side.aligner
        .channel_names()
        .map(|name| {
            by_channel.get(name).map(|p| (*p).clone()).ok_or_else(|| {
                Error::InvalidArgument(format!("no position given for channel {name:?}"))
            })
        })
        .collect()
}

producing_methods!(TtMsgStream);
