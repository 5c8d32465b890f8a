//! [`Runs`]: a stream's say in how its pumps cut what they receive into batches, and in what
//! they note of each batch as they decode it.
//!
//! The pump knows nothing of what either stream does with a batch: it asks its `Runs` (one per
//! channel, kept across receives) how much room a new batch takes, whether a timetick closes
//! the batch being built, and what to note of each message while the message is in the pump's
//! cache. The plain stream takes batches apart message by message, so it wants one batch per
//! receive and notes nothing ([`Whole`]); the tt stream's runs are its own (`tt::runs`).

use std::fmt::Debug;

use crate::msg::TsMsg;

/// How a pump cuts one channel's receives into batches.
pub(crate) trait Runs: Default + Send + 'static {
    /// What a batch carries of its messages, noted as they are decoded.
    type Summary: Default + Debug + Send + 'static;

    /// Notes `msg`, whose `end_ts` is given, after the messages noted so far.
    fn note(summary: &mut Self::Summary, msg: &TsMsg, end_ts: u64);

    /// Room, in messages, for a new batch with `left` messages left in the receive.
    fn room(&self, left: usize) -> usize;

    /// Room a whole run is expected to take (0: not known), so that spare vectors with less
    /// are not kept.
    fn whole(&self) -> usize;

    /// A receive with messages begins.
    fn receive_starts(&mut self);

    /// The batch being built ends with a timetick and holds `len` messages: whether to close
    /// it there.
    fn closes_at_tick(&mut self, len: usize) -> bool;

    /// The receive ended with its last batch not closed by a tick (`open`) or closed.
    fn receive_ends(&mut self, open: bool);

    /// The channel's consumer moved (a seek): what the last receives said no longer holds.
    fn reset(&mut self);
}

/// One batch per receive, nothing noted: for a stream that takes batches apart message by
/// message.
#[derive(Debug, Default)]
pub(crate) struct Whole;

impl Runs for Whole {
    type Summary = ();

    #[inline(always)]
    fn note(_: &mut (), _: &TsMsg, _: u64) {}

    fn room(&self, left: usize) -> usize {
        left
    }

    fn whole(&self) -> usize {
        0
    }

    fn receive_starts(&mut self) {}

    #[inline(always)]
    fn closes_at_tick(&mut self, _: usize) -> bool {
        false
    }

    fn receive_ends(&mut self, _: bool) {}

    fn reset(&mut self) {}
}
