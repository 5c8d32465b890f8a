//! `TtMsgStream`: the async driver around [`TimetickAligner`].
//!
//! One pump task per channel receives and decodes into that channel's own bounded queue; the
//! driver reads only the channels the aligner asks for (those holding the watermark back). A
//! channel far ahead therefore fills its queue and its pump stops receiving: memory does not
//! grow with lag. Everything about packs — boundaries, order, positions, late messages — is
//! decided by the aligner, so the driver adds no nondeterminism.

use std::collections::HashMap;
use std::sync::Arc;

use futures::Stream;
use tokio::sync::mpsc;

use super::aligner::{TimetickAligner, WatermarkHolder};
use crate::mq::{Client, InitialPosition};
use crate::msg::{MsgPack, MsgPosition};
use crate::stream::producers::{Produce, Producers};
use crate::stream::pump::{Delivered, Event, Pumps};
use crate::stream::{resolve_position, subscribe_all, StreamOptions};
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
    /// Highest number of messages held at once, aligner and per-channel queues together
    /// (queues sampled once per pack).
    pub peak_buffered: usize,
    /// Late messages seen.
    pub late_messages: u64,
}

struct TtSide {
    pumps: Pumps,
    receivers: Vec<mpsc::Receiver<Delivered>>,
    aligner: TimetickAligner,
    closed: bool,
    packs: u64,
    peak_buffered: usize,
}

/// A timetick-aligned stream (Milvus's `MqTtMsgStream`), producing through [`Produce`] like
/// [`crate::stream::MsgStream`].
///
/// Consumption yields one [`MsgPack`] each time the watermark (minimum over channels of the last
/// timetick) rises: every message with `begin_ts < ts ≤ end_ts` from all channels, channels in
/// subscription order, each in arrival order. Replaying from the end positions of pack *k* (with
/// [`TtMsgStream::seek`] on a new stream) yields exactly packs *k+1, k+2, …* again.
pub struct TtMsgStream {
    client: Arc<dyn Client>,
    options: StreamOptions,
    producers: Producers,
    side: Option<TtSide>,
}

impl TtMsgStream {
    /// A stream with no producers or consumers yet.
    pub fn new(client: Arc<dyn Client>, options: StreamOptions) -> Self {
        TtMsgStream {
            producers: Producers::new(client.clone(), options.retry),
            client,
            options,
            side: None,
        }
    }

    /// Subscribes to all `channels` at once (their order is the order of messages in packs).
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
        let consumers = subscribe_all(
            &self.client,
            &self.options,
            channels,
            subscription,
            position,
        )
        .await?;
        let buffer = self.options.buffer.max(1);
        let mut pumps = Pumps::new(self.client.as_ref(), &self.options);
        let mut receivers = Vec::with_capacity(channels.len());
        for consumer in consumers {
            let (tx, rx) = mpsc::channel(buffer);
            pumps.add(consumer, tx);
            receivers.push(rx);
        }
        let names = channels.iter().map(|c| c.to_string()).collect();
        self.side = Some(TtSide {
            pumps,
            receivers,
            aligner: TimetickAligner::new(names, self.options.late_policy),
            closed: false,
            packs: 0,
            peak_buffered: 0,
        });
        Ok(())
    }

    /// The next pack, waiting for the watermark to rise. `None` once the consumers are closed.
    /// A late message (under the default policy) or a consumer error is returned as an `Err`
    /// item; the stream goes on after it.
    pub async fn next_pack(&mut self) -> Option<Result<MsgPack>> {
        let side = self.side.as_mut()?;
        loop {
            if side.closed {
                return None;
            }
            if let Some(pack) = side.aligner.pop_pack() {
                side.packs += 1;
                let queued: usize = side.receivers.iter().map(mpsc::Receiver::len).sum();
                side.peak_buffered = side
                    .peak_buffered
                    .max(side.aligner.peak_buffered())
                    .max(side.aligner.buffered() + queued);
                if let Some(holder) = side.aligner.holder() {
                    tracing::debug!(
                        target: "msgstream::metrics",
                        end_ts = pack.end_ts,
                        holder = %holder.name,
                        lag = holder.lag,
                        buffered = side.aligner.buffered(),
                        "tt pack"
                    );
                }
                return Some(Ok(pack));
            }
            let channel = side.aligner.next_channel()?;
            let delivered = side.receivers.get_mut(channel)?.recv().await?;
            if !side.pumps.is_current(&delivered) {
                continue;
            }
            match delivered.event {
                Event::Msg(msg) => {
                    if let Err(error) = side.aligner.push(channel, msg) {
                        return Some(Err(error));
                    }
                }
                Event::Failed(error) => return Some(Err(error)),
                Event::Closed => side.closed = true,
            }
        }
    }

    /// The stream as a `futures::Stream` of packs.
    pub fn into_stream(self) -> impl Stream<Item = Result<MsgPack>> {
        futures::stream::unfold(self, |mut stream| async move {
            stream.next_pack().await.map(|item| (item, stream))
        })
    }

    /// Resumes from stored positions (one per subscribed channel, any order): each channel is
    /// re-read inclusively from its `msg_id`, and messages at or below its `timestamp` are
    /// dropped. Everything is checked before anything moves.
    pub async fn seek(&mut self, positions: &[MsgPosition]) -> Result<()> {
        let client = self.client.clone();
        let late_policy = self.options.late_policy;
        let side = self.side.as_mut().ok_or_else(|| Error::NotSubscribed {
            channel: positions
                .first()
                .map(|p| p.channel_name.clone())
                .unwrap_or_default(),
        })?;
        let mut by_channel: HashMap<&str, &MsgPosition> = HashMap::new();
        for position in positions {
            side.pumps.index_of(&position.channel_name)?;
            by_channel.insert(position.channel_name.as_str(), position);
        }
        let names: Vec<String> = side.aligner.channel_names().map(str::to_string).collect();
        let mut ordered = Vec::with_capacity(names.len());
        let mut ids = Vec::with_capacity(names.len());
        for name in &names {
            let position = by_channel.get(name.as_str()).ok_or_else(|| {
                Error::InvalidArgument(format!("no position given for channel {name:?}"))
            })?;
            ids.push(resolve_position(client.as_ref(), position)?);
            ordered.push((*position).clone());
        }
        let aligner = TimetickAligner::resume(&ordered, late_policy)?;
        for (index, id) in ids.iter().enumerate() {
            side.pumps.seek(index, id, true).await?;
        }
        side.aligner = aligner;
        side.closed = false;
        Ok(())
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
            })
            .unwrap_or_default()
    }

    /// Closes producers and consumers (acked positions stay committed).
    pub async fn close(&mut self) {
        self.producers.close().await;
        if let Some(side) = self.side.as_mut() {
            side.pumps.close().await;
            side.closed = true;
        }
    }
}

impl Produce for TtMsgStream {
    fn producers(&self) -> &Producers {
        &self.producers
    }

    fn producers_mut(&mut self) -> &mut Producers {
        &mut self.producers
    }
}
