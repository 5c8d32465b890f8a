//! [`LitePullConsumer`]: the public face of the consumer.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use msgstream::sync::lock;
use tokio::sync::{mpsc, watch, Notify};

use super::fetch::Fetched;
use super::pull::{pull, PullOutcome, PullRequest};
use super::{ConsumeRequest, ConsumerOptions, Inner, Mode, Selector, State};
use crate::admin::Admin;
use crate::error::{Error, Result};
use crate::namespace::Namespace;
use crate::protocol::route::MessageQueue;
use crate::remoting::{self, Remoting, ServerRequest};

/// How a polled batch was processed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumeResult {
    /// Done: the queue's offset moves past the batch.
    Success,
    /// Redeliver later through the group's retry topic (or the dead-letter queue after
    /// `max_reconsume_times`); the queue's offset moves past the batch too.
    RetryLater,
}

/// A lite pull consumer (see the module docs of [`crate::consumer`]).
pub struct LitePullConsumer {
    pub(super) inner: Arc<Inner>,
    batches: tokio::sync::Mutex<mpsc::Receiver<Fetched>>,
    notices: Mutex<Option<mpsc::UnboundedReceiver<ServerRequest>>>,
}

impl LitePullConsumer {
    /// A consumer using `shared`'s name servers. It opens connections of its own, so that the
    /// brokers' notifications about its group reach it.
    pub fn new(shared: &Admin, namespace: Namespace, options: ConsumerOptions) -> Result<Self> {
        if options.group.is_empty() {
            return Err(Error::InvalidArgument("consumer group is empty".into()));
        }
        let (notices_tx, notices) = mpsc::unbounded_channel();
        let (batches_tx, batches) = mpsc::channel(options.total_buffer.max(1));
        let remoting = Remoting::new(shared.remoting.options().clone(), Some(notices_tx));
        let client_id = remoting::client_id("consumer");
        let admin = Admin {
            remoting: Arc::new(remoting),
            namesrv: shared.namesrv.clone(),
            timeout: options.request_timeout,
            offset_updates: shared.offset_updates.clone(),
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        let inner = Inner {
            admin,
            group: namespace.wrap(&options.group),
            client_id,
            sub_version: now,
            namespace,
            options,
            offsets: Default::default(),
            state: Mutex::new(State {
                mode: Mode::Unset,
                subscriptions: BTreeMap::new(),
                assigned: Vec::new(),
                queues: BTreeMap::new(),
                paused: Default::default(),
                started: false,
                next_generation: 0,
                round_robin: 0,
                background: Vec::new(),
            }),
            batches: batches_tx,
            closed: Default::default(),
            rebalance_now: Notify::new(),
            shutdown: watch::channel(false).0,
        };
        Ok(LitePullConsumer {
            inner: Arc::new(inner),
            batches: tokio::sync::Mutex::new(batches),
            notices: Mutex::new(Some(notices)),
        })
    }

    pub(super) fn check_open(&self) -> Result<()> {
        if self.inner.closed.load(Ordering::Acquire) {
            return Err(Error::Closed("rocketmq consumer"));
        }
        Ok(())
    }

    fn set_mode(&self, mode: Mode) -> Result<std::sync::MutexGuard<'_, State>> {
        self.check_open()?;
        let mut state = self.inner.state();
        if state.started {
            return Err(Error::IllegalState(
                "call subscribe/assign before start".into(),
            ));
        }
        if state.mode != Mode::Unset && state.mode != mode {
            return Err(Error::IllegalState(
                "subscribe and assign are mutually exclusive".into(),
            ));
        }
        state.mode = mode;
        Ok(state)
    }

    /// Subscribes `topic` (application-side name) with `selector`; the group's retry topic is
    /// subscribed too, so retried messages come back through `poll`.
    pub fn subscribe(&self, topic: &str, selector: Selector) -> Result<()> {
        let mut state = self.set_mode(Mode::Subscribe)?;
        state
            .subscriptions
            .insert(self.inner.namespace.wrap(topic), selector);
        let retry = self.inner.namespace.retry_topic(&self.inner.options.group);
        state.subscriptions.insert(retry, Selector::All);
        Ok(())
    }

