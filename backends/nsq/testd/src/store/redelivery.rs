//! Where upstream nsqd puts a message it delivers again: at the back of the channel's queue.
//!
//! nsqd 1.3.0 keeps a channel's undelivered messages in one FIFO queue. A message that comes
//! back (its msg_timeout expired, `REQ 0`, a `REQ` delay or a `DPUB` deferral that ran out) is
//! put into that queue at the moment it comes back (`Channel.put`), so it goes out after every
//! message published before that moment and before every message published after it. A
//! consumer that disconnects without FIN does not put anything back: its messages stay in
//! flight until their msg_timeout (transcript `upstream-U3`, steps 35-49).
//!
//! Here a channel is a cursor into the log, so a message that came back is queued with the
//! log length at that moment, `behind`: it is delivered once the cursor has passed every
//! message published before it came back.

use std::time::Instant;

use super::{Channel, Stored};

/// A message that came back, waiting for its turn in the queue.
pub(crate) struct Queued {
    pub index: usize,
    pub attempts: u16,
    /// The log length when it came back: the cursor must reach this first.
    pub behind: usize,
}

impl Channel {
    /// Moves every waiting message whose time came to the back of the queue, in the order their
    /// times came (nsqd's timeout and deferral scans put them back in deadline order).
    pub(super) fn queue_due(&mut self, log_len: usize, now: Instant) {
        if !self.waiting.iter().any(|w| w.ready_at <= now) {
            return;
        }
        let (mut due, later): (Vec<_>, Vec<_>) =
            self.waiting.drain(..).partition(|w| w.ready_at <= now);
        self.waiting = later;
        due.sort_by_key(|w| w.ready_at);
        self.queued.extend(due.into_iter().map(|w| Queued {
            index: w.index,
            attempts: w.attempts,
            behind: log_len,
        }));
    }
}

/// Upstream's next delivery: a message that came back once the cursor passed what was
/// published before it came back, else the message at the cursor (a deferred `DPUB` met there
/// waits until its time, then queues).
pub(super) fn next_in_queue(
    log: &[Stored],
    channel: &mut Channel,
    now: Instant,
) -> Option<(usize, u16)> {
    loop {
        if channel
            .queued
            .front()
            .is_some_and(|q| q.behind <= channel.cursor)
        {
            let q = channel.queued.pop_front()?;
            return Some((q.index, q.attempts.saturating_add(1)));
        }
        let stored = log.get(channel.cursor)?;
        let index = channel.cursor;
        channel.cursor += 1;
        match stored.visible_at {
            Some(at) if at > now => channel.defer(index, at),
            _ => return Some((index, 1)),
        }
    }
}
