//! The pumps of a stream: one task per subscribed channel that receives, decodes and hands
//! over, and the calls that stop one for a while (seek, latest id, close).
//!
//! Both streams use them: the plain stream points every pump at one shared queue, the tt stream
//! gives each pump its own bounded queue so a channel far ahead is back-pressured. A pump can be
//! *parked* (stopped, consumer handed back) for seek or latest-id calls and restarted; a message
//! it held but had not handed over is kept and delivered first on restart, so parking loses
//! nothing. Each seek bumps the channel's *generation*; queued deliveries of an older generation
//! are discarded by the reader of the queue.
//!
//! Pumps receive in batches (`Consumer::recv_batch`), decode each into [`Batch`]es (the
//! messages as one block, closed where the stream's [`Runs`] says: [`receive`]), hand a
//! receive's batches over in one send of the queue ([`super::queue`], bounded in messages all
//! the same: [`task`]), and never ack: each message carries the received message's id as an ack
//! token, and the stream commits tokens once the application has had them
//! ([`super::commit`]). Seeking several channels as one is in [`seek`].

use std::collections::VecDeque;
use std::sync::Arc;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::batch::Batch;
use super::queue::Queue;
use super::runs::Runs;
use super::signal::PumpSignal;
use super::spares::Spares;
use super::StreamOptions;
use crate::mq::{Acker, Client, Consumer, MessageId, Ordering};
use crate::msg::{DecoderRegistry, SharedStr};
use crate::{Error, Result};

#[path = "pump_receive.rs"]
mod receive;
#[path = "pump_seek.rs"]
mod seek;
#[path = "pump_task.rs"]
mod task;

use receive::PumpContext;

/// Most messages taken from a consumer in one call.
const MAX_BATCH: usize = 256;

/// A pump that is not running: its consumer, and what it received but has not handed over.
struct Parked<R: Runs> {
    consumer: Box<dyn Consumer>,
    /// Received and decoded, not yet queued, in order.
    pending: VecDeque<Batch<R::Summary>>,
    /// The first message received since the consumer started or last moved: where to put it
    /// back when nothing of this generation reached the application yet.
    first_received: Option<MessageId>,
    /// How the stream wants this channel's receives cut, with what it remembers between them.
    runs: R,
}

enum SlotState<R: Runs> {
    Running {
        stop: oneshot::Sender<()>,
        handle: JoinHandle<Option<Parked<R>>>,
    },
    Parked(Box<Parked<R>>),
    Gone,
}

struct Slot<R: Runs> {
    channel: String,
    generation: u64,
    tx: Queue<R::Summary>,
    state: SlotState<R>,
    signal: Arc<PumpSignal>,
    spares: Arc<Spares>,
}

/// The pumps of one stream, one per channel, in subscription order, cutting their receives
/// as `R` says.
pub(crate) struct Pumps<R: Runs> {
    registry: Arc<DecoderRegistry>,
    cumulative_acks: bool,
    batch: usize,
    /// Room of each channel's spares, in messages: what a stream's queue holds.
    spare_room: usize,
    slots: Vec<Slot<R>>,
}

impl<R: Runs> Pumps<R> {
    /// Pumps for consumers of `client`, decoding with the options' registry and receiving at
    /// most `buffer` messages at a time.
    pub(crate) fn new(client: &dyn Client, options: &StreamOptions) -> Self {
        Pumps {
            registry: options.registry.clone(),
            cumulative_acks: client.capabilities().ordering == Ordering::Strict,
            batch: options.buffer.clamp(1, MAX_BATCH),
            spare_room: options.buffer.max(1),
            slots: Vec::new(),
        }
    }

    /// Whether the backend's acks are cumulative (strictly ordered channels).
    pub(crate) fn cumulative_acks(&self) -> bool {
        self.cumulative_acks
    }

    /// Whether `channel` is consumed already.
    pub(crate) fn contains(&self, channel: &str) -> bool {
        self.slots.iter().any(|s| s.channel == channel)
    }

    /// Starts a pump for `consumer`, delivering into `tx`; returns its channel index and the
    /// acker that commits its deliveries.
    pub(crate) fn add(
        &mut self,
        consumer: Box<dyn Consumer>,
        tx: Queue<R::Summary>,
    ) -> (usize, Arc<dyn Acker>) {
        let index = self.slots.len();
        let acker = consumer.acker();
        self.slots.push(Slot {
            channel: consumer.topic().to_string(),
            generation: 0,
            tx,
            state: SlotState::Parked(Box::new(Parked {
                consumer,
                pending: VecDeque::new(),
                first_received: None,
                runs: R::default(),
            })),
            signal: Arc::new(PumpSignal::default()),
            spares: Arc::new(Spares::new(self.spare_room)),
        });
        self.start(index);
        (index, acker)
    }