    /// Consumes exactly `queues` (broker-side, e.g. from [`LitePullConsumer::fetch_queues`]).
    pub fn assign(&self, queues: Vec<MessageQueue>) -> Result<()> {
        let mut state = self.set_mode(Mode::Assign)?;
        state.assigned = queues;
        Ok(())
    }

    /// The readable queues of `topic` (application-side name).
    pub async fn fetch_queues(&self, topic: &str) -> Result<Vec<MessageQueue>> {
        let route = self
            .inner
            .admin
            .namesrv
            .refresh(&self.inner.namespace.wrap(topic))
            .await?;
        Ok(route.read_queues.clone())
    }

    /// Starts fetching. Fails clearly when a subscribed topic has no route.
    pub async fn start(&self) -> Result<()> {
        self.check_open()?;
        let (mode, topics, assigned) = {
            let state = self.inner.state();
            if state.started {
                return Err(Error::IllegalState("consumer already started".into()));
            }
            (
                state.mode,
                state.subscriptions.keys().cloned().collect::<Vec<_>>(),
                state.assigned.clone(),
            )
        };
        let retry = crate::namespace::RETRY_PREFIX;
        match mode {
            Mode::Unset => {
                return Err(Error::IllegalState(
                    "subscribe or assign before start".into(),
                ))
            }
            Mode::Subscribe => {
                for topic in topics.iter().filter(|t| !t.starts_with(retry)) {
                    self.inner.admin.namesrv.refresh(topic).await?;
                }
                self.inner.heartbeat().await?;
            }
            Mode::Assign => {
                for mq in &assigned {
                    self.inner.admin.broker_of(mq).await?;
                }
            }
        }
        let fetching = match mode {
            Mode::Subscribe => self.inner.rebalance().await,
            _ => self.start_assigned(&assigned).await,
        };
        if let Err(e) = fetching {
            // Nothing half-started stays behind: start can be called again.
            self.inner.abort_all();
            return Err(e);
        }
        self.inner.state().started = true;
        let notices = lock(&self.notices).take();
        let tasks = super::background::spawn(&self.inner, mode, notices);
        self.inner.state().background.extend(tasks);
        Ok(())
    }

    async fn start_assigned(&self, queues: &[MessageQueue]) -> Result<()> {
        for mq in queues {
            self.inner.start_queue(mq).await?;
        }
        Ok(())
    }

    /// The next buffered batch of one queue, waiting up to `timeout`; `None` if nothing new came.
    /// A queue whose next record cannot be decoded ([`Error::CorruptRecord`]) stops fetching and
    /// reports it here once; a seek of that queue starts it again.
    pub async fn poll(&self, timeout: Duration) -> Result<Option<ConsumeRequest>> {
        self.check_open()?;
        if !self.inner.state().started {
            return Err(Error::IllegalState("poll before start".into()));
        }
        let deadline = tokio::time::Instant::now() + timeout;
        let mut shutdown = self.inner.shutdown.subscribe();
        let mut batches = self.batches.lock().await;
        loop {
            let next = tokio::select! {
                next = tokio::time::timeout_at(deadline, batches.recv()) => next,
                _ = shutdown.wait_for(|closed| *closed) => return Err(Error::Closed("rocketmq consumer")),
            };
            match next {
                Err(_) => return Ok(None),
                Ok(None) => return Err(Error::Closed("rocketmq consumer")),
                Ok(Some(Fetched::Batch(request))) if self.inner.is_current(&request) => {
                    return Ok(Some(request))
                }
                Ok(Some(Fetched::Failed {
                    queue,
                    generation,
                    error,
                })) if self.inner.is_current_fetch(&queue, generation) => return Err(error),
                Ok(Some(_stale)) => {}
            }
        }
    }

