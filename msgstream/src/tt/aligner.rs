//! `TimetickAligner`: the timetick alignment of many channels as a pure state machine.
//!
//! No runtime, no clock, no I/O (the way `quinn-proto` keeps QUIC logic apart): the driver asks
//! [`TimetickAligner::next_channel`] which channel to read, [`TimetickAligner::push`]es what it
//! read, and takes packs from [`TimetickAligner::pop_pack`]. Everything below is therefore
//! testable exhaustively and deterministically.
//!
//! # Rules
//! - The **watermark** is the minimum over channels of the last timetick read.
//! - Only channels *holding the watermark back* (last tick ≤ last emitted `end_ts`, or no tick
//!   yet) are read. Other channels wait, so their producers are back-pressured by the driver's
//!   bounded queues, and — the property recovery relies on — the sequence of packs does not depend
//!   on how fast each channel happens to deliver: every channel is read exactly up to its first
//!   tick above the previous watermark before the next pack is cut.
//! - When the watermark rises above the last `end_ts`, one pack is cut: every buffered non-tick
//!   message with `end_ts ≤ watermark`, channel by channel in subscription order, each channel in
//!   arrival order. Duplicate Insert/Delete deliveries of one channel inside one pack are
//!   dropped.
//! - **Positions**: per channel, the first message still buffered, else the last tick read,
//!   with `timestamp = end_ts`. Resuming there inclusively and dropping everything at or below the
//!   timestamp reproduces the following packs exactly.
//! - A message at or below an emitted `end_ts` (only on reordering backends) is **late**: counted,
//!   and reported or dropped by [`LatePolicy`], never folded into a later pack.

use std::collections::HashSet;

use super::summary::{dedup_order, DedupOrder, RunSummary};
use crate::consume::LatePolicy;
use crate::msg::{Ids, MsgBody, MsgPack, MsgPosition, TsMsg};
use crate::{Error, Result};

/// Which channel holds the watermark back, and by how much.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatermarkHolder {
    /// Index of the channel in subscription order.
    pub channel: usize,
    /// Its name.
    pub name: String,
    /// Its last tick (`None`: no tick read yet).
    pub last_tick: Option<u64>,
    /// Highest last tick of any channel minus this channel's (0 when all are level).
    pub lag: u64,
}

#[derive(Debug)]
struct ChannelState {
    name: String,
    last_tick: Option<u64>,
    /// Messages at or below this are dropped silently (they were emitted before a seek).
    floor: Option<u64>,
    last_tick_read: Option<MsgPosition>,
    start: Option<MsgPosition>,
    /// In arrival order. A `Vec`, so that a pack takes a channel's messages in one move and
    /// the channel keeps its capacity for the next pack.
    buffered: Vec<TsMsg>,
    /// The `end_ts` of each message of `buffered`, worked out once, when it was pushed: cutting
    /// a pack looks at these instead of at each message's row timestamps, a separate
    /// allocation written on another thread.
    ends: Vec<u64>,
    /// What a pack cut needs of `buffered`, kept up to date with it (see [`RunSummary`]).
    summary: RunSummary,
}

/// The alignment state machine (see the module docs for its rules).
#[derive(Debug)]
pub struct TimetickAligner {
    channels: Vec<ChannelState>,
    last_end: u64,
    /// [`Self::next_channel`], kept up to date: the driver asks for it once per read. It is the
    /// first channel that lags (no tick above the last end), so a raised tick moves it only
    /// when it raises that channel, and then on from there: a pack over `n` channels costs
    /// O(n) of these updates, not a scan of every channel per tick.
    reading: Option<usize>,
    late_policy: LatePolicy,
    buffered: usize,
    peak_buffered: usize,
    late: u64,
}

