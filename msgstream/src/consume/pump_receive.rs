//! What a pump does with one receive: decodes each message onto the end of the batch being
//! built, and closes batches where the stream's [`Runs`] says (at a timetick it asks for, and
//! after a message that does not decode, which travels as the batch's failure in its place).
//!
//! Pure work on memory, no waiting: the pump's task ([`super::task`]) receives and hands over;
//! this turns a receive's messages into the pending batches it hands over next.

use std::sync::Arc;

use super::Parked;
use crate::consume::batch::Batch;
use crate::consume::commit::AckToken;
use crate::consume::queue::Queue;
use crate::consume::runs::Runs;
use crate::consume::signal::PumpSignal;
use crate::consume::spares::Spares;

use crate::mq::Message;
use crate::msg::{DecoderRegistry, MsgPosition, SharedStr, TsMsg};
use crate::{trace, Error, Result};

/// What a pump's task works with: where its deliveries go, and how it decodes and stamps them.
pub(super) struct PumpContext<R: Runs> {
    pub(super) channel: usize,
    pub(super) generation: u64,
    /// The channel and the subscription, named by the position of every message delivered;
    /// interned, so that each position's copies touch no shared reference count.
    pub(super) channel_name: SharedStr,
    pub(super) group: SharedStr,
    pub(super) registry: Arc<DecoderRegistry>,
    /// Most messages taken from the consumer in one call.
    pub(super) batch: usize,
    pub(super) tx: Queue<R::Summary>,
    pub(super) signal: Arc<PumpSignal>,
    pub(super) spares: Arc<Spares>,
}

impl<R: Runs> PumpContext<R> {
    /// Decodes a message onto the end of the batch being built (`run`); `Err` with the decode
    /// error (naming the channel and id) if it does not decode.
    ///
    /// An insert (most of a data channel) is checked, not decoded: the message keeps its
    /// payload and decodes the body when the application first reads it (see
    /// `ReceivedInsert`). Any other message, or an insert the check leaves to prost, goes
    /// through the registry's general decoder.
    #[inline]
    fn decode_into(&self, msg: &mut Message, run: &mut Batch<R::Summary>) -> Result<()> {
        let payload = std::mem::take(&mut msg.payload);
        let decoded = match self.registry.check_received_insert(payload) {
            Ok(insert) => TsMsg::received(insert),
            Err(payload) => match self.registry.decode_bytes(payload) {
                Ok(body) => TsMsg::new(body),
                Err(error) => {
                    tracing::warn!(channel = %msg.topic, id = ?msg.id, %error, "undecodable message");
                    return Err(match error {
                        Error::Decode(reason) => Error::Decode(format!(
                            "message {:?} on channel {:?}: {reason}",
                            msg.id, msg.topic
                        )),
                        other => other,
                    });
                }
            },
        };
        run.msgs.push_back(self.placed(msg, decoded));
        self.finish_last(msg, run);
        Ok(())
    }

    /// `decoded` as received in `msg`, before [`Self::finish_last`] stamps its position's
    /// timestamp and gives it its properties.
    #[inline(always)]
    fn placed(&self, msg: &Message, mut decoded: TsMsg) -> TsMsg {
        // No allocation and no shared count: the names are interned (the consumer's channel
        // and subscription), the id's bytes are inline.
        decoded.position = Some(MsgPosition {
            channel_name: self.channel_name.clone(),
            msg_id: msg.id.clone(),
            msg_group: self.group.clone(),
            ..MsgPosition::default()
        });
        decoded
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
        let (begin_ts, end_ts) = (last.begin_ts(), last.end_ts());
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
    pub(super) fn receive(
        &self,
        parked: &mut Parked<R>,
        received: Result<Vec<Message>>,
    ) -> Option<Error> {
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
