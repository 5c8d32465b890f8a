//! One task per subscribed channel that receives, decodes, hands over and acks.
//!
//! Both streams use it: the plain stream points every pump at one shared queue, the tt stream
//! gives each pump its own bounded queue so a channel far ahead is back-pressured. A pump can be
//! *parked* (stopped, consumer handed back) for seek or latest-id calls and restarted; a message
//! it held but had not handed over is kept and delivered first on restart, so parking loses
//! nothing. Each seek bumps the channel's *generation*; queued deliveries of an older generation
//! are discarded by the reader of the queue.
//!
//! Pumps receive in batches (`Consumer::recv_batch`). Ack policy: a message is acked once it is
//! in the queue for the application — on strictly ordered backends, whose acks are cumulative,
//! once per batch (the last message handed over), elsewhere one by one. Recovery after a crash
//! is by stored positions (`seek`), as in Milvus, not by redelivery.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::StreamOptions;
use crate::mq::{Client, Consumer, Message, MessageId, Ordering};
use crate::msg::{DecoderRegistry, MsgPosition, TsMsg};
use crate::{trace, Error, Result};

/// Pause after a receive error, so a broken consumer does not spin.
const ERROR_BACKOFF: Duration = Duration::from_millis(100);

/// Most messages taken from a consumer in one call.
const MAX_BATCH: usize = 256;

/// What a pump hands over. Messages move by value through the bounded queue (its slots are
/// allocated once); boxing them would add an allocation per message.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub(crate) enum Event {
    /// A decoded message, with its position.
    Msg(TsMsg),
    /// The consumer reported an error; the pump goes on.
    Failed(Error),
    /// The consumer was closed; nothing more will come.
    Closed,
}

/// An event tagged with its channel index and that channel's generation.
#[derive(Debug)]
pub(crate) struct Delivered {
    pub(crate) channel: usize,
    pub(crate) generation: u64,
    pub(crate) event: Event,
}

/// A received message (or an event) on its way; `ack` is the message to ack once it is handed
/// over.
struct Pending {
    delivered: Delivered,
    ack: Option<Message>,
}

struct Parked {
    consumer: Box<dyn Consumer>,
    pending: VecDeque<Pending>,
    /// Last message handed over but not yet acked (cumulative acks only).
    unacked: Option<Message>,
}

enum SlotState {
    Running {
        stop: oneshot::Sender<()>,
        handle: JoinHandle<Parked>,
    },
    Parked(Box<Parked>),
    Gone,
}

struct Slot {
    channel: String,
    generation: u64,
    tx: mpsc::Sender<Delivered>,
    state: SlotState,
}

/// The pumps of one stream, one per channel, in subscription order.
pub(crate) struct Pumps {
    registry: Arc<DecoderRegistry>,
    cumulative_acks: bool,
    batch: usize,
    slots: Vec<Slot>,
}

impl Pumps {
    /// Pumps for consumers of `client`, decoding with the options' registry and receiving at
    /// most `buffer` messages at a time; acks are cumulative when the backend is strictly ordered.
    pub(crate) fn new(client: &dyn Client, options: &StreamOptions) -> Self {
        Pumps {
            registry: options.registry.clone(),
            cumulative_acks: client.capabilities().ordering == Ordering::Strict,
            batch: options.buffer.clamp(1, MAX_BATCH),
            slots: Vec::new(),
        }
    }

    /// Starts a pump for `consumer`, delivering into `tx`; returns its channel index.
    pub(crate) fn add(
        &mut self,
        consumer: Box<dyn Consumer>,
        tx: mpsc::Sender<Delivered>,
    ) -> usize {
        let index = self.slots.len();
        self.slots.push(Slot {
            channel: consumer.topic().to_string(),
            generation: 0,
            tx,
            state: SlotState::Parked(Box::new(Parked {
                consumer,
                pending: VecDeque::new(),
                unacked: None,
            })),
        });
        self.start(index);
        index
    }