impl TimetickAligner {
    /// A fresh aligner for `channels`, starting at timestamp 0.
    pub fn new(channels: Vec<String>, late_policy: LatePolicy) -> Self {
        let channels = channels
            .into_iter()
            .map(|name| ChannelState {
                name,
                last_tick: None,
                floor: None,
                last_tick_read: None,
                start: None,
                buffered: Vec::new(),
                ends: Vec::new(),
                summary: RunSummary::default(),
            })
            .collect();
        let mut aligner = TimetickAligner {
            channels,
            last_end: 0,
            reading: None,
            late_policy,
            buffered: 0,
            peak_buffered: 0,
            late: 0,
        };
        aligner.refresh();
        aligner
    }

    /// Recomputes the channel to read after the last end moved (a pack, a resume).
    fn refresh(&mut self) {
        self.reading = self.first_lagging(0);
    }

    /// The first channel from `from` on that lags: no tick yet, or none above the last end.
    fn first_lagging(&self, from: usize) -> Option<usize> {
        let last_end = self.last_end;
        self.channels
            .get(from..)?
            .iter()
            .position(|c| c.last_tick.is_none_or(|t| t <= last_end))
            .map(|i| i + from)
    }

    /// An aligner resuming from stored positions (one per channel, in subscription order): the
    /// driver re-reads each channel inclusively from `position.msg_id`, and everything at or
    /// below `position.timestamp` is dropped.
    pub fn resume(positions: &[MsgPosition], late_policy: LatePolicy) -> Result<Self> {
        if positions.is_empty() {
            return Err(Error::InvalidArgument("no positions to resume from".into()));
        }
        let mut aligner = Self::new(
            positions
                .iter()
                .map(|p| p.channel_name.to_string())
                .collect(),
            late_policy,
        );
        for (state, position) in aligner.channels.iter_mut().zip(positions) {
            state.last_tick = Some(position.timestamp);
            state.floor = Some(position.timestamp);
            state.start = Some(position.clone());
        }
        aligner.last_end = positions.iter().map(|p| p.timestamp).min().unwrap_or(0);
        aligner.refresh();
        Ok(aligner)
    }

    /// Channel names in subscription order.
    pub fn channel_names(&self) -> impl Iterator<Item = &str> {
        self.channels.iter().map(|c| c.name.as_str())
    }

    /// The channel to read next, or `None` when a pack is ready to pop.
    pub fn next_channel(&self) -> Option<usize> {
        self.reading
    }

    /// Min over channels of the last tick; `None` until every channel has ticked.
    pub fn watermark(&self) -> Option<u64> {
        self.channels
            .iter()
            .map(|c| c.last_tick)
            .try_fold(u64::MAX, |min, t| t.map(|t| min.min(t)))
    }

    /// `end_ts` of the last pack emitted (or the resume timestamp).
    pub fn last_end(&self) -> u64 {
        self.last_end
    }

    /// Feeds one message read from `channel`. The message must carry its position.
    ///
    /// Returns `Error::LateMessage` for a late message under [`LatePolicy::Error`] (the message
    /// is not kept), `Error::InvalidArgument` for an unknown channel or a message without
    /// position.
    #[inline]
    pub fn push(&mut self, channel: usize, msg: TsMsg) -> Result<()> {
        let end_ts = msg.end_ts();
        self.push_with_end_ts(channel, msg, end_ts)
    }

