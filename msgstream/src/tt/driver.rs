//! [`TtSide`]: the consuming side of a tt stream, the short async driver around the aligner.
//!
//! Each step asks the aligner which channel to read, asks the feed decisions ([`super::feed`])
//! whether and how much of it, and carries that out: wait at a channel's cap, take a batch from
//! the channel's queue, push it into the aligner, record its ack tokens. Everything about packs
//! is decided by the aligner, and everything about the cap by the feed decisions, so the driver
//! adds no nondeterminism. A broken invariant (the aligner naming no channel and no pack, a
//! channel without its queue) is an error that ends the stream, never a silent end.

use std::time::SystemTime;

use super::aligner::TimetickAligner;
use super::feed::{Channel, Feed, Gate, Shape};
use super::runs::LongRuns;
use super::summary::RunSummary;
use crate::consume::batch::Batch;
use crate::consume::pump::Pumps;
use crate::consume::queue::QueueReader;
use crate::consume::CommitLog;
use crate::mq::MessageId;
use crate::msg::{MsgPack, MsgPosition};
use crate::{Error, Result};

/// A batch of one channel, as the tt stream's pumps cut them.
type TtBatch = Batch<RunSummary>;

pub(super) struct TtSide {
    /// The subscription, naming this stream in metrics.
    pub(super) subscription: String,
    pub(super) pumps: Pumps<LongRuns>,
    pub(super) receivers: Vec<QueueReader<RunSummary>>,
    pub(super) aligner: TimetickAligner,
    pub(super) closed: bool,
    pub(super) packs: u64,
    pub(super) peak_buffered: usize,
    pub(super) commits: CommitLog,
    /// End positions of the last pack handed to the application, not yet committed.
    pub(super) delivered: Option<Vec<MsgPosition>>,
    /// Per channel, tick events taken from its queue (compared with the ticks its pump queued).
    pub(super) ticks_taken: Vec<u64>,
    /// Per channel, since when it is capped.
    pub(super) capped_since: Vec<Option<SystemTime>>,
}

impl TtSide {
    /// The next pack, reading as the aligner asks; `None` once the consumers are closed.
    pub(super) async fn next_pack(&mut self, max_held: usize) -> Option<Result<MsgPack>> {
        loop {
            if self.closed {
                return None;
            }
            if let Some(pack) = self.aligner.pop_pack() {
                return Some(Ok(self.hand_over(pack)));
            }
            if let Err(error) = self.step(max_held).await {
                return Some(Err(error));
            }
        }
    }

    /// Counts `pack` and remembers its end positions for the next commit.
    fn hand_over(&mut self, pack: MsgPack) -> MsgPack {
        self.packs += 1;
        self.release();
        let queued: usize =
            self.receivers.iter().map(QueueReader::held).sum::<usize>() + self.pumps.pending();
        self.peak_buffered = self
            .peak_buffered
            .max(self.aligner.peak_buffered())
            .max(self.aligner.buffered() + queued);
        if let Some(holder) = self.aligner.holder() {
            tracing::debug!(
                target: "msgstream::metrics",
                end_ts = pack.end_ts,
                holder = %holder.name,
                lag = holder.lag,
                buffered = self.aligner.buffered(),
                "tt pack"
            );
        }
        let ticks: Vec<(&str, Option<u64>)> = self.aligner.last_ticks().collect();
        crate::metrics::get().alignment(&self.subscription, &ticks);
        self.delivered = Some(pack.end_positions.clone());
        pack
    }