    /// The consumed channels, by index.
    pub(crate) fn channels(&self) -> impl Iterator<Item = &str> {
        self.slots.iter().map(|s| s.channel.as_str())
    }

    pub(crate) fn index_of(&self, channel: &str) -> Result<usize> {
        self.slots
            .iter()
            .position(|s| s.channel == channel)
            .ok_or_else(|| Error::NotSubscribed {
                channel: channel.to_string(),
            })
    }

    /// What the pump of channel `index` publishes (ticks queued, messages held).
    pub(crate) fn signal(&self, index: usize) -> Option<&Arc<PumpSignal>> {
        self.slots.get(index).map(|s| &s.signal)
    }

    /// Where the stream hands back the emptied vectors of channel `index`'s batches.
    pub(crate) fn spares(&self, index: usize) -> Option<&Arc<Spares>> {
        self.slots.get(index).map(|s| &s.spares)
    }

    /// Received messages held by the pumps before their queues, all channels together.
    pub(crate) fn pending(&self) -> usize {
        self.slots.iter().map(|s| s.signal.pending()).sum()
    }

    /// Whether `batch` belongs to the current generation of its channel.
    pub(crate) fn is_current(&self, batch: &Batch<R::Summary>) -> bool {
        self.is_current_in(batch.channel, batch.generation)
    }

    /// Whether `generation` is the current generation of channel `index`.
    pub(crate) fn is_current_in(&self, index: usize, generation: u64) -> bool {
        self.slots
            .get(index)
            .is_some_and(|s| s.generation == generation)
    }

    /// Starts the pump of channel `index` again, if it is parked.
    fn start(&mut self, index: usize) {
        let (registry, batch) = (self.registry.clone(), self.batch);
        let Some(slot) = self.slots.get_mut(index) else {
            return;
        };
        let SlotState::Parked(parked) = std::mem::replace(&mut slot.state, SlotState::Gone) else {
            return;
        };
        let ctx = PumpContext {
            channel: index,
            generation: slot.generation,
            channel_name: SharedStr::interned(parked.consumer.topic()),
            group: SharedStr::interned(parked.consumer.subscription()),
            registry,
            batch,
            tx: slot.tx.clone(),
            signal: slot.signal.clone(),
            spares: slot.spares.clone(),
        };
        slot.state = task::spawn(*parked, ctx, slot.channel.clone());
    }

    async fn park(&mut self, index: usize) -> Result<&mut Parked<R>> {
        let slot = self
            .slots
            .get_mut(index)
            .ok_or_else(|| Error::InvalidArgument(format!("channel index {index} out of range")))?;
        slot.state = match std::mem::replace(&mut slot.state, SlotState::Gone) {
            SlotState::Running { stop, handle } => {
                let _ = stop.send(());
                match handle.await {
                    Ok(Some(parked)) => SlotState::Parked(Box::new(parked)),
                    Ok(None) => {
                        return Err(Error::backend(
                            "msgstream",
                            format!("the consumer task of {:?} panicked earlier", slot.channel),
                        ))
                    }
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

    /// Seeks one channel's consumer and restarts it. Once the consumer moved, deliveries
    /// queued before are discarded (a new generation) and the first id the old generation
    /// received is returned with the outcome: `Ok`, or the consumer's
    /// [`Error::SeekMoved`] (it failed, but after moving). On any other failure nothing
    /// changes: the pump goes on where it was, with everything it held.
    pub(crate) async fn seek(
        &mut self,
        index: usize,
        id: &MessageId,
        inclusive: bool,
    ) -> std::result::Result<(Option<MessageId>, Result<()>), Error> {
        let parked = self.park(index).await?;
        let result = parked.consumer.seek(id, inclusive).await;
        let moved = match result {
            Ok(()) => Some(Ok(())),
            Err(error @ Error::SeekMoved { .. }) => Some(Err(error)),
            Err(error) => {
                self.start(index);
                return Err(error);
            }
        };
        parked.pending.clear();
        parked.runs.reset();
        let first = parked.first_received.take();
        if let Some(slot) = self.slots.get_mut(index) {
            slot.generation += 1;
            slot.signal.clear_ended();
        }
        self.start(index);
        Ok((first, moved.unwrap_or(Ok(()))))
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

#[cfg(test)]
#[path = "pump_tests.rs"]
mod tests;