    /// [`Self::push`] of a message whose `end_ts` the caller worked out (a stream's pump does,
    /// on its own thread, right after decoding, when the row timestamps are in its cache).
    #[inline]
    pub(crate) fn push_with_end_ts(
        &mut self,
        channel: usize,
        msg: TsMsg,
        end_ts: u64,
    ) -> Result<()> {
        let last_end = self.last_end;
        let state = self.channels.get_mut(channel).ok_or_else(|| {
            Error::InvalidArgument(format!("channel index {channel} out of range"))
        })?;
        if msg.position.is_none() {
            return Err(Error::InvalidArgument(
                "a message pushed to the aligner has no position".into(),
            ));
        }
        if state.start.is_none() {
            state.start = msg.position.clone().map(|p| MsgPosition {
                timestamp: last_end,
                ..p
            });
        }
        if msg.is_time_tick() {
            let tick = end_ts;
            let raised = state.last_tick.is_none_or(|t| tick > t);
            if raised {
                state.last_tick = Some(tick);
            }
            // Reading stops right after a tick that lifts a channel above the last end, so when
            // a pack is cut the last item read on every channel is a tick: its position is the
            // fallback resume point, and only ticks need to be remembered (no clone per message).
            state.last_tick_read = msg.position;
            // Only the first lagging channel's tick moves the channel to read.
            if raised && self.reading == Some(channel) && tick > last_end {
                self.reading = self.first_lagging(channel + 1);
            }
            return Ok(());
        }
        let ts = end_ts;
        if state.floor.is_some_and(|floor| ts <= floor) {
            return Ok(());
        }
        if ts <= last_end {
            self.late += 1;
            let error = Error::LateMessage {
                channel: state.name.clone(),
                timestamp: ts,
                end_ts: last_end,
            };
            return match self.late_policy {
                LatePolicy::Error => Err(error),
                LatePolicy::Drop => {
                    tracing::warn!(%error, "dropping late message");
                    Ok(())
                }
            };
        }
        state.summary.add(&msg, ts);
        state.buffered.push(msg);
        state.ends.push(ts);
        self.buffered += 1;
        self.peak_buffered = self.peak_buffered.max(self.buffered);
        Ok(())
    }

    /// Feeds a run of `channel`'s messages read in a row, with their `end_ts`s (one each), of
    /// which only the last may be a timetick: the same as pushing each in turn with
    /// [`Self::push_with_end_ts`], but a run whose messages are all above the channel's floor
    /// and the last `end_ts` (the usual case) is moved into the channel's buffer as one block,
    /// without a copy when the buffer is empty. Every message must carry its position (a
    /// pump's always do).
    ///
    /// On `Ok` the vectors are empty. On an error (a late message under
    /// [`LatePolicy::Error`]) they hold what comes after the failing message, not yet pushed.
    pub(crate) fn push_run(
        &mut self,
        channel: usize,
        msgs: &mut Vec<TsMsg>,
        ends: &mut Vec<u64>,
        summary: Option<RunSummary>,
    ) -> Result<()> {
        let last_end = self.last_end;
        let state = self.channels.get_mut(channel).ok_or_else(|| {
            Error::InvalidArgument(format!("channel index {channel} out of range"))
        })?;
        let data = msgs.len() - usize::from(msgs.last().is_some_and(TsMsg::is_time_tick));
        // Above both, a message is neither dropped nor late. (A driver reading channels as
        // `next_channel` says has `last_end` at or above the floor already: a resumed channel
        // is read once the last end reaches its resume timestamp.)
        let bar = state.floor.map_or(last_end, |floor| floor.max(last_end));
        let whole =
            data > 0 && ends.len() == msgs.len() && ends[..data].iter().all(|&end_ts| end_ts > bar);
        if !whole {
            return self.push_each(channel, msgs, ends);
        }
        debug_assert!(msgs[..data].iter().all(|m| m.position.is_some()));
        if state.start.is_none() {
            state.start = msgs[0].position.clone().map(|p| MsgPosition {
                timestamp: last_end,
                ..p
            });
        }
        let tick = if data < msgs.len() {
            msgs.pop().zip(ends.pop())
        } else {
            None
        };
        let summary = summary.unwrap_or_else(|| RunSummary::of(msgs, ends));
        if state.buffered.is_empty() {
            // The buffer's (empty) vectors go back to the caller in exchange.
            std::mem::swap(&mut state.buffered, msgs);
            std::mem::swap(&mut state.ends, ends);
            state.summary = summary;
        } else {
            state.buffered.append(msgs);
            state.ends.append(ends);
            state.summary.append(&summary);
        }
        self.buffered += data;
        self.peak_buffered = self.peak_buffered.max(self.buffered);
        match tick {
            Some((tick, end_ts)) => self.push_with_end_ts(channel, tick, end_ts),
            None => Ok(()),
        }
    }

