//! The backend-independent contract suite (feature `testkit`).
//!
//! Every check is an `async fn(Arc<dyn Client>)` that panics on a broken promise, written once
//! and run against every backend (the iggy idea): the in-memory backend in this crate's tests,
//! each real backend in its own crate, and all of them in the facade's conformance suite. A
//! backend joins with [`contract_tests!`](crate::contract_tests):
//!
//! ```text
//! async fn harness() -> msgstream::testkit::Harness { /* start or open the backend */ }
//! msgstream::contract_tests!(harness);
//! ```
//! Checks create their own uniquely named channels, wait with timeouts rather than sleeps, and
//! assert `Error::Unsupported` for every capability the backend says it lacks.
#![allow(clippy::unwrap_used, missing_docs)]

mod contract_checks;
mod fault_checks;
pub mod faults;
pub mod metrics;
mod mq_checks;
mod stream_checks;
mod time_checks;
mod time_tt_checks;
mod tt_checks;

use std::any::Any;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub use contract_checks::*;
pub use fault_checks::*;
pub use mq_checks::*;
pub use stream_checks::*;
pub use time_checks::*;
pub use time_tt_checks::*;
pub use tt_checks::*;

use crate::mq::{Client, Consumer, Message, MessageId, ProducerMessage};
use crate::msg::{InsertRequest, MsgBase, MsgBody, MsgType, TsMsg};

/// A backend under test: its client plus whatever must live as long as it (temp dirs, servers).
pub struct Harness {
    client: Arc<dyn Client>,
    _keep: Box<dyn Any + Send + Sync>,
}

impl Harness {
    /// A harness keeping `keep` alive until it is dropped.
    pub fn new(client: Arc<dyn Client>, keep: impl Any + Send + Sync) -> Self {
        Harness {
            client,
            _keep: Box::new(keep),
        }
    }

    /// The client under test.
    pub fn client(&self) -> Arc<dyn Client> {
        self.client.clone()
    }
}

/// How long any single wait in a check may take before the check fails.
pub const WAIT: Duration = Duration::from_secs(30);

/// Awaits `fut`, failing the check with `what` if it takes longer than [`WAIT`].
pub async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    match tokio::time::timeout(WAIT, fut).await {
        Ok(value) => value,
        Err(_) => panic!("timed out after {WAIT:?} waiting for {what}"),
    }
}

/// Sends `n` messages to `topic` (payload `m<i>`, property `i` = `<i>`); returns their ids.
async fn send_n(client: &Arc<dyn Client>, topic: &str, n: usize) -> Vec<MessageId> {
    let producer = client.create_producer(topic).await.expect("producer");
    let mut ids = Vec::with_capacity(n);
    for i in 0..n {
        let mut msg = ProducerMessage::new(format!("m{i}").into_bytes());
        msg.properties.insert("i".into(), i.to_string());
        ids.push(producer.send(msg).await.expect("send"));
    }
    ids
}

/// The consumer's next message, within [`WAIT`].
async fn recv(consumer: &mut Box<dyn Consumer>) -> Message {
    within("a message", consumer.recv())
        .await
        .expect("recv")
        .expect("consumer open")
}

/// A channel name no other check (or earlier run against a shared broker) uses.
pub fn unique(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "{prefix}-{}-{}-{nanos}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// A one-row insert at `ts` with producer id `id` and hash key `key`.
pub fn insert(id: i64, ts: u64, key: u32) -> TsMsg {
    TsMsg::new(MsgBody::Insert(InsertRequest {
        base: Some(MsgBase::new(MsgType::Insert as i32, id, ts)),
        timestamps: [ts].into(),
        row_ids: [id].into(),
        num_rows: 1,
        ..Default::default()
    }))
    .with_hash_keys(vec![key])
}

/// The row id of a one-row insert (or the header id of anything else).
pub fn row_id(msg: &TsMsg) -> i64 {
    match msg.body() {
        MsgBody::Insert(m) => m.row_ids.first().copied().unwrap_or(-1),
        _ => msg.id(),
    }
}

/// Every contract check, by name: what a mode must run or exclude with a reason.
pub const CHECKS: &[&str] = crate::contract_tests!(@every [@names]);

/// Expands to one `#[tokio::test]` per contract check, each on a fresh harness from `$harness`
/// (an `async fn() -> Harness`). The calling crate needs `tokio` (with `macros`, `rt-multi-thread`).
///
/// `contract_tests!(@each harness; a, b; except c = "why", …)` runs the checks named, and
/// generates the excluded ones as ignored tests carrying their reason: `cargo test` lists them
/// as ignored, `cargo test -- --ignored` shows how they fail. Either form also defines
/// `RUN_CHECKS` and `EXCLUDED_CHECKS` in the calling module, so a test can hold every mode to
/// "each of [`CHECKS`] is run or excluded with a reason".
#[macro_export]
macro_rules! contract_tests {
    ($harness:path) => {
        $crate::contract_tests!(@every [@each $harness;]);
    };
    (@every [$($head:tt)*]) => {
        $crate::contract_tests! { $($head)*
            produce_consume_in_order,
            ack_and_redelivery,
            staged_acks,
            earliest_and_latest,
            seek_inclusive_and_exclusive,
            readers,
            latest_message_id,
            bad_inputs,
            plain_stream_two_channels,
            marks_and_broadcast,
            plain_seek_to_stored_position,
            plain_latest_subscription,
            stream_bad_inputs,
            trace_context_round_trip,
            tt_issue_sequence_and_replays,
            tt_different_tick_timestamps,
            tt_three_channels_aligned,
            tt_replay_determinism,
            tt_replay_determinism_long_runs,
            tt_reports_garbage,
            exclusive_subscriptions,
            delete_subscription_and_topic,
            deleted_subscription_starts_afresh,
            seek_outside_the_channel,
            repeated_channel_names,
            plain_commit_semantics,
            tt_commit_semantics,
            tt_caps_a_channel_without_ticks,
            tt_late_message_in_a_long_run,
            stream_ends_when_a_decoder_panics,
            stream_interface_extras,
            plain_positions_carry_begin_ts,
            seek_failing_after_the_consumer_moved,
            seek_time_plain,
            seek_time_tt,
        }
    };
    (@names $($check:ident),* $(,)?) => {
        &[$(stringify!($check)),*]
    };
    (@each $harness:path; $($check:ident),* $(,)? $(; except $($skip:ident = $reason:literal),* $(,)?)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $check() {
                let harness = $harness().await;
                $crate::testkit::$check(harness.client()).await;
            }
        )*
        $($(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            #[ignore = $reason]
            async fn $skip() {
                let harness = $harness().await;
                $crate::testkit::$skip(harness.client()).await;
            }
        )*)?
        /// The contract checks this module runs.
        pub(crate) const RUN_CHECKS: &[&str] = &[$(stringify!($check)),*];
        /// The contract checks this module does not run, each with why.
        pub(crate) const EXCLUDED_CHECKS: &[(&str, &str)] =
            &[$($((stringify!($skip), $reason)),*)?];
    };
}
