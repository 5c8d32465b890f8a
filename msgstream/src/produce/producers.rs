//! The producer side shared by both streams: channels, repacking, produce and broadcast.

use std::collections::HashMap;
use std::sync::Arc;

use tracing::Instrument;

use super::repack::{default_repack, RepackFn};
use crate::mq::{validate_channel_name, Client, MessageId, Producer, ProducerMessage};
use crate::msg::{MsgPack, TsMsg};
use crate::retry::RetryPolicy;
use crate::{trace, Error, Result};

/// Message ids per channel, as returned by `produce_mark` and `broadcast_mark`.
pub type ChannelIds = HashMap<String, Vec<MessageId>>;

/// The producer side of a stream: producers on N channels plus the repack function that routes
/// between them. Opaque; used through the streams' producing methods.
pub struct Producers {
    client: Arc<dyn Client>,
    retry: RetryPolicy,
    channels: Vec<String>,
    /// Whether producing is allowed (`enable_produce`).
    enabled: bool,
    producers: Vec<Box<dyn Producer>>,
    repack: Option<RepackFn>,
}

impl Producers {
    pub(crate) fn new(client: Arc<dyn Client>, retry: RetryPolicy) -> Self {
        Producers {
            client,
            retry,
            channels: Vec::new(),
            enabled: true,
            producers: Vec::new(),
            repack: None,
        }
    }

    /// Adds producers for `channels` (retrying transient failures).
    pub(crate) async fn add(&mut self, channels: &[&str]) -> Result<()> {
        crate::consume::check_distinct(channels, |c| self.channels.iter().any(|have| have == c))?;
        for channel in channels {
            validate_channel_name("channel", channel)?;
        }
        for channel in channels {
            let client = &self.client;
            let producer = self
                .retry
                .run("create producer", || client.create_producer(channel))
                .await?;
            self.channels.push(channel.to_string());
            self.producers.push(producer);
        }
        Ok(())
    }

    pub(crate) fn channels(&self) -> &[String] {
        &self.channels
    }

    pub(crate) fn set_repack(&mut self, repack: RepackFn) {
        self.repack = Some(repack);
    }

    pub(crate) fn set_enabled(&mut self, enabled: bool) {
        self.enabled = enabled;
    }

    fn check_producers(&self) -> Result<()> {
        if !self.enabled {
            return Err(Error::ProduceDisabled);
        }
        if self.producers.is_empty() {
            Err(Error::InvalidArgument(
                "the stream has no producers: call as_producer first".into(),
            ))
        } else {
            Ok(())
        }
    }

    /// Routes the pack and writes each channel's share as one batch.
    pub(crate) async fn produce(&self, pack: &MsgPack) -> Result<ChannelIds> {
        let cx = opentelemetry::Context::current();
        self.check_producers()?;
        let n = self.producers.len();
        let routed = match &self.repack {
            Some(repack) => repack(pack.msgs.clone(), n)?,
            None => default_repack(pack.msgs.clone(), n)?,
        };
        if routed.len() != n {
            return Err(Error::InvalidArgument(format!(
                "repack function returned {} channel lists for {n} channels",
                routed.len()
            )));
        }
        let span = tracing::info_span!("msgstream.produce", msgs = pack.msgs.len(), channels = n);
        self.write(routed, &cx).instrument(span).await
    }

    /// Writes every message of the pack to every channel.
    pub(crate) async fn produce_mark(&self, pack: &MsgPack) -> Result<ChannelIds> {
        require_messages(pack, "produce_mark")?;
        self.produce(pack).await
    }

    pub(crate) async fn broadcast_mark(&self, pack: &MsgPack) -> Result<ChannelIds> {
        require_messages(pack, "broadcast_mark")?;
        self.broadcast(pack).await
    }

    pub(crate) async fn broadcast(&self, pack: &MsgPack) -> Result<ChannelIds> {
        let cx = opentelemetry::Context::current();
        self.check_producers()?;
        let routed = vec![pack.msgs.clone(); self.producers.len()];
        let span = tracing::info_span!(
            "msgstream.broadcast",
            msgs = pack.msgs.len(),
            channels = self.producers.len()
        );
        self.write(routed, &cx).instrument(span).await
    }