    /// [`Self::push_run`] one message at a time.
    fn push_each(
        &mut self,
        channel: usize,
        msgs: &mut Vec<TsMsg>,
        ends: &mut Vec<u64>,
    ) -> Result<()> {
        let mut run = std::mem::take(msgs).into_iter().zip(std::mem::take(ends));
        while let Some((msg, end_ts)) = run.next() {
            if let Err(error) = self.push_with_end_ts(channel, msg, end_ts) {
                (*msgs, *ends) = run.unzip();
                return Err(error);
            }
        }
        Ok(())
    }

    /// Drops what `channel` has buffered, for a driver that will feed it again from the
    /// channel's resume point ([`Self::positions`]): ticks already counted are not lowered,
    /// and messages come back in their order.
    pub fn forget_buffered(&mut self, channel: usize) {
        if let Some(state) = self.channels.get_mut(channel) {
            self.buffered -= state.buffered.len();
            state.buffered.clear();
            state.ends.clear();
            state.summary = RunSummary::default();
        }
    }

    /// Cuts the next pack if the watermark has risen above the last `end_ts`.
    pub fn pop_pack(&mut self) -> Option<MsgPack> {
        // A channel still to read: no pack yet (and no scan of every channel's tick).
        if self.reading.is_some() {
            return None;
        }
        let watermark = self.watermark().filter(|w| *w > self.last_end)?;
        let begin_ts = self.last_end;
        let mut msgs = Vec::with_capacity(self.buffered);
        let mut start_positions = Vec::with_capacity(self.channels.len());
        let mut end_positions = Vec::with_capacity(self.channels.len());
        for state in &mut self.channels {
            let before = state.buffered.len();
            if state.summary.takes_all(watermark) {
                msgs.append(&mut state.buffered);
                state.ends.clear();
                state.summary = RunSummary::default();
            } else {
                take_some(state, watermark, &mut msgs);
                state.summary = RunSummary::of(&state.buffered, &state.ends);
            }
            self.buffered -= before - state.buffered.len();
            let end = state
                .buffered
                .first()
                .and_then(|m| m.position.clone())
                .or_else(|| state.last_tick_read.clone())
                .or_else(|| state.start.clone())
                .map(|p| MsgPosition {
                    timestamp: watermark,
                    ..p
                })
                .unwrap_or_else(|| MsgPosition {
                    channel_name: state.name.as_str().into(),
                    timestamp: watermark,
                    ..MsgPosition::default()
                });
            let start = state
                .start
                .replace(end.clone())
                .unwrap_or_else(|| MsgPosition {
                    timestamp: begin_ts,
                    ..end.clone()
                });
            start_positions.push(start);
            end_positions.push(end);
        }
        self.last_end = watermark;
        self.refresh();
        Some(MsgPack {
            begin_ts,
            end_ts: watermark,
            msgs,
            start_positions,
            end_positions,
        })
    }

    /// Where each channel would resume now: the end positions a pack cut at the current
    /// `last_end` would carry.
    pub fn positions(&self) -> Vec<MsgPosition> {
        self.channels
            .iter()
            .map(|state| {
                let p = state
                    .buffered
                    .first()
                    .and_then(|m| m.position.clone())
                    .or_else(|| state.last_tick_read.clone())
                    .or_else(|| state.start.clone())
                    .unwrap_or_else(|| MsgPosition {
                        channel_name: state.name.as_str().into(),
                        ..MsgPosition::default()
                    });
                MsgPosition {
                    timestamp: self.last_end,
                    ..p
                }
            })
            .collect()
    }

    /// Each channel's name and last tick (`None`: no tick read yet), in subscription order.
    pub fn last_ticks(&self) -> impl Iterator<Item = (&str, Option<u64>)> {
        self.channels.iter().map(|c| (c.name.as_str(), c.last_tick))
    }

