//! One task per subscribed channel that receives, decodes, hands over and acks.
//!
//! Both streams use it: the plain stream points every pump at one shared queue, the tt stream
//! gives each pump its own bounded queue so a channel far ahead is back-pressured. A pump can be
//! *parked* (stopped, consumer handed back) for seek or latest-id calls and restarted; a message
//! it held but had not handed over is kept and delivered first on restart, so parking loses
//! nothing. Each seek bumps the channel's *generation*; queued deliveries of an older generation
//! are discarded by the reader of the queue.
//!
//! Pumps receive in batches (`Consumer::recv_batch`), decode each into [`Batch`]es (the
//! messages as one block, closed where the stream's [`Runs`] says), hand a receive's batches
//! over in one send of the queue ([`super::queue`], bounded in messages all the same), and
//! never ack: each message carries the received message's id as an ack token, and the stream
//! commits tokens once the application has had them ([`super::commit`]). A pump that panics
//! (a user decoder, say) ends its channel with an error instead of going silent; a transient
//! receive error is retried with backoff, a permanent one ends the channel with that error.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::batch::Batch;
use super::commit::AckToken;
use super::queue::Queue;
use super::runs::Runs;
use super::signal::PumpSignal;
use super::spares::Spares;
use super::StreamOptions;
use futures::FutureExt;

use crate::mq::{Acker, Client, Consumer, Message, MessageId, Ordering, Properties};
use crate::msg::{DecoderRegistry, InsertRequest, MsgBody, MsgPosition, SharedStr, TsMsg};
use crate::{trace, Error, Result};

/// First pause after a transient receive error; doubles up to [`MAX_BACKOFF`].
const ERROR_BACKOFF: Duration = Duration::from_millis(100);

/// Longest pause between retries of a failing receive.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Most messages taken from a consumer in one call.
const MAX_BATCH: usize = 256;

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

/// Where to put a channel back if a seek of a later channel fails.
pub(crate) type Rewind = Option<(MessageId, bool)>;

