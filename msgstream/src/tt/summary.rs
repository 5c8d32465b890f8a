//! [`RunSummary`]: what cutting a pack must know of a channel's buffered messages, noted as
//! they arrive so that the cut need not read them.
//!
//! Why: a pack takes a channel's whole buffer in one move when every message is at or below
//! the watermark and none repeats another (their [`DedupOrder`]s rise strictly). Checking that
//! at the cut would read every buffered message on the application's thread, where none of
//! them is in cache. So a pump notes each message's order and `end_ts` in its batch's summary
//! right after decoding it (see `tt::runs`), the aligner joins the summaries of the runs it
//! buffers, and the cut compares two numbers. Where no summary comes with a run (a batch split
//! or taken apart), the aligner works it out from the messages.

use crate::msg::TsMsg;

/// The scalar part of a message's de-duplication key (all but a delete's first primary key),
/// ordered: cheap to compute and to compare, with no allocation. Two messages whose orders
/// differ have different keys.
pub(crate) type DedupOrder = (u64, u64, i32, i64, i64);

/// [`DedupOrder`] of `msg`, whose `end_ts` is given; `None` for kinds never de-duplicated.
pub(crate) fn dedup_order(msg: &TsMsg, end_ts: u64) -> Option<DedupOrder> {
    let first_row = msg.first_row()?;
    Some((end_ts, msg.begin_ts(), msg.msg_type(), msg.id(), first_row))
}

/// Of a sequence of buffered (non-tick) messages: the highest `end_ts`, and whether the
/// [`DedupOrder`]s of those that have one rise strictly, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RunSummary {
    max_end: u64,
    first: Option<DedupOrder>,
    last: Option<DedupOrder>,
    rises: bool,
}

impl Default for RunSummary {
    /// The summary of no messages: a pack takes all of them.
    fn default() -> Self {
        RunSummary {
            max_end: 0,
            first: None,
            last: None,
            rises: true,
        }
    }
}

impl RunSummary {
    /// Notes `msg` (not a tick), whose `end_ts` is given, after those noted so far.
    #[inline]
    pub(crate) fn add(&mut self, msg: &TsMsg, end_ts: u64) {
        self.max_end = self.max_end.max(end_ts);
        if let Some(order) = dedup_order(msg, end_ts) {
            if self.last.is_some_and(|last| order <= last) {
                self.rises = false;
            }
            self.first.get_or_insert(order);
            self.last = Some(order);
        }
    }

    /// The summary of `msgs` (no ticks) with their `end_ts`s.
    pub(crate) fn of(msgs: &[TsMsg], ends: &[u64]) -> Self {
        let mut summary = RunSummary::default();
        for (msg, &end_ts) in msgs.iter().zip(ends) {
            summary.add(msg, end_ts);
        }
        summary
    }

    /// Notes the messages `next` summarises, after those noted so far.
    pub(crate) fn append(&mut self, next: &RunSummary) {
        self.max_end = self.max_end.max(next.max_end);
        if let (Some(last), Some(first)) = (self.last, next.first) {
            if first <= last {
                self.rises = false;
            }
        }
        self.rises &= next.rises;
        if self.first.is_none() {
            self.first = next.first;
        }
        if next.last.is_some() {
            self.last = next.last;
        }
    }

    /// Whether a pack cut at `watermark` takes every message summarised and drops none as a
    /// duplicate: all are at or below it, and their orders rise strictly (the usual case: ids
    /// and timestamps grow), so no two share a key.
    #[inline]
    pub(crate) fn takes_all(&self, watermark: u64) -> bool {
        self.max_end <= watermark && self.rises
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::{MsgBase, MsgBody};

    /// The cut's check as it was, reading every message: the reference.
    fn takes_all_by_reading(msgs: &[TsMsg], ends: &[u64], watermark: u64) -> bool {
        let mut last: Option<DedupOrder> = None;
        for (msg, &end_ts) in msgs.iter().zip(ends) {
            if end_ts > watermark {
                return false;
            }
            if let Some(order) = dedup_order(msg, end_ts) {
                if last.is_some_and(|l| order <= l) {
                    return false;
                }
                last = Some(order);
            }
        }
        true
    }

    /// An insert with id `id` at `ts`, or (`other`) a message never de-duplicated.
    fn message(id: i64, ts: u64, other: bool) -> TsMsg {
        if other {
            return TsMsg::new(MsgBody::Unknown(crate::msg::CustomMsg {
                base: MsgBase::new(9999, id, ts),
                payload: Default::default(),
            }));
        }
        crate::testkit::insert(id, ts, 0)
    }

    #[test]
    fn rising_runs_are_taken_whole_and_a_repeat_anywhere_is_not() {
        let msgs: Vec<TsMsg> = (1..=6).map(|i| message(i, i as u64 * 10, false)).collect();
        let ends: Vec<u64> = (1..=6).map(|i| i * 10).collect();
        let mut joined = RunSummary::of(&msgs[..3], &ends[..3]);
        joined.append(&RunSummary::of(&msgs[3..], &ends[3..]));
        assert_eq!(joined, RunSummary::of(&msgs, &ends));
        assert!(joined.takes_all(60) && !joined.takes_all(59));
        // An earlier message again, or the last one again (a redelivery), after the last: the
        // junction of two runs does not rise.
        for again in [0, 5] {
            let mut repeated = joined;
            repeated.append(&RunSummary::of(&msgs[again..=again], &ends[again..=again]));
            assert!(!repeated.takes_all(u64::MAX), "message {again} repeated");
        }
        assert!(
            RunSummary::default().takes_all(0),
            "nothing buffered: all taken"
        );
    }

    proptest::proptest! {
        /// However the messages arrive (one by one or in runs, joined in any split), the
        /// summary answers as reading every message did.
        #[test]
        fn answers_as_reading_every_message(
            specs in proptest::collection::vec((0i64..3, 0u64..4, proptest::bool::weighted(0.2)), 0..24),
            cuts in proptest::collection::vec(0usize..24, 0..4),
            watermark in 0u64..90,
        ) {
            let msgs: Vec<TsMsg> = specs.iter().map(|&(id, ts, other)| message(id, ts * 10, other)).collect();
            let ends: Vec<u64> = specs.iter().map(|&(_, ts, _)| ts * 10 + 5).collect();
            let expected = takes_all_by_reading(&msgs, &ends, watermark);
            let mut one_by_one = RunSummary::default();
            for (msg, &end) in msgs.iter().zip(&ends) {
                one_by_one.add(msg, end);
            }
            proptest::prop_assert_eq!(one_by_one.takes_all(watermark), expected);
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(msgs.len())).collect();
            cuts.push(0);
            cuts.push(msgs.len());
            cuts.sort_unstable();
            let mut joined = RunSummary::default();
            for pair in cuts.windows(2) {
                joined.append(&RunSummary::of(&msgs[pair[0]..pair[1]], &ends[pair[0]..pair[1]]));
            }
            proptest::prop_assert_eq!(joined.takes_all(watermark), expected);
        }
    }
}
