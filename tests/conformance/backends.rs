//! The contract checks of `msgstream::testkit`, once per backend (and per NSQ server mode). This
//! is the one place they run. A mode that cannot hold a check excludes it by name with the
//! reason (an ignored test); [`every_check_runs_or_is_excluded_with_a_reason`] holds every mode
//! to that, so a new check cannot be skipped by a list that forgot it.

mod memory {
    msgstream::contract_tests!(crate::harness::memory);
}

#[cfg(feature = "rocksmq")]
mod rocksmq {
    msgstream::contract_tests!(crate::harness::rocksmq);
}

/// rocksmq with `ack_group_ms`: acks written by a background thread, not by `ack`. Every check
/// holds as it does with immediate acks (within one process nothing acked is redelivered).
#[cfg(feature = "rocksmq")]
mod rocksmq_grouped_acks {
    msgstream::contract_tests!(crate::harness::rocksmq_grouped_acks);
}

#[cfg(feature = "rocketmq")]
mod rocketmq {
    msgstream::contract_tests!(crate::harness::rocketmq);
}

/// The checks of a server that gives a *new* channel only what is published after it exists
/// (upstream nsqd, a standalone Youzan nsqd): every check but the three that need a new
/// subscription to see earlier messages, which each such mode excludes with its own reason.
#[cfg(feature = "nsq")]
macro_rules! checks_without_backlog_for_new_channels {
    ($harness:path; $($except:tt)*) => {
        msgstream::contract_tests!(@each $harness;
            produce_consume_in_order, ack_and_redelivery, staged_acks, seek_inclusive_and_exclusive,
            readers,
            latest_message_id, bad_inputs, plain_stream_two_channels, marks_and_broadcast,
            plain_seek_to_stored_position, plain_latest_subscription, stream_bad_inputs,
            trace_context_round_trip, tt_issue_sequence_and_replays, tt_different_tick_timestamps,
            tt_three_channels_aligned, tt_replay_determinism, tt_replay_determinism_long_runs,
            tt_reports_garbage,
            exclusive_subscriptions, delete_subscription_and_topic, seek_outside_the_channel,
            repeated_channel_names,
            plain_commit_semantics, tt_commit_semantics, tt_caps_a_channel_without_ticks,
            tt_late_message_in_a_long_run,
            stream_interface_extras, plain_positions_carry_begin_ts,
            seek_failing_after_the_consumer_moved, seek_time_plain, seek_time_tt;
        except $($except)*
        );
    };
}

/// A standalone Youzan nsqd: no consume offsets (it refuses `virtual_queue:`, transcript Y8),
/// so seek, readers and latest id are asserted `Unsupported` by the checks; as upstream nsqd,
/// it gives earlier messages only to a topic's first channel (Y8 63).
#[cfg(feature = "nsq")]
mod nsq_partitions {
    checks_without_backlog_for_new_channels!(crate::harness::nsq_partitions;
        earliest_and_latest = "a standalone Youzan nsqd gives a new channel only what is \
            published after it exists (the topic's first channel excepted) and has no \
            virtual_queue:0 to start one at the beginning",
        deleted_subscription_starts_afresh = "a standalone Youzan nsqd: a channel made again \
            after its delete gets only what is published after it",
        stream_ends_when_a_decoder_panics = "a standalone Youzan nsqd: the check reads, with a \
            new subscription, messages published before it existed",
    );
}

/// Every check against a Youzan cluster (`cluster = true`): topics created through the
/// lookupd, channels in partition 1, which the second nsqd leads; a partition's end offset
/// (`/stats` `backend_depth`) bounds seeks and readers.
#[cfg(feature = "nsq")]
mod nsq_cluster {
    msgstream::contract_tests!(crate::harness::nsq_cluster);
}

/// Upstream nsqd: `backends/nsq/tests/adapter.rs` pins down what happens instead of the three
/// excluded checks. Seek, readers and latest id are asserted `Unsupported` by the checks.
#[cfg(feature = "nsq")]
mod nsq_upstream {
    checks_without_backlog_for_new_channels!(crate::harness::nsq_upstream;
        earliest_and_latest = "upstream nsqd gives a new channel only what is published after \
            it exists: an Earliest subscription made later misses the earlier messages",
        deleted_subscription_starts_afresh = "upstream nsqd: a channel made again after its \
            delete gets only what is published after it, not the topic's earliest message",
        stream_ends_when_a_decoder_panics = "upstream nsqd: the check reads, with a new \
            subscription, messages published before it existed",
    );
}

/// Each mode's checks: (mode, run, excluded with reasons).
type Mode = (
    &'static str,
    &'static [&'static str],
    &'static [(&'static str, &'static str)],
);

fn modes() -> Vec<Mode> {
    let mut modes: Vec<Mode> = vec![("memory", memory::RUN_CHECKS, memory::EXCLUDED_CHECKS)];
    #[cfg(feature = "rocksmq")]
    modes.extend([
        ("rocksmq", rocksmq::RUN_CHECKS, rocksmq::EXCLUDED_CHECKS),
        (
            "rocksmq_grouped_acks",
            rocksmq_grouped_acks::RUN_CHECKS,
            rocksmq_grouped_acks::EXCLUDED_CHECKS,
        ),
    ]);
    #[cfg(feature = "rocketmq")]
    modes.push(("rocketmq", rocketmq::RUN_CHECKS, rocketmq::EXCLUDED_CHECKS));
    #[cfg(feature = "nsq")]
    modes.extend([
        (
            "nsq_partitions",
            nsq_partitions::RUN_CHECKS,
            nsq_partitions::EXCLUDED_CHECKS,
        ),
        (
            "nsq_cluster",
            nsq_cluster::RUN_CHECKS,
            nsq_cluster::EXCLUDED_CHECKS,
        ),
        (
            "nsq_upstream",
            nsq_upstream::RUN_CHECKS,
            nsq_upstream::EXCLUDED_CHECKS,
        ),
    ]);
    modes
}

/// Every check of the testkit is run, or excluded with a reason, in every mode, once.
#[test]
fn every_check_runs_or_is_excluded_with_a_reason() {
    for (mode, run, excluded) in modes() {
        for check in msgstream::testkit::CHECKS {
            let runs = run.iter().filter(|c| *c == check).count();
            let skips = excluded.iter().filter(|(c, _)| c == check).count();
            assert_eq!(
                runs + skips,
                1,
                "{mode}: {check} is run {runs} times and excluded {skips} times"
            );
        }
        for (check, reason) in excluded {
            assert!(
                msgstream::testkit::CHECKS.contains(check),
                "{mode}: excludes {check}, which is not a check"
            );
            assert!(!reason.trim().is_empty(), "{mode}: {check} has no reason");
        }
    }
}
