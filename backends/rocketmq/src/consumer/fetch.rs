//! The background fetch task of one queue: long-polls the broker and hands batches to `poll`
//! through a bounded channel, within the per-queue and total buffer limits.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

use super::background::recovered;
use super::pull::{pull, PullRequest};
use super::Inner;
use crate::error::Error;
use crate::protocol::route::MessageQueue;
use crate::protocol::stored::StoredMessage;
use crate::remoting::backoff::{log_failure, Streak};

const MIN_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// One queue's batch, as `poll` returns it.
#[derive(Debug)]
pub struct ConsumeRequest {
    /// The queue (broker-side names).
    pub queue: MessageQueue,
    /// Messages in queue order; `topic` is the application-side topic (a retried message
    /// carries its original topic).
    pub messages: Vec<StoredMessage>,
    pub(super) generation: u64,
    pub(super) _permit: OwnedSemaphorePermit,
}

/// What a fetch task hands to `poll`.
pub(super) enum Fetched {
    /// Messages.
    Batch(ConsumeRequest),
    /// The queue cannot go on: the record at its position cannot be decoded. The task stopped.
    Failed {
        queue: MessageQueue,
        generation: u64,
        error: Error,
    },
}

/// Where a fetch task starts and what can stop or pause it.
pub(super) struct FetchTask {
    pub queue: MessageQueue,
    pub offset: i64,
    pub generation: u64,
    pub paused: watch::Receiver<bool>,
}

pub(super) async fn run(inner: Arc<Inner>, mut task: FetchTask) {
    let permits = Arc::new(Semaphore::new(inner.options.queue_buffer.max(1)));
    let selector = inner.selector_of(&task.queue.topic);
    let expression = selector.expression();
    let mut backoff = MIN_BACKOFF;
    let mut failures = Streak::default();
    loop {
        if !wait_unpaused(&mut task.paused).await {
            return;
        }
        let Ok(permit) = permits.clone().acquire_owned().await else {
            return;
        };
        let request = PullRequest {
            group: &inner.group,
            queue: &task.queue,
            offset: task.offset,
            max: inner.options.pull_batch,
            expression: &expression,
            suspend: inner.options.long_poll,
            max_body: inner.options.max_message_bytes,
        };
        match pull(&inner.admin, &request).await {
            Ok(outcome) if outcome.offset_moved && outcome.next_offset < task.offset => {
                // The queue ends before our offset: the broker has not indexed the newest
                // messages yet (a seek to a just-acknowledged id). Going back would deliver
                // messages before the seek point, so wait for the index to catch up.
                drop(permit);
                tokio::time::sleep(MIN_BACKOFF).await;
            }
            Ok(outcome) => {
                backoff = MIN_BACKOFF;
                recovered(&mut failures, "rocketmq pull", &inner.group);
                task.offset = outcome.next_offset;
                let messages: Vec<StoredMessage> = outcome
                    .messages
                    .into_iter()
                    .filter(|m| selector.matches(m.tag()))
                    .map(|m| inner.to_application(m))
                    .collect();
                // A pull in flight when the queue was paused holds its batch until resumed.
                if messages.is_empty() || !wait_unpaused(&mut task.paused).await {
                    continue;
                }
                let request = ConsumeRequest {
                    queue: task.queue.clone(),
                    messages,
                    generation: task.generation,
                    _permit: permit,
                };
                if inner.batches.send(Fetched::Batch(request)).await.is_err() {
                    return;
                }
            }
            Err(error @ Error::CorruptRecord { .. }) => {
                // The broker returns the same bytes on every pull: retrying would freeze the
                // queue for good. The consumer is told, and fetching stops until a seek.
                tracing::warn!(queue = %task.queue, %error, "rocketmq queue stopped at a record it cannot decode");
                let failed = Fetched::Failed {
                    queue: task.queue.clone(),
                    generation: task.generation,
                    error,
                };
                drop(permit);
                let _ = inner.batches.send(failed).await;
                return;
            }
            Err(e) => {
                drop(permit);
                if inner.closed.load(Ordering::Acquire) {
                    return;
                }
                log_failure!(failures, "rocketmq pull (retried with backoff)", group = %inner.group, queue = %task.queue, error = %e);
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

/// Waits while the queue is paused; false if the consumer is gone.
async fn wait_unpaused(paused: &mut watch::Receiver<bool>) -> bool {
    while *paused.borrow_and_update() {
        if paused.changed().await.is_err() {
            return false;
        }
    }
    true
}