    /// Writes each channel's share as one batch, carrying `cx` (the caller's context, captured
    /// before the first await so a task moving between threads cannot lose it).
    async fn write(
        &self,
        routed: Vec<Vec<TsMsg>>,
        cx: &opentelemetry::Context,
    ) -> Result<ChannelIds> {
        let mut ids = ChannelIds::new();
        for (producer, msgs) in self.producers.iter().zip(routed) {
            if msgs.is_empty() {
                continue;
            }
            let batch: Vec<ProducerMessage> =
                msgs.iter().map(|m| to_producer_message(m, cx)).collect();
            let bytes = batch.iter().map(|m| m.payload.len() as u64).sum();
            let started = std::time::Instant::now();
            let sent = producer.send_batch(batch).await?;
            crate::metrics::get().produced(
                producer.topic(),
                sent.len() as u64,
                bytes,
                started.elapsed(),
            );
            ids.entry(producer.topic().to_string())
                .or_default()
                .extend(sent);
        }
        Ok(ids)
    }

    pub(crate) async fn close(&mut self) {
        for producer in self.producers.drain(..) {
            producer.close().await;
        }
        self.channels.clear();
    }
}

/// Encodes a message, attaches the caller's trace context to its properties, and tells the
/// backend its timestamp (for a time index).
fn to_producer_message(msg: &TsMsg, cx: &opentelemetry::Context) -> ProducerMessage {
    let mut properties = msg.properties.clone();
    trace::inject(cx, &mut properties);
    ProducerMessage {
        payload: msg.encode(),
        properties,
        timestamp: Some(msg.end_ts()),
    }
}

/// Fails for an empty pack where an id map is expected.
fn require_messages(pack: &MsgPack, what: &str) -> Result<()> {
    if pack.msgs.is_empty() {
        Err(Error::InvalidArgument(format!(
            "{what} needs a non-empty pack"
        )))
    } else {
        Ok(())
    }
}

/// The producer half of Milvus's `MsgStream`, as inherent methods of a stream type holding a
/// `producers: Producers` field: the same methods on [`crate::stream::MsgStream`] and
/// [`crate::tt::TtMsgStream`], with nothing for the caller to import and `Send` futures.
///
/// Every produced message carries the caller's OpenTelemetry context in its `traceparent`
/// property. A produce call returns once the backend acknowledged every message of it; on an
/// error, messages of channels written before the failing one stay written.
macro_rules! producing_methods {
    ($stream:ty) => {
        impl $stream {
            /// Adds producers on `channels` (creation retries transient failures); a channel
            /// named twice, or one this stream produces to already, is `InvalidArgument`.
            pub async fn as_producer(&mut self, channels: &[&str]) -> $crate::Result<()> {
                self.producers.add(channels).await
            }

            /// Producer channels, in order; routing indexes into this list.
            pub fn producer_channels(&self) -> &[String] {
                self.producers.channels()
            }

            /// Allows or refuses producing (Milvus's `ForceEnableProduce`): while disabled,
            /// every produce and broadcast is `Error::ProduceDisabled` and writes nothing.
            pub fn enable_produce(&mut self, enabled: bool) {
                self.producers.set_enabled(enabled);
            }

            /// Replaces the default repack rules.
            pub fn set_repack_func(&mut self, repack: $crate::produce::RepackFn) {
                self.producers.set_repack(repack);
            }

            /// Routes each message by its hash keys (Insert and Delete split per row) and
            /// writes each channel's share as one batch. An empty pack writes nothing.
            pub async fn produce(&self, pack: &$crate::msg::MsgPack) -> $crate::Result<()> {
                self.producers.produce(pack).await.map(drop)
            }

            /// Like `produce`, returning the ids written per channel; an empty pack is an
            /// error.
            pub async fn produce_mark(
                &self,
                pack: &$crate::msg::MsgPack,
            ) -> $crate::Result<$crate::produce::ChannelIds> {
                self.producers.produce_mark(pack).await
            }

            /// Writes every message to every producer channel (how timeticks are usually
            /// sent).
            pub async fn broadcast(&self, pack: &$crate::msg::MsgPack) -> $crate::Result<()> {
                self.producers.broadcast(pack).await.map(drop)
            }

            /// Like `broadcast`, returning the ids written per channel; an empty pack is an
            /// error.
            pub async fn broadcast_mark(
                &self,
                pack: &$crate::msg::MsgPack,
            ) -> $crate::Result<$crate::produce::ChannelIds> {
                self.producers.broadcast_mark(pack).await
            }
        }
    };
}
pub(crate) use producing_methods;