/// A multi-channel seek that failed: the error, and the channels that had moved and were put
/// back to their rewind points (their deliveries restart from there, in a new generation).
pub(crate) struct SeekFailed {
    pub(crate) error: Error,
    pub(crate) restored: Vec<usize>,
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

/// A pump that panicked: its channel ends with this error.
fn panicked(channel: &str, panic: &(dyn std::any::Any + Send)) -> Error {
    let what = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into());
    Error::backend(
        "msgstream",
        format!("the consumer task of channel {channel:?} panicked: {what}"),
    )
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
            channel_name: SharedStr::interned(parked.consumer.topic()),
            group: SharedStr::interned(parked.consumer.subscription()),
            registry,
            batch: self.batch,
            tx: slot.tx.clone(),
            signal: slot.signal.clone(),
            spares: slot.spares.clone(),
        };
        let name = slot.channel.clone();
        let tx = slot.tx.clone();
        let signal = slot.signal.clone();
        let generation = slot.generation;
        let handle = tokio::spawn(async move {
            let mut stopped = stopped;
            let outcome = std::panic::AssertUnwindSafe(run(*parked, ctx, &mut stopped))
                .catch_unwind()
                .await;
            match outcome {
                Ok(parked) => Some(parked),
                Err(panic) => {
                    let error = panicked(&name, panic.as_ref());
                    tracing::error!(channel = %name, %error, "consumer task panicked");
                    signal.set_ended();
                    let ending = Batch::failure(index, generation, error, None, true);
                    hand_over_ending(&tx, ending, &mut stopped).await;
                    None
                }
            }
        });
        slot.state = SlotState::Running { stop, handle };
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

    /// Seeks every target (channel index, id, inclusive) in turn, so that a failure changes nothing: when one channel's seek
    /// fails, the channels moved before it are sought back to the point `rewind` names for
    /// each (given the first id its pump had received since it last moved), and so is the
    /// failing channel itself if its consumer says it moved before failing
    /// ([`Error::SeekMoved`]). Checks that can fail before anything moves belong to the
    /// caller; this covers a backend call failing midway. If a channel cannot be put back,
    /// the error says which and why.
    pub(crate) async fn seek_all(
        &mut self,
        targets: &[(usize, MessageId, bool)],
        mut rewind: impl FnMut(usize, Option<MessageId>) -> Rewind,
    ) -> std::result::Result<(), SeekFailed> {
        let mut moved: Vec<(usize, Rewind)> = Vec::with_capacity(targets.len());
        for (index, id, inclusive) in targets {
            let error = match self.seek(*index, id, *inclusive).await {
                Ok((first, Ok(()))) => {
                    moved.push((*index, rewind(*index, first)));
                    continue;
                }
                Ok((first, Err(Error::SeekMoved { source, .. }))) => {
                    moved.push((*index, rewind(*index, first)));
                    *source
                }
                Ok((_, Err(error))) | Err(error) => error,
            };
            let mut restored = Vec::with_capacity(moved.len());
            let mut stuck = Vec::new();
            for (back_index, back) in moved {
                let channel = self
                    .slots
                    .get(back_index)
                    .map(|s| s.channel.clone())
                    .unwrap_or_default();
                let outcome = match back {
                    Some((back_id, back_inclusive)) => {
                        match self.seek(back_index, &back_id, back_inclusive).await {
                            Ok((_, outcome)) => outcome,
                            Err(e) => Err(e),
                        }
                    }
                    None => Err(Error::InvalidArgument(
                        "nothing was received from it since it last moved".into(),
                    )),
                };
                match outcome {
                    Ok(()) => restored.push(back_index),
                    Err(e) => stuck.push(format!("{channel:?} ({e})")),
                }
            }
            let error = if stuck.is_empty() {
                error
            } else {
                Error::backend(
                    "msgstream",
                    format!(
                        "seek failed ({error}), and channels moved before the failure could not be put back, so they now read from their seek targets: {}",
                        stuck.join(", ")
                    ),
                )
            };
            return Err(SeekFailed { error, restored });
        }
        Ok(())
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

struct PumpContext<R: Runs> {
    channel: usize,
    generation: u64,
    /// The channel and the subscription, named by the position of every message delivered;
    /// interned, so that each position's copies touch no shared reference count.
    channel_name: SharedStr,
    group: SharedStr,
    registry: Arc<DecoderRegistry>,
    batch: usize,
    tx: Queue<R::Summary>,
    signal: Arc<PumpSignal>,
    spares: Arc<Spares>,
}

impl<R: Runs> PumpContext<R> {
    /// Decodes a message onto the end of the batch being built (`run`); `Err` with the decode
    /// error (naming the channel and id) if it does not decode.
    ///
    /// An insert (most of a data channel) is decoded in its place at the end of the batch's
    /// block: the large message is written there once, not built aside and copied in (the
    /// fast decoder fills a default request field by field). Any other message, or an insert
    /// the fast decoder leaves to prost, goes through the registry's general decoder.
    #[inline]
    fn decode_into(&self, msg: &mut Message, run: &mut Batch<R::Summary>) -> Result<()> {
        if self.registry.may_be_insert(&msg.payload) {
            run.msgs
                .push_back(self.placed(msg, MsgBody::Insert(InsertRequest::default())));
            let payload = std::mem::take(&mut msg.payload);
            let decoded = match run.msgs.back_mut() {
                Some(TsMsg {
                    body: MsgBody::Insert(insert),
                    ..
                }) => self.registry.decode_insert_in_place(payload, insert),
                _ => Err(payload),
            };
            match decoded {
                Ok(()) => {
                    self.finish_last(msg, run);
                    return Ok(());
                }
                Err(payload) => {
                    run.msgs.pop_back();
                    msg.payload = payload;
                }
            }
        }
        match self.registry.decode_bytes(std::mem::take(&mut msg.payload)) {
            Ok(body) => {
                run.msgs.push_back(self.placed(msg, body));
                self.finish_last(msg, run);
                Ok(())
            }
            Err(error) => {
                tracing::warn!(channel = %msg.topic, id = ?msg.id, %error, "undecodable message");
                Err(match error {
                    Error::Decode(reason) => Error::Decode(format!(
                        "message {:?} on channel {:?}: {reason}",
                        msg.id, msg.topic
                    )),
                    other => other,
                })
            }
        }
    }

    /// The message `msg` becomes, decoded into `body`, before [`Self::finish_last`] stamps its
    /// position and gives it its properties.
    #[inline(always)]
    fn placed(&self, msg: &Message, body: MsgBody) -> TsMsg {
        TsMsg {
            body,
            hash_keys: Vec::new(),
            // No allocation and no shared count: the names are interned (the consumer's
            // channel and subscription), the id's bytes are inline.
            position: Some(MsgPosition {
                channel_name: self.channel_name.clone(),
                msg_id: msg.id.clone(),
                msg_group: self.group.clone(),
                ..MsgPosition::default()
            }),
            properties: Properties::new(),
        }
    }

    /// Completes the message just decoded at the end of `run` from `msg`: its position's
    /// timestamp, its properties, and its `end_ts` and ack token beside it.
    #[inline(always)]
    fn finish_last(&self, msg: &mut Message, run: &mut Batch<R::Summary>) {
        let Some(last) = run.msgs.back_mut() else {
            return;
        };
        trace::record_consume(&msg.properties, &msg.topic);
        // Milvus stamps a consumed message's position with its BeginTs; the tt stream restamps
        // the positions of its packs with their end_ts.
        let (begin_ts, end_ts) = (last.body.begin_ts(), last.body.end_ts());
        if let Some(position) = last.position.as_mut() {
            position.timestamp = begin_ts;
        }
        if let Some(summary) = run.summary.as_mut() {
            R::note(summary, last, end_ts);
        }
        // Swapped, not assigned: the message's empty map is dropped once, with the message.
        std::mem::swap(&mut last.properties, &mut msg.properties);
        run.ends.push_back(end_ts);
        // Passed as the tt stream takes it (a stream handing messages over one by one says
        // otherwise when it records the token).
        run.tokens.push_back(AckToken::of(msg, last.is_time_tick()));
    }

    /// Turns a received batch into pending batches (an empty batch means closed). Returns the
    /// transient error to back off from, if the receive failed that way.
    fn receive(&self, parked: &mut Parked<R>, received: Result<Vec<Message>>) -> Option<Error> {
        let (channel, generation) = (self.channel, self.generation);
        match received {
            Ok(batch) if batch.is_empty() => {
                self.signal.set_ended();
                parked.pending.push_back(Batch::closed(channel, generation));
                None
            }
            Ok(mut batch) => {
                if parked.first_received.is_none() {
                    parked.first_received = batch.first().map(|m| m.id.clone());
                }
                // Once per batch: a recording allocates its attributes even with no meter
                // provider installed.
                if let Some(first) = batch.first() {
                    let bytes = batch.iter().map(|m| m.payload.len() as u64).sum();
                    crate::metrics::get().consumed(&first.topic, batch.len() as u64, bytes);
                }
                let mut left = batch.len();
                let runs = &mut parked.runs;
                runs.receive_starts();
                let mut run = self
                    .spares
                    .batch(channel, generation, runs.room(left), runs.whole());
                // By reference: each message is decoded where it lies, not moved out first.
                for msg in &mut batch {
                    left -= 1;
                    let span = tracing::debug_span!("msgstream.consume", channel = %msg.topic, id = ?msg.id);
                    let _entered = span.enter();
                    match self.decode_into(msg, &mut run) {
                        Ok(()) if !run.ends_with_tick() => continue,
                        Ok(()) => {
                            run.ticks += 1;
                            if !runs.closes_at_tick(run.msgs.len()) {
                                continue;
                            }
                        }
                        Err(error) => run.failure = Some((error, Some(AckToken::of(msg, true)))),
                    }
                    let next =
                        self.spares
                            .batch(channel, generation, runs.room(left), runs.whole());
                    parked.pending.push_back(std::mem::replace(&mut run, next));
                }
                if run.len() > 0 {
                    runs.receive_ends(run.failure.is_none() && !run.ends_with_tick());
                    parked.pending.push_back(run);
                }
                None
            }
            Err(error) if error.is_permanent() => {
                self.signal.set_ended();
                parked
                    .pending
                    .push_back(Batch::failure(channel, generation, error, None, true));
                None
            }
            Err(error) => Some(error),
        }
    }
}

/// Queues the batch that ends a channel, as room comes (in parts if the queue is smaller than
/// it), until it is all queued, the reader is gone, or the pump is stopped: a stream that
/// closes or seeks stops reading, and must not wait for room it will never give.
async fn hand_over_ending<S: Default>(
    tx: &Queue<S>,
    ending: Batch<S>,
    stop: &mut oneshot::Receiver<()>,
) {
    let mut pending = VecDeque::from([ending]);
    while !pending.is_empty() {
        tokio::select! {
            biased;
            _ = &mut *stop => return,
            sent = tx.send(&mut pending) => if sent.is_err() { return },
        }
    }
}

/// Deliveries in `pending`, all runs together.
fn pending_len<S>(pending: &VecDeque<Batch<S>>) -> usize {
    pending.iter().map(Batch::len).sum()
}

async fn run<R: Runs>(
    mut parked: Parked<R>,
    ctx: PumpContext<R>,
    stop: &mut oneshot::Receiver<()>,
) -> Parked<R> {
    let mut backoff = ERROR_BACKOFF;
    loop {
        if parked.pending.is_empty() {
            // Receive no more than the queue has room for (but at least one, to wait on): a
            // batch that fits is handed over whole, not split into what fits and a rest.
            let want = ctx.batch.min(ctx.tx.room()).max(1);
            let received = tokio::select! {
                biased;
                _ = &mut *stop => return parked,
                received = parked.consumer.recv_batch(want) => received,
            };
            let backoff_from = ctx.receive(&mut parked, received);
            ctx.signal.set_pending(pending_len(&parked.pending));
            match backoff_from {
                None => backoff = ERROR_BACKOFF,
                Some(error) => {
                    tracing::warn!(channel = %parked.consumer.topic(), %error, ?backoff, "receive failed, retrying");
                    crate::metrics::get().retried("receive");
                    tokio::select! {
                        _ = &mut *stop => return parked,
                        _ = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
            continue;
        }
        let sent = tokio::select! {
            biased;
            _ = &mut *stop => return parked,
            sent = ctx.tx.send(&mut parked.pending) => sent,
        };
        let Ok(sent) = sent else { return parked };
        ctx.signal.set_pending(pending_len(&parked.pending));
        if sent.ticks > 0 {
            ctx.signal.add_ticks_queued(sent.ticks);
        }
        if sent.closed {
            let _ = (&mut *stop).await;
            return parked;
        }
    }
}

#[cfg(test)]
#[path = "pump_tests.rs"]
mod tests;