    /// Acknowledges a polled batch: the queue's in-memory offset moves past it; `RetryLater`
    /// first sends every message back for redelivery.
    pub async fn ack(&self, request: &ConsumeRequest, result: ConsumeResult) -> Result<()> {
        self.check_open()?;
        let Some(last) = request.messages.last() else {
            return Ok(());
        };
        if result == ConsumeResult::RetryLater {
            for message in &request.messages {
                self.inner.send_back(&request.queue, message).await?;
            }
        }
        if self.inner.is_current(request) {
            self.inner
                .offsets
                .advance(&request.queue, last.queue_offset + 1);
        }
        Ok(())
    }

    /// Up to `max` messages from the next assigned queue in turn, starting at its current
    /// offset; moves no offset.
    pub async fn pull(&self, max: u32) -> Result<(MessageQueue, PullOutcome)> {
        self.check_open()?;
        let mq = {
            let mut state = self.inner.state();
            let queues: Vec<MessageQueue> = state.queues.keys().cloned().collect();
            if queues.is_empty() {
                return Err(Error::IllegalState(
                    "no queue is assigned to this consumer".into(),
                ));
            }
            state.round_robin = state.round_robin.wrapping_add(1);
            queues[state.round_robin % queues.len()].clone()
        };
        let offset = self.inner.start_offset(&mq).await?;
        let outcome = self.pull_from(&mq, offset, max).await?;
        Ok((mq, outcome))
    }

    /// Up to `max` messages of `mq` from `offset`, without waiting and without offset
    /// bookkeeping.
    pub async fn pull_from(&self, mq: &MessageQueue, offset: i64, max: u32) -> Result<PullOutcome> {
        self.check_open()?;
        let expression = self.inner.selector_of(&mq.topic).expression();
        let request = PullRequest {
            group: &self.inner.group,
            queue: mq,
            offset,
            max,
            expression: &expression,
            suspend: Duration::ZERO,
            max_body: self.inner.options.max_message_bytes,
        };
        let mut outcome = pull(&self.inner.admin, &request).await?;
        outcome.messages = outcome
            .messages
            .into_iter()
            .map(|m| self.inner.to_application(m))
            .collect();
        Ok(outcome)
    }

    /// The queues being fetched now.
    pub fn assignment(&self) -> Vec<MessageQueue> {
        self.inner.state().queues.keys().cloned().collect()
    }

    /// The client id the brokers know this consumer by.
    pub fn client_id(&self) -> &str {
        &self.inner.client_id
    }

    /// Asks for a rebalance now (subscribe mode).
    pub fn request_rebalance(&self) {
        self.inner.rebalance_now.notify_one();
    }

    /// Stops fetching, persists offsets and leaves the group. Later calls return `Closed`.
    pub async fn shutdown(&self) -> Result<()> {
        if self.inner.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.inner.shutdown.send_replace(true);
        let mode = self.inner.abort_all();
        let persisted = self
            .inner
            .offsets
            .persist(&self.inner.admin, &self.inner.group)
            .await;
        if mode == Mode::Subscribe {
            if let Err(e) = self.inner.unregister().await {
                tracing::debug!(error = %e, "rocketmq unregister failed");
            }
        }
        self.inner.admin.remoting.close();
        persisted
    }
}

impl Inner {
    /// Aborts every task; returns the mode.
    pub(super) fn abort_all(&self) -> Mode {
        let mut state = self.state();
        for (_, task) in std::mem::take(&mut state.queues) {
            task.handle.abort();
        }
        for task in state.background.drain(..) {
            task.abort();
        }
        state.mode
    }
}

impl Drop for LitePullConsumer {
    fn drop(&mut self) {
        self.inner.closed.store(true, Ordering::Release);
        self.inner.shutdown.send_replace(true);
        self.inner.abort_all();
    }
}
