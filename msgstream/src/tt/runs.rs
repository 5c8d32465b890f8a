//! [`LongRuns`]: how the tt stream wants its channels' receives cut into batches.
//!
//! A run is a channel's messages up to and including a timetick. A batch that holds one run
//! goes into the aligner as a block; a batch of several runs is taken apart message by message.
//! So a pump closes a batch at a timetick once the batch holds [`LONG_RUN`] messages: on a
//! channel that ticks seldom, each batch is one run; on one that ticks every few messages, a
//! batch gathers several runs rather than paying a batch's costs (its vectors, its place in the
//! queue) for a handful of messages. Each batch carries the [`RunSummary`] of its messages,
//! noted by the pump while they are in its cache, so that cutting a pack need not read them.

use crate::consume::runs::Runs;
use crate::msg::TsMsg;

use super::summary::RunSummary;

/// Messages a batch holds before a timetick closes it (see the module docs).
pub(crate) const LONG_RUN: usize = 32;

/// What a channel's pump remembers of its runs between receives.
#[derive(Debug, Default)]
pub(crate) struct LongRuns {
    /// Messages in the last batch that a tick closed: the room a new batch's vectors start
    /// with (a channel ticks at a steady rate, mostly), so that they neither grow (a growth
    /// copies every message moved so far) nor take room for a whole receive each.
    hint: usize,
    /// Whether the last receive ended inside a run (its last batch has no closing tick): the
    /// next receive then closes its first batch at its first tick, however short, so that the
    /// run's tail joins the rest of its run in the aligner as a block of its own instead of
    /// riding with the next run.
    mid_run: bool,
    /// Within a receive: the first batch is still the tail of a run the last receive cut.
    tail: bool,
}

impl Runs for LongRuns {
    type Summary = RunSummary;

    #[inline(always)]
    fn note(summary: &mut RunSummary, msg: &TsMsg, end_ts: u64) {
        if !msg.is_time_tick() {
            summary.add(msg, end_ts);
        }
    }

    /// Once runs are known to be long, a new batch gets a whole run's room even when fewer
    /// messages are left in this receive: a run the receive cuts then reaches the aligner in
    /// two blocks, and the first, swapped into an empty channel buffer, takes the second on
    /// without growing.
    fn room(&self, left: usize) -> usize {
        match self.whole() {
            0 => left,
            whole => whole,
        }
    }

    /// The last run's length and a quarter (0: none seen yet).
    fn whole(&self) -> usize {
        match self.hint {
            0 => 0,
            hint => hint + hint / 4 + 1,
        }
    }

    fn receive_starts(&mut self) {
        self.tail = std::mem::take(&mut self.mid_run);
    }

    #[inline]
    fn closes_at_tick(&mut self, len: usize) -> bool {
        let ends_tail = std::mem::take(&mut self.tail);
        if len >= LONG_RUN {
            self.hint = len;
            return true;
        }
        ends_tail
    }

    fn receive_ends(&mut self, open: bool) {
        self.mid_run = open;
    }

    fn reset(&mut self) {
        self.mid_run = false;
    }
}