    pub(crate) fn index_of(&self, channel: &str) -> Result<usize> {
        self.slots
            .iter()
            .position(|s| s.channel == channel)
            .ok_or_else(|| Error::NotSubscribed {
                channel: channel.to_string(),
            })
    }

    /// Whether `delivered` belongs to the current generation of its channel.
    pub(crate) fn is_current(&self, delivered: &Delivered) -> bool {
        self.slots
            .get(delivered.channel)
            .is_some_and(|s| s.generation == delivered.generation)
    }

    fn start(&mut self, index: usize) {
        let registry = self.registry.clone();
        let Some(slot) = self.slots.get_mut(index) else {
            return;
        };
        let SlotState::Parked(parked) = std::mem::replace(&mut slot.state, SlotState::Gone) else {
            return;
        };
        let (stop, stopped) = oneshot::channel();
        let ctx = PumpContext {
            channel: index,
            generation: slot.generation,
            registry,
            cumulative_acks: self.cumulative_acks,
            batch: self.batch,
            tx: slot.tx.clone(),
        };
        let handle = tokio::spawn(run(*parked, ctx, stopped));
        slot.state = SlotState::Running { stop, handle };
    }

    async fn park(&mut self, index: usize) -> Result<&mut Parked> {
        let slot = self
            .slots
            .get_mut(index)
            .ok_or_else(|| Error::InvalidArgument(format!("channel index {index} out of range")))?;
        slot.state = match std::mem::replace(&mut slot.state, SlotState::Gone) {
            SlotState::Running { stop, handle } => {
                let _ = stop.send(());
                match handle.await {
                    Ok(parked) => SlotState::Parked(Box::new(parked)),
                    Err(e) => {
                        return Err(Error::backend(
                            "msgstream",
                            format!("consumer task of {:?} failed: {e}", slot.channel),
                        ))
                    }
                }
            }
            other => other,
        };
        match &mut slot.state {
            SlotState::Parked(parked) => Ok(parked),
            _ => Err(Error::Closed("channel consumer")),
        }
    }

    /// Seeks one channel's consumer and restarts it; deliveries queued before are discarded.
    pub(crate) async fn seek(
        &mut self,
        index: usize,
        id: &MessageId,
        inclusive: bool,
    ) -> Result<()> {
        let parked = self.park(index).await?;
        parked.pending.clear();
        parked.unacked = None;
        let result = parked.consumer.seek(id, inclusive).await;
        if let Some(slot) = self.slots.get_mut(index) {
            slot.generation += 1;
        }
        self.start(index);
        result
    }

    /// The newest id of one channel, asked of its consumer.
    pub(crate) async fn latest_message_id(&mut self, index: usize) -> Result<Option<MessageId>> {
        let parked = self.park(index).await?;
        let result = parked.consumer.latest_message_id().await;
        self.start(index);
        result
    }

    /// Stops every pump and closes every consumer.
    pub(crate) async fn close(&mut self) {
        for index in 0..self.slots.len() {
            if let Ok(parked) = self.park(index).await {
                parked.consumer.close().await;
            }
            if let Some(slot) = self.slots.get_mut(index) {
                slot.state = SlotState::Gone;
            }
        }
    }
}

struct PumpContext {
    channel: usize,
    generation: u64,
    registry: Arc<DecoderRegistry>,
    cumulative_acks: bool,
    batch: usize,
    tx: mpsc::Sender<Delivered>,
}

impl PumpContext {
    fn delivered(&self, event: Event) -> Delivered {
        Delivered {
            channel: self.channel,
            generation: self.generation,
            event,
        }
    }