    /// The channel holding the watermark back (the first one with the lowest last tick).
    pub fn holder(&self) -> Option<WatermarkHolder> {
        let max = self.channels.iter().filter_map(|c| c.last_tick).max();
        let (index, state) = self
            .channels
            .iter()
            .enumerate()
            .min_by_key(|(_, c)| c.last_tick.map_or((0, 0), |t| (1, t)))?;
        Some(WatermarkHolder {
            channel: index,
            name: state.name.clone(),
            last_tick: state.last_tick,
            lag: match (max, state.last_tick) {
                (Some(max), Some(t)) => max - t,
                (Some(max), None) => max,
                _ => 0,
            },
        })
    }

    /// Messages buffered now, over all channels.
    pub fn buffered(&self) -> usize {
        self.buffered
    }

    /// Messages buffered now for one channel (0 for an unknown index).
    pub fn buffered_in(&self, channel: usize) -> usize {
        self.channels.get(channel).map_or(0, |c| c.buffered.len())
    }

    /// Highest number of messages buffered at once so far.
    pub fn peak_buffered(&self) -> usize {
        self.peak_buffered
    }

    /// Late messages seen so far.
    pub fn late_messages(&self) -> u64 {
        self.late
    }
}

/// Moves into `msgs` the messages `state` buffers at or below `watermark`, in order, dropping
/// duplicates (equal [`dedup_key`]) of one taken before; the others stay buffered (with their
/// `end_ts`), in order.
fn take_some(state: &mut ChannelState, watermark: u64, msgs: &mut Vec<TsMsg>) {
    let first = msgs.len();
    // While the keys of the messages taken rise strictly none can repeat, so no set is
    // needed; the first that does not rise switches to the set, seeded with what was taken.
    let mut last: Option<DedupOrder> = None;
    let mut seen: Option<HashSet<DedupKey>> = None;
    let (mut kept, mut kept_ends) = (Vec::new(), Vec::new());
    let ends = std::mem::take(&mut state.ends);
    for (msg, end_ts) in std::mem::take(&mut state.buffered).into_iter().zip(ends) {
        if end_ts > watermark {
            kept.push(msg);
            kept_ends.push(end_ts);
            continue;
        }
        let emit = match (&mut seen, dedup_order(&msg, end_ts)) {
            (_, None) => true,
            (None, Some(order)) if last.is_none_or(|l| order > l) => {
                last = Some(order);
                true
            }
            (set, Some(_)) => {
                let set = set.get_or_insert_with(|| {
                    msgs.get(first..)
                        .unwrap_or_default()
                        .iter()
                        .filter_map(dedup_key)
                        .collect()
                });
                dedup_key(&msg).is_none_or(|key| set.insert(key))
            }
        };
        if emit {
            msgs.push(msg);
        }
    }
    state.buffered = kept;
    state.ends = kept_ends;
}

/// The identity of an Insert/Delete delivery as [`dedup_key`] has it.
type DedupKey = (i32, i64, u64, u64, i64, Option<Ids>);

/// Identity of an Insert/Delete delivery for in-pack de-duplication: a re-delivered or
/// re-produced message repeats all of it, while the rows a repack split from one request differ
/// in their row ids, keys or timestamps. A delete's key may be in either form (`primary_keys`,
/// integer or string, or the legacy `int64_primary_keys`), so both are part of the identity.
fn dedup_key(msg: &TsMsg) -> Option<DedupKey> {
    let first_row = msg.first_row()?;
    // Inserts have no such key (a received one, held undecoded, is an insert).
    let first_key = match msg.decoded_body() {
        Some(MsgBody::Delete(m)) => m.primary_keys.as_ref().and_then(|ids| ids.row(0)),
        _ => None,
    };
    Some((
        msg.msg_type(),
        msg.id(),
        msg.begin_ts(),
        msg.end_ts(),
        first_row,
        first_key,
    ))
}
