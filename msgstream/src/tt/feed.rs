//! How much of a channel's queued batch the tt stream feeds its aligner, given the channel's
//! cap: pure decisions, no queue, no runtime (the driver in [`super::driver`] carries them out).
//!
//! A channel that sends without ticking would otherwise fill the aligner without bound while
//! the other channels hold the watermark: the stream holds at most `max_held` of its messages,
//! then stops reading it until a tick (or the channel's end) is on its way through its queue.
//! What is on its way is read on in full, so a channel that ticks at last is never cut short of
//! its tick.

/// Whether the driver may read a channel now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Gate {
    /// Read its next batch.
    Read,
    /// It holds its cap and nothing will release it yet: wait for a tick or its end.
    Capped,
}

/// What of a channel's batch goes into the aligner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Feed {
    /// The batch holds several runs: its messages one by one, up to and including its first
    /// tick (the aligner may want another channel after a tick).
    FirstRun,
    /// The batch is one run: all of it, as a block.
    Whole,
    /// One run, more than the cap leaves room for: its first `n` messages as a block
    /// (`0 < n <` its messages), the rest put back.
    Front(usize),
}

/// What the feed decisions look at of a channel: what the aligner holds of it, its cap, and
/// whether a tick or its end is on its way (queued, or known to its pump).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Channel {
    pub(crate) held: usize,
    pub(crate) max_held: usize,
    pub(crate) tick_or_end: bool,
}

/// What the feed decisions look at of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shape {
    /// Messages in it.
    pub(crate) msgs: usize,
    /// Whether its messages are one run (no tick but perhaps the last).
    pub(crate) one_run: bool,
    /// Whether its last message is a tick.
    pub(crate) ends_with_tick: bool,
}

impl Channel {
    /// Whether to read the channel now.
    pub(crate) fn gate(&self) -> Gate {
        if self.held >= self.max_held.max(1) && !self.tick_or_end {
            Gate::Capped
        } else {
            Gate::Read
        }
    }

    /// How to feed `batch`, read after [`Channel::gate`] said [`Gate::Read`].
    pub(crate) fn feed(&self, batch: Shape) -> Feed {
        if !batch.one_run {
            // A tick is queued (in this batch), so the cap does not apply.
            return Feed::FirstRun;
        }
        let room = self.max_held.max(1).saturating_sub(self.held);
        if batch.ends_with_tick || batch.msgs <= room || self.tick_or_end || room == 0 {
            Feed::Whole
        } else {
            Feed::Front(room)
        }
    }
}

#[cfg(test)]
#[path = "feed_tests.rs"]
mod tests;
