//! The contract checks of `msgstream::testkit`, once per backend (and per NSQ server mode). This
//! is the one place they run.

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

/// Every check: a partition's end offset (`/stats` `backend_depth`) bounds seeks and readers.
#[cfg(feature = "nsq")]
mod nsq_partitions {
    msgstream::contract_tests!(crate::harness::nsq_partitions);
}

/// Every check against a Youzan cluster (`cluster = true`): topics created through the
/// lookupd, channels in partition 1, which the second nsqd leads.
#[cfg(feature = "nsq")]
mod nsq_cluster {
    msgstream::contract_tests!(crate::harness::nsq_cluster);
}

/// Every check but three that need a *new* subscription to see messages published before it
/// existed: upstream nsqd gives a new channel only what is published after it exists (the
/// first channel of a topic excepted), so `earliest_and_latest`,
/// `deleted_subscription_starts_afresh` and `stream_ends_when_a_decoder_panics` cannot hold there;
/// `backends/nsq/tests/adapter.rs` pins down what happens instead. Seek, readers and latest id
/// are asserted `Unsupported` by the checks.
#[cfg(feature = "nsq")]
mod nsq_upstream {
    msgstream::contract_tests!(@each crate::harness::nsq_upstream;
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
        seek_failing_after_the_consumer_moved,
    );
}