    /// One read of the channel the aligner asks for, as the feed decisions say. `Err` for what
    /// the stream reports (a late or undecodable message, a channel's failure) and for a broken
    /// invariant (which also ends the stream).
    async fn step(&mut self, max_held: usize) -> Result<()> {
        let Some(channel) = self.aligner.next_channel() else {
            return Err(self.broken("the aligner has neither a pack nor a channel to read"));
        };
        let state = self.channel(channel, max_held)?;
        if state.gate() == Gate::Capped {
            return self.wait_capped(channel, state.held).await;
        }
        let mut batch = self.take(channel).await?;
        if !self.pumps.is_current(&batch) {
            // From before a seek: dropped, its ticks counted as taken.
            self.took_ticks(channel, batch.ticks);
            return Ok(());
        }
        // Asked again: a tick may have been queued while the driver waited for the batch.
        let shape = Shape {
            msgs: batch.msgs.len(),
            one_run: batch.is_one_run(),
            ends_with_tick: batch.ends_with_tick(),
        };
        match self.channel(channel, max_held)?.feed(shape) {
            Feed::FirstRun => self.feed_first_run(channel, batch),
            Feed::Whole => self.feed_run(channel, batch),
            Feed::Front(count) => {
                let front = batch.split_front(count);
                self.unread(channel, batch)?;
                self.feed_run(channel, front)
            }
        }
    }

    /// What the feed decisions look at of `channel`.
    fn channel(&mut self, channel: usize, max_held: usize) -> Result<Channel> {
        let taken = self.ticks_taken.get(channel).copied().unwrap_or(0);
        let Some(signal) = self.pumps.signal(channel) else {
            return Err(self.broken(&format!("channel {channel} has no pump")));
        };
        Ok(Channel {
            held: self.aligner.buffered_in(channel),
            max_held,
            tick_or_end: signal.tick_or_end_after(taken),
        })
    }

    /// Reports `channel` capped (once), then waits until a tick or its end is on its way.
    async fn wait_capped(&mut self, channel: usize, held: usize) -> Result<()> {
        let Some(signal) = self.pumps.signal(channel).cloned() else {
            return Err(self.broken(&format!("channel {channel} has no pump")));
        };
        if let Some(since @ None) = self.capped_since.get_mut(channel) {
            *since = Some(SystemTime::now());
            let name = self.aligner.channel_names().nth(channel).unwrap_or("");
            tracing::warn!(
                channel = %name,
                held,
                "tt stream: channel holds {held} messages without a tick; not reading it until it ticks"
            );
            crate::metrics::get().stalled(&self.subscription, name);
        }
        self.release();
        let taken = self.ticks_taken.get(channel).copied().unwrap_or(0);
        signal.wait_for_tick_or_end_after(taken).await;
        Ok(())
    }

    /// The next batch of `channel`, waiting for one.
    async fn take(&mut self, channel: usize) -> Result<TtBatch> {
        let Some(receiver) = self.receivers.get_mut(channel) else {
            return Err(self.broken(&format!("channel {channel} has no queue")));
        };
        if let Some(batch) = receiver.try_next() {
            return Ok(batch);
        }
        self.release();
        let received = match self.receivers.get_mut(channel) {
            Some(receiver) => receiver.recv().await,
            None => None,
        };
        match received {
            Some(batch) => Ok(batch),
            None => Err(self.broken(&format!("the queue of channel {channel} lost its pump"))),
        }
    }

    /// Puts the rest of a batch back at the front of its channel's queue.
    fn unread(&mut self, channel: usize, rest: TtBatch) -> Result<()> {
        match self.receivers.get_mut(channel) {
            Some(receiver) => {
                receiver.unread(rest);
                Ok(())
            }
            None => Err(self.broken(&format!("channel {channel} has no queue"))),
        }
    }

    /// Feeds a batch of several runs message by message from the front, up to and including
    /// its first tick (nothing else moves), and puts the rest back.
    fn feed_first_run(&mut self, channel: usize, mut batch: TtBatch) -> Result<()> {
        let mut pushed = Ok(());
        while let Some((msg, end_ts, token)) = batch.pop_front() {
            let tick = msg.is_time_tick();
            self.commits.received(channel, token, tick);
            pushed = self.aligner.push_with_end_ts(channel, msg, end_ts);
            if tick {
                self.took_ticks(channel, 1);
            }
            if tick || pushed.is_err() {
                break;
            }
        }
        if batch.len() > 0 {
            self.unread(channel, batch)?;
        }
        pushed
    }

