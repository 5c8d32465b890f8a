//! [`Batch`]: what a pump hands its stream in one piece, a run of one channel's deliveries.
//!
//! The messages travel as one block (`VecDeque<TsMsg>`) with their metadata in queues beside
//! them, not as a vector of per-message records: a `TsMsg` is about 520 bytes, and every move
//! of one is a copy of that size. A batch that holds a single run of a channel (its messages up
//! to and including a timetick, or no tick at all) goes into the tt stream's aligner by moving
//! the block (no copy at all when the aligner holds nothing of that channel yet: a deque
//! filled from empty by `push_back` becomes a `Vec` in place). Anything else is taken message by
//! message from the front, which moves nothing else.
//!
//! Where a pump closes a batch besides an undecodable message, a failure and the channel's end
//! is the stream's say ([`super::runs::Runs`]), and so is the summary a batch carries.

use std::collections::VecDeque;

use super::commit::AckToken;
use crate::msg::TsMsg;
use crate::Error;

/// One channel's deliveries in order: `msgs`, then `failure`, then `closed`; `S` is what the
/// stream's [`super::runs::Runs`] notes of the messages.
#[derive(Debug)]
pub(crate) struct Batch<S> {
    /// The channel's index in subscription order.
    pub(crate) channel: usize,
    /// The channel's generation when the pump received it (a seek starts a new one; the
    /// stream discards batches of older generations).
    pub(crate) generation: u64,
    /// Decoded messages, in arrival order.
    pub(crate) msgs: VecDeque<TsMsg>,
    /// Each message's `end_ts`, worked out by the pump right after decoding it (its row
    /// timestamps are in that thread's cache then), for the tt stream's aligner.
    pub(crate) ends: VecDeque<u64>,
    /// Each message's ack token: the received message behind it, to be committed once the
    /// application has had it.
    pub(crate) tokens: VecDeque<AckToken>,
    /// Timeticks among `msgs`.
    pub(crate) ticks: usize,
    /// What the stream's [`super::runs::Runs`] noted of `msgs` as the pump decoded them; `None`
    /// once the batch was taken apart or split.
    pub(crate) summary: Option<S>,
    /// After the messages: a message that does not decode (with its token, so it is
    /// committed like any other), or a failure that ended the channel (no token; `closed`
    /// then follows).
    pub(crate) failure: Option<(Error, Option<AckToken>)>,
    /// Whether the channel ends after this batch: nothing more will come.
    pub(crate) closed: bool,
}

impl<S: Default> Batch<S> {
    /// An empty batch of `channel` in `generation`, with room for `capacity` messages.
    pub(crate) fn new(channel: usize, generation: u64, capacity: usize) -> Self {
        Batch {
            channel,
            generation,
            msgs: VecDeque::with_capacity(capacity),
            ends: VecDeque::with_capacity(capacity),
            tokens: VecDeque::with_capacity(capacity),
            ticks: 0,
            summary: Some(S::default()),
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

    /// Splits off and returns the first `count` deliveries (`0 < count < self.len()`), keeping
    /// the rest in `self`, in order.
    pub(crate) fn split_front(&mut self, count: usize) -> Self {
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
        front.ticks = front.msgs.iter().filter(|m| m.is_time_tick()).count();
        self.ticks -= front.ticks;
        (front.summary, self.summary) = (None, None);
        if count > taken {
            // Room is left after the messages: the failure goes with them (the end, which
            // follows it, stays: `count < self.len()`).
            front.failure = self.failure.take();
        }
        front
    }
}

impl<S> Batch<S> {
    /// Deliveries in the batch: what it takes of its queue's room (messages, a failure and
    /// the end each count one, as they did when each was a queue item of its own).
    pub(crate) fn len(&self) -> usize {
        self.msgs.len() + usize::from(self.failure.is_some()) + usize::from(self.closed)
    }

    /// Whether its last message is a timetick.
    pub(crate) fn ends_with_tick(&self) -> bool {
        self.msgs.back().is_some_and(TsMsg::is_time_tick)
    }

    /// Whether its messages are one run: no timetick but perhaps the last.
    pub(crate) fn is_one_run(&self) -> bool {
        self.ticks == 0 || self.ticks == 1 && self.ends_with_tick()
    }

    /// The first message, with its `end_ts` and token.
    pub(crate) fn pop_front(&mut self) -> Option<(TsMsg, u64, AckToken)> {
        let msg = self.msgs.pop_front()?;
        self.ticks -= usize::from(msg.is_time_tick());
        self.summary = None;
        Some((msg, self.ends.pop_front()?, self.tokens.pop_front()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mq::{Delivery, MessageId};
    use crate::msg::{InsertRequest, MsgBody};

    fn token(id: u64) -> AckToken {
        AckToken {
            id: MessageId::from_u64(id),
            delivery: Delivery::default(),
            passed: false,
        }
    }

    /// Messages at timestamps 1..=n, a tick at every multiple of `tick_every`.
    fn filled(n: u64, tick_every: u64) -> Batch<()> {
        let mut batch = Batch::new(3, 7, 0);
        for id in 1..=n {
            let msg = if id % tick_every == 0 {
                batch.ticks += 1;
                TsMsg::time_tick(id)
            } else {
                TsMsg::new(MsgBody::Insert(InsertRequest::default()))
            };
            batch.msgs.push_back(msg);
            batch.ends.push_back(id);
            batch.tokens.push_back(token(id));
        }
        batch
    }

    #[test]
    fn every_delivery_takes_room_and_runs_are_told_by_their_ticks() {
        let batch = filled(3, 3);
        assert!(batch.ends_with_tick() && batch.is_one_run());
        assert_eq!(batch.len(), 3);
        assert!(filled(3, 5).is_one_run(), "no tick at all");
        assert!(!filled(4, 2).is_one_run(), "a tick before the last");
        let ended = Batch::<()>::failure(0, 0, Error::Closed("x"), None, true);
        assert_eq!(ended.len(), 2);
        assert!(!ended.ends_with_tick());
        assert_eq!(Batch::<()>::closed(0, 0).len(), 1);
    }

    #[test]
    fn popping_keeps_messages_metadata_and_tick_count_together() {
        let mut batch = filled(4, 2);
        let (msg, end_ts, token) = batch.pop_front().expect("first");
        assert!(!msg.is_time_tick());
        assert_eq!((end_ts, token.id.as_u64()), (1, Some(1)));
        assert_eq!(batch.ticks, 2);
        let (msg, end_ts, _) = batch.pop_front().expect("second");
        assert!(msg.is_time_tick() && end_ts == 2);
        assert_eq!(batch.ticks, 1);
        assert!(batch.is_one_run(), "one run left: 3 and the tick at 4");
    }

    #[test]
    fn split_front_keeps_order_and_metadata_aligned() {
        let mut batch = filled(5, 2);
        batch.failure = Some((Error::Closed("x"), Some(token(9))));
        batch.closed = true;
        let front = batch.split_front(2);
        assert_eq!((front.channel, front.generation), (3, 7));
        assert_eq!(front.ends, vec![1, 2]);
        assert_eq!(front.tokens.len(), 2);
        assert_eq!((front.ticks, batch.ticks), (1, 1));
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
