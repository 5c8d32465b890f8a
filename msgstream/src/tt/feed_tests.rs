//! The feed decisions, driven over a model of one channel's queue the way the driver reads it.

use std::collections::VecDeque;

use proptest::prelude::*;

use super::*;

/// A batch of the model: each message a tick or not.
fn shape(batch: &[bool]) -> Shape {
    let ticks = batch.iter().filter(|t| **t).count();
    let ends_with_tick = batch.last().copied().unwrap_or(false);
    Shape {
        msgs: batch.len(),
        one_run: ticks == 0 || ticks == 1 && ends_with_tick,
        ends_with_tick,
    }
}

/// What driving one channel came to.
struct Driven {
    /// Messages fed, in order.
    fed: Vec<bool>,
    /// Whether the driver waits at the cap with messages still queued.
    stuck: bool,
}

/// Drives the decisions over `log` cut into batches at `cuts`, as the driver does: a tick fed
/// cuts a pack (the model has one channel, so the pack takes everything held); `ended` says the
/// channel's end follows the log. Checks the promises of every decision on the way.
fn drive(log: &[bool], cuts: &[usize], max_held: usize, ended: bool) -> Driven {
    let mut bounds: Vec<usize> = cuts.iter().map(|c| c.min(&log.len()).to_owned()).collect();
    bounds.extend([0, log.len()]);
    bounds.sort_unstable();
    bounds.dedup();
    let mut queue: VecDeque<Vec<bool>> = bounds
        .windows(2)
        .map(|w| log[w[0]..w[1]].to_vec())
        .collect();
    let (mut held, mut fed) = (0usize, Vec::new());
    loop {
        let tick_or_end = ended || queue.iter().flatten().any(|t| *t);
        let channel = Channel {
            held,
            max_held,
            tick_or_end,
        };
        if channel.gate() == Gate::Capped {
            assert!(held >= max_held.max(1) && !tick_or_end);
            return Driven { fed, stuck: true };
        }
        let Some(mut batch) = queue.pop_front() else {
            return Driven { fed, stuck: false };
        };
        let feed = channel.feed(shape(&batch));
        let taken = match feed {
            Feed::FirstRun => {
                assert!(!shape(&batch).one_run);
                batch.iter().position(|t| *t).map_or(batch.len(), |i| i + 1)
            }
            Feed::Whole => batch.len(),
            Feed::Front(n) => {
                assert!(0 < n && n < batch.len(), "a split takes part of the batch");
                assert!(
                    !shape(&batch).ends_with_tick,
                    "a run is not cut off its tick"
                );
                n
            }
        };
        let rest = batch.split_off(taken);
        if !rest.is_empty() {
            queue.push_front(rest);
        }
        assert!(!batch.is_empty(), "every read feeds something");
        for tick in batch {
            fed.push(tick);
            held = if tick { 0 } else { held + 1 };
        }
        if !tick_or_end {
            assert!(
                held <= max_held.max(1),
                "held {held} above the cap {max_held}"
            );
        }
    }
}

proptest! {
    /// Whatever the batches and the cap, the channel's messages are fed in order, never above
    /// the cap unless a tick or the end was on its way, and the driver waits only at the cap
    /// with no tick queued and the channel not ended.
    #[test]
    fn feeds_in_order_within_the_cap(
        log in proptest::collection::vec(proptest::bool::weighted(0.15), 0..60),
        cuts in proptest::collection::vec(0usize..60, 0..8),
        max_held in 0usize..12,
        ended in any::<bool>(),
    ) {
        let driven = drive(&log, &cuts, max_held, ended);
        prop_assert_eq!(&driven.fed[..], &log[..driven.fed.len()]);
        if driven.stuck {
            prop_assert!(!ended);
            prop_assert!(!log[driven.fed.len()..].contains(&true), "a tick was queued");
        } else {
            prop_assert_eq!(driven.fed.len(), log.len());
        }
    }
}

#[test]
fn a_run_beyond_the_cap_is_cut_at_the_cap_unless_its_tick_is_queued() {
    let channel = Channel {
        held: 3,
        max_held: 5,
        tick_or_end: false,
    };
    let run = Shape {
        msgs: 4,
        one_run: true,
        ends_with_tick: false,
    };
    assert_eq!(channel.gate(), Gate::Read);
    assert_eq!(channel.feed(run), Feed::Front(2));
    let ticking = Channel {
        tick_or_end: true,
        ..channel
    };
    assert_eq!(ticking.feed(run), Feed::Whole);
    let closed_by_tick = Shape {
        ends_with_tick: true,
        ..run
    };
    assert_eq!(channel.feed(closed_by_tick), Feed::Whole);
    let several = Shape {
        one_run: false,
        ..run
    };
    assert_eq!(channel.feed(several), Feed::FirstRun);
    let full = Channel { held: 5, ..channel };
    assert_eq!(full.gate(), Gate::Capped);
    assert_eq!(
        Channel {
            tick_or_end: true,
            ..full
        }
        .gate(),
        Gate::Read
    );
}