    /// Feeds a batch of one run into the aligner as a block (a deque filled from empty is a
    /// `Vec` in place), then its failure and end.
    fn feed_run(&mut self, channel: usize, mut batch: TtBatch) -> Result<()> {
        let tick = batch.ends_with_tick();
        let mut msgs = Vec::from(std::mem::take(&mut batch.msgs));
        let mut ends = Vec::from(std::mem::take(&mut batch.ends));
        let pushed = self
            .aligner
            .push_run(channel, &mut msgs, &mut ends, batch.summary.take());
        // What was pushed (or dropped, or reported late) was received: the rest, after a
        // late message, comes again on the next call.
        let rest_tokens = batch.tokens.split_off(batch.tokens.len() - msgs.len());
        let mut done = std::mem::replace(&mut batch.tokens, rest_tokens);
        let passed_tick = tick && msgs.is_empty();
        if passed_tick {
            // Counted once taken: after a late message it is still to come.
            self.took_ticks(channel, 1);
        }
        // The pump marked the tick's token passed and the others not, as the aligner takes
        // them: a pushed tick is passed, a buffered message is not.
        debug_assert!(done
            .iter()
            .enumerate()
            .all(|(i, t)| t.passed == (passed_tick && i + 1 == done.len())));
        self.commits.received_all(channel, &mut done);
        if let Some(spares) = self.pumps.spares(channel) {
            spares.give_back_tokens(done);
        }
        if let Err(error) = pushed {
            batch.msgs = msgs.into();
            batch.ends = ends.into();
            self.unread(channel, batch)?;
            return Err(error);
        }
        if let Some(spares) = self.pumps.spares(channel) {
            // The aligner's emptied vectors, given in exchange for the block.
            spares.give_back(msgs, ends);
        }
        if let Some((error, token)) = batch.failure.take() {
            if let Some(token) = token {
                self.commits.received(channel, token, true);
            }
            if batch.closed {
                self.unread(channel, batch)?;
            }
            return Err(error);
        }
        if batch.closed {
            self.closed = true;
        }
        Ok(())
    }

    /// A broken invariant: the stream ends, with this error as its last item.
    fn broken(&mut self, what: &str) -> Error {
        self.closed = true;
        tracing::error!(what, "tt stream: broken invariant");
        Error::backend("msgstream", format!("tt stream: broken invariant: {what}"))
    }

    /// Frees the queue room of every message taken: before the stream waits for anything or
    /// returns, so that no pump waits for room the stream does not need.
    pub(super) fn release(&mut self) {
        self.receivers.iter_mut().for_each(QueueReader::release);
    }

    /// `count` ticks of `channel` were taken from its queue: counted (against the ticks its
    /// pump queued), and the channel's room given back now rather than at the pack (the
    /// aligner mostly moves on to another channel after a tick). A capped channel that ticked
    /// is read again.
    fn took_ticks(&mut self, channel: usize, count: usize) {
        if count == 0 {
            return;
        }
        if let Some(receiver) = self.receivers.get_mut(channel) {
            receiver.release();
        }
        if let Some(taken) = self.ticks_taken.get_mut(channel) {
            *taken += count as u64;
        }
        if let Some(since) = self.capped_since.get_mut(channel) {
            if since.take().is_some() {
                tracing::info!(
                    channel,
                    "tt stream: capped channel ticked, reading it again"
                );
            }
        }
    }

    /// Commits every channel up to `positions` (end positions, in channel order).
    pub(super) async fn commit_to(&mut self, positions: &[MsgPosition]) -> Result<()> {
        let points: Vec<(usize, &MessageId)> =
            positions.iter().map(|p| &p.msg_id).enumerate().collect();
        self.commits.commit(&points).await
    }

    /// Commits the last pack handed over, if any.
    pub(super) async fn commit_delivered(&mut self) -> Result<()> {
        match self.delivered.take() {
            Some(positions) => self.commit_to(&positions).await,
            None => Ok(()),
        }
    }
}
