//! The lite pull consumer: subscribe (group rebalance) or assign (manual queues), background
//! long-polling per queue, `poll` for one queue's batch, acks, offsets, seeks.

mod allocate;
mod background;
mod fetch;
mod group;
mod lite;
mod offsets;
mod options;
mod positions;
mod pull;
mod retry;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use msgstream::sync::lock;
use tokio::sync::{mpsc, watch, Notify};
use tokio::task::JoinHandle;

pub use allocate::allocate_average;
pub use fetch::ConsumeRequest;
pub use lite::{ConsumeResult, LitePullConsumer};
pub use options::{ConsumeFrom, ConsumerOptions, Selector};
pub use pull::{pull, PullOutcome, PullRequest};

use crate::admin::Admin;
use crate::error::Result;
use crate::namespace::Namespace;
use crate::protocol::properties;
use crate::protocol::route::MessageQueue;
use crate::protocol::stored::StoredMessage;
use offsets::OffsetStore;

/// How the consumer gets its queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Neither `subscribe` nor `assign` was called yet.
    Unset,
    /// Group rebalancing over subscribed topics.
    Subscribe,
    /// Exactly the assigned queues.
    Assign,
}

struct QueueTask {
    generation: u64,
    paused: watch::Sender<bool>,
    handle: JoinHandle<()>,
}

struct State {
    mode: Mode,
    /// Broker-side topic → selector (subscribe mode; the retry topic included).
    subscriptions: BTreeMap<String, Selector>,
    /// Queues given to `assign`.
    assigned: Vec<MessageQueue>,
    /// Queues being fetched now.
    queues: BTreeMap<MessageQueue, QueueTask>,
    paused: BTreeSet<MessageQueue>,
    started: bool,
    next_generation: u64,
    round_robin: usize,
    background: Vec<JoinHandle<()>>,
}

/// What the consumer's tasks share.
struct Inner {
    admin: Admin,
    options: ConsumerOptions,
    /// Broker-side group name.
    group: String,
    namespace: Namespace,
    client_id: String,
    sub_version: u128,
    offsets: OffsetStore,
    state: Mutex<State>,
    batches: mpsc::Sender<fetch::Fetched>,
    closed: AtomicBool,
    rebalance_now: Notify,
    shutdown: watch::Sender<bool>,
}

impl Inner {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        lock(&self.state)
    }

    fn selector_of(&self, topic: &str) -> Selector {
        self.state()
            .subscriptions
            .get(topic)
            .cloned()
            .unwrap_or(Selector::All)
    }

    /// Rewrites a stored message's topic to the application-side name (a retried message
    /// gets its original topic back).
    fn to_application(&self, mut message: StoredMessage) -> StoredMessage {
        let broker_topic = message
            .properties
            .get(properties::RETRY_TOPIC)
            .cloned()
            .unwrap_or_else(|| message.topic.clone());
        message.topic = self
            .namespace
            .unwrap(&broker_topic)
            .unwrap_or(&broker_topic)
            .to_owned();
        message
    }

    /// Whether `request` still belongs to the queue's current fetch (not from before a seek or
    /// a reassignment).
    fn is_current(&self, request: &ConsumeRequest) -> bool {
        self.is_current_fetch(&request.queue, request.generation)
    }

    /// Whether `generation` is the current fetch of `queue`.
    fn is_current_fetch(&self, queue: &MessageQueue, generation: u64) -> bool {
        self.state()
            .queues
            .get(queue)
            .is_some_and(|q| q.generation == generation)
    }

    /// Where fetching of `mq` starts: the in-memory offset, the group's committed offset, or
    /// consume-from-where for a group that never committed one.
    async fn start_offset(&self, mq: &MessageQueue) -> Result<i64> {
        if let Some(offset) = self.offsets.get(mq) {
            return Ok(offset);
        }
        let offset = match self.admin.query_consumer_offset(&self.group, mq).await? {
            Some(offset) => offset,
            None if mq.topic.starts_with(crate::namespace::RETRY_PREFIX) => {
                self.admin.min_offset(mq).await?
            }
            None => match self.options.consume_from {
                ConsumeFrom::First => self.admin.min_offset(mq).await?,
                ConsumeFrom::Last => self.admin.max_offset(mq).await?,
                ConsumeFrom::Timestamp(ts) => self.admin.search_offset(mq, ts).await?,
            },
        };
        self.offsets.set(mq, offset, false);
        Ok(offset)
    }

    /// Starts (or restarts, discarding what it buffered) the fetch task of `mq`.
    async fn start_queue(self: &Arc<Self>, mq: &MessageQueue) -> Result<()> {
        let offset = self.start_offset(mq).await?;
        self.spawn_fetch(mq, offset);
        Ok(())
    }

    fn spawn_fetch(self: &Arc<Self>, mq: &MessageQueue, offset: i64) {
        let mut state = self.state();
        if let Some(old) = state.queues.remove(mq) {
            old.handle.abort();
        }
        state.next_generation += 1;
        let generation = state.next_generation;
        let (paused, paused_rx) = watch::channel(state.paused.contains(mq));
        let task = fetch::FetchTask {
            queue: mq.clone(),
            offset,
            generation,
            paused: paused_rx,
        };
        let handle = tokio::spawn(fetch::run(self.clone(), task));
        state.queues.insert(
            mq.clone(),
            QueueTask {
                generation,
                paused,
                handle,
            },
        );
    }

    fn stop_queue(&self, mq: &MessageQueue) {
        if let Some(task) = self.state().queues.remove(mq) {
            task.handle.abort();
        }
    }
}