    /// Decodes a message. Garbage becomes an `Error::Decode` naming the message, which the
    /// application receives in its place (the message is acked; the stream goes on).
    fn decode(&self, consumer: &dyn Consumer, msg: &Message) -> Event {
        match self.registry.decode(&msg.payload) {
            Ok(body) => {
                trace::record_consume(&msg.properties, &msg.topic);
                let mut ts = TsMsg::new(body);
                ts.position = Some(MsgPosition {
                    channel_name: msg.topic.to_string(),
                    msg_id: msg.id.as_bytes().to_vec(),
                    msg_group: consumer.subscription().to_string(),
                    timestamp: ts.end_ts(),
                    ..MsgPosition::default()
                });
                ts.properties = msg.properties.clone();
                Event::Msg(ts)
            }
            Err(error) => {
                tracing::warn!(channel = %msg.topic, id = ?msg.id, %error, "undecodable message");
                Event::Failed(match error {
                    Error::Decode(reason) => Error::Decode(format!(
                        "message {:?} on channel {:?}: {reason}",
                        msg.id, msg.topic
                    )),
                    other => other,
                })
            }
        }
    }
}

impl PumpContext {
    /// Turns a received batch into pending deliveries (an empty batch means closed).
    fn receive(&self, parked: &mut Parked, received: Result<Vec<Message>>) {
        match received {
            Ok(batch) if batch.is_empty() => parked.pending.push_back(Pending {
                delivered: self.delivered(Event::Closed),
                ack: None,
            }),
            Ok(batch) => {
                for msg in batch {
                    let span = tracing::debug_span!("msgstream.consume", channel = %msg.topic, id = ?msg.id);
                    let _entered = span.enter();
                    let delivered = self.delivered(self.decode(parked.consumer.as_ref(), &msg));
                    parked.pending.push_back(Pending {
                        delivered,
                        ack: Some(msg),
                    });
                }
            }
            Err(error) => parked.pending.push_back(Pending {
                delivered: self.delivered(Event::Failed(error)),
                ack: None,
            }),
        }
    }

    /// Acks a message handed over: at once, or deferred to the end of the batch
    /// when acks are cumulative.
    async fn acked(&self, parked: &mut Parked, msg: Option<Message>) {
        let Some(msg) = msg else { return };
        if self.cumulative_acks {
            parked.unacked = Some(msg);
        } else {
            ack(parked.consumer.as_ref(), &msg).await;
        }
    }
}

/// Acks the last message handed over, if a cumulative ack is outstanding.
async fn flush_ack(parked: &mut Parked) {
    if let Some(msg) = parked.unacked.take() {
        ack(parked.consumer.as_ref(), &msg).await;
    }
}

async fn run(mut parked: Parked, ctx: PumpContext, mut stop: oneshot::Receiver<()>) -> Parked {
    loop {
        if parked.pending.is_empty() {
            flush_ack(&mut parked).await;
            let received = tokio::select! {
                biased;
                _ = &mut stop => return parked,
                received = parked.consumer.recv_batch(ctx.batch) => received,
            };
            ctx.receive(&mut parked, received);
            continue;
        }
        tokio::select! {
            biased;
            _ = &mut stop => {
                flush_ack(&mut parked).await;
                return parked;
            }
            permit = ctx.tx.reserve() => {
                let Ok(permit) = permit else { return parked };
                let Some(Pending { delivered, ack }) = parked.pending.pop_front() else {
                    continue;
                };
                let terminal = matches!(delivered.event, Event::Closed);
                // A consumer error (no message) backs off; an undecodable message does not.
                let failed = ack.is_none() && matches!(delivered.event, Event::Failed(_));
                permit.send(delivered);
                ctx.acked(&mut parked, ack).await;
                if terminal {
                    flush_ack(&mut parked).await;
                    let _ = stop.await;
                    return parked;
                }
                if failed {
                    tokio::select! {
                        _ = &mut stop => return parked,
                        _ = tokio::time::sleep(ERROR_BACKOFF) => {}
                    }
                }
            }
        }
    }
}

async fn ack(consumer: &dyn Consumer, msg: &Message) {
    if let Err(error) = consumer.ack(msg).await {
        tracing::warn!(channel = %msg.topic, id = ?msg.id, %error, "ack failed");
    }
}
