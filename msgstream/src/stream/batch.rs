//! [`Batch`]: what a pump hands its stream in one piece, a run of one channel's deliveries.
//!
//! The messages of a run travel as one block (`Vec<TsMsg>`) with their metadata in vectors
//! beside them, not as a vector of per-message records: a `TsMsg` is about 520 bytes, and
//! every move of one is a copy of that size. So the tt stream hands a channel's run to its
//! aligner by moving the vector (no copy at all when the aligner holds nothing of that channel
//! yet), and checks the run's end timestamps in a tight loop over `u64`s.
//!
//! A pump closes a batch after a timetick (so a tick is only ever a batch's last message),
//! at an undecodable message or a failure, and at the channel's end. The tt stream, which
//! reads a channel exactly up to its first tick above the watermark, can then take every
//! message of a batch before its last without looking at them one by one.

use super::commit::AckToken;
use crate::msg::TsMsg;
use crate::Error;

/// A run of one channel's deliveries, in order: `msgs`, then `failure`, then `closed`.
#[derive(Debug)]
pub(crate) struct Batch {
    /// The channel's index in subscription order.
    pub(crate) channel: usize,
    /// The channel's generation when the pump received it (a seek starts a new one; the
    /// stream discards batches of older generations).
    pub(crate) generation: u64,
    /// Decoded messages, in arrival order; only the last may be a timetick.
    pub(crate) msgs: Vec<TsMsg>,
    /// Each message's `end_ts`, worked out by the pump right after decoding it (its row
    /// timestamps are in that thread's cache then), for the tt stream's aligner.
    pub(crate) ends: Vec<u64>,
    /// Each message's ack token: the received message behind it, to be committed once the
    /// application has had it.
    pub(crate) tokens: Vec<AckToken>,
    /// After the messages: a message that does not decode (with its token, so it is
    /// committed like any other), or a failure that ended the channel (no token; `closed`
    /// then follows).
    pub(crate) failure: Option<(Error, Option<AckToken>)>,
    /// Whether the channel ends after this batch: nothing more will come.
    pub(crate) closed: bool,
}

impl Batch {
    /// An empty batch of `channel` in `generation`, with room for `capacity` messages.
    pub(crate) fn new(channel: usize, generation: u64, capacity: usize) -> Self {
        Batch {
            channel,
            generation,
            msgs: Vec::with_capacity(capacity),
            ends: Vec::with_capacity(capacity),
            tokens: Vec::with_capacity(capacity),
            failure: None,
            closed: false,
        }
    }

    /// A batch holding only a failure of `channel` (with the token of the message behind it,
    /// if any), and the channel's end if `closed`.
    pub(crate) fn failure(
        channel: usize,
        generation: u64,
        error: Error,
        token: Option<AckToken>,
        closed: bool,
    ) -> Self {
        Batch {
            failure: Some((error, token)),
            closed,
            ..Batch::new(channel, generation, 0)
        }
    }

    /// A batch holding only the end of `channel`.
    pub(crate) fn closed(channel: usize, generation: u64) -> Self {
        Batch {
            closed: true,
            ..Batch::new(channel, generation, 0)
        }
    }

    /// Deliveries in the batch: what it takes of its queue's room (messages, a failure and
    /// the end each count one, as they did when each was a queue item of its own).
    pub(crate) fn len(&self) -> usize {
        self.msgs.len() + usize::from(self.failure.is_some()) + usize::from(self.closed)
    }

    /// Whether its last message is a timetick.
    pub(crate) fn ends_with_tick(&self) -> bool {
        self.msgs.last().is_some_and(TsMsg::is_time_tick)
    }

    /// Splits off and returns the first `count` deliveries (`0 < count < self.len()`), keeping
    /// the rest in `self`, in order.
    pub(crate) fn split_front(&mut self, count: usize) -> Batch {
        let taken = count.min(self.msgs.len());
        let rest_msgs = self.msgs.split_off(taken);
        let rest_ends = self.ends.split_off(taken);
        let rest_tokens = self.tokens.split_off(taken);
        let mut front = Batch {
            msgs: std::mem::replace(&mut self.msgs, rest_msgs),
            ends: std::mem::replace(&mut self.ends, rest_ends),
            tokens: std::mem::replace(&mut self.tokens, rest_tokens),
            ..Batch::new(self.channel, self.generation, 0)
        };
        if count > taken {
            // Room is left after the messages: the failure goes with them (the end, which
            // follows it, stays: `count < self.len()`).
            front.failure = self.failure.take();
        }
        front
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mq::{Delivery, MessageId};

    fn token(id: u64) -> AckToken {
        AckToken {
            id: MessageId::from_u64(id),
            delivery: Delivery::default(),
        }
    }

    fn filled(n: u64) -> Batch {
        let mut batch = Batch::new(3, 7, 0);
        for id in 0..n {
            batch.msgs.push(TsMsg::time_tick(id + 1));
            batch.ends.push(id + 1);
            batch.tokens.push(token(id));
        }
        batch
    }

    #[test]
    fn every_delivery_takes_room() {
        let batch = filled(1);
        assert!(batch.ends_with_tick());
        assert_eq!(batch.len(), 1);
        let ended = Batch::failure(0, 0, Error::Closed("x"), None, true);
        assert_eq!(ended.len(), 2);
        assert!(!ended.ends_with_tick());
        assert_eq!(Batch::closed(0, 0).len(), 1);
    }

    #[test]
    fn split_front_keeps_order_and_metadata_aligned() {
        let mut batch = filled(5);
        batch.failure = Some((Error::Closed("x"), Some(token(9))));
        batch.closed = true;
        let front = batch.split_front(2);
        assert_eq!((front.channel, front.generation), (3, 7));
        assert_eq!(front.ends, vec![1, 2]);
        assert_eq!(front.tokens.len(), 2);
        assert!(front.failure.is_none() && !front.closed);
        assert_eq!(batch.ends, vec![3, 4, 5]);
        assert_eq!(batch.msgs.len(), 3);
        assert_eq!(batch.len(), 5);
        // Everything but the end: the messages and the failure go, the end stays.
        let front = batch.split_front(4);
        assert_eq!(front.len(), 4);
        assert!(front.failure.is_some() && !front.closed);
        assert_eq!(batch.len(), 1);
        assert!(batch.closed && batch.msgs.is_empty());
    }
}
