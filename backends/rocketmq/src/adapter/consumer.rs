//! [`RocketMqConsumer`]: one subscription (consumer group) on one channel's queue.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use async_trait::async_trait;
use msgstream::mq::{
    Acker, Consumer, ConsumerOptions, Delivery, DeliveryEpoch, InitialPosition, Lease, Message,
    MessageId,
};
use msgstream::msg::SharedStr;
use msgstream::{Error, Result};

use super::client::Shared;
use super::staged::Staged;
use super::{broker_name, channel_error, checked_offset, id_of, offset_of, to_message};
use crate::consumer::{ConsumeFrom, ConsumerOptions as LiteOptions, LitePullConsumer};
use crate::{MessageQueue, BACKEND};

/// Process-wide delivery epochs: every consumer and every seek gets a new one.
static EPOCHS: AtomicU64 = AtomicU64::new(1);

/// A consumer of one subscription. It is assigned the channel's only queue; acks move the
/// group's offset cumulatively: an ack persists it before returning, a staged ack (a stream's
/// commit) at the acker's flush, and what is left at the periodic persist and on close.
/// It holds the subscription's lease until closed or dropped: subscriptions are exclusive per
/// client (RocketMQ cannot tell one process about another's consumers, so two processes
/// consuming one subscription are not detected).
pub struct RocketMqConsumer {
    shared: Arc<Shared>,
    subscription: String,
    acks: Arc<Acks>,
    buffer: VecDeque<Message>,
    lease: Lease,
    /// The record the queue stopped at (its id and what is wrong with it): every receive
    /// reports it until a seek moves past it.
    corrupt: Option<(MessageId, String)>,
}

/// What acking needs, shared by a consumer and its [`Acker`] handles.
pub(super) struct Acks {
    channel: SharedStr,
    queue: MessageQueue,
    lite: LitePullConsumer,
    epoch: DeliveryEpoch,
    /// The next offset to consume as acked so far (acks are cumulative: it never moves back,
    /// except by a seek).
    acked: AtomicI64,
    pub(super) closed: AtomicBool,
    /// This acker, for the client's list of ackers with staged acks.
    me: Weak<Acks>,
    staged: Arc<Staged>,
}

#[async_trait]
impl Acker for Acks {
    async fn ack(&self, message: &Message) -> Result<()> {
        self.record(message)?;
        // The mq contract: an ack that returned survives this process dying, so the offset goes
        // to the broker now, not at the next periodic persist. If that fails (a broker
        // restarting), the offset stays marked and the error says so; acking again, a flush or
        // the periodic persist sends it.
        self.persist().await
    }

    /// Moves the acked position in memory only: the next [`Acker::flush`] (of this or any
    /// acker of the same client) persists it, with one UPDATE_CONSUMER_OFFSET per queue
    /// however many acks were staged; until then the periodic persist may.
    async fn stage(&self, message: &Message) -> Result<()> {
        self.record(message)?;
        self.staged.add(self.me.clone());
        Ok(())
    }

    /// Persists what every acker of this client staged, one request per queue, all at once.
    async fn flush(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed("rocketmq consumer"));
        }
        self.staged.flush().await
    }
}

impl Acks {
    /// Checks that `message` may be acked here and moves the acked position past it (in memory).
    fn record(&self, message: &Message) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed("rocketmq consumer"));
        }
        if *message.topic != *self.channel {
            return Err(Error::InvalidArgument(format!(
                "message of channel {:?} acked on a consumer of {:?}",
                message.topic, self.channel
            )));
        }
        self.epoch.check(message)?;
        let next = offset_of(&message.id)? + 1;
        if self.acked.fetch_max(next, Ordering::AcqRel) < next {
            self.lite.update_offset(&self.queue, next)?;
        }
        Ok(())
    }

    /// Sends the queue's offset to the broker if it changed since it was last sent.
    pub(super) async fn persist(&self) -> Result<()> {
        match self.lite.persist_offset().await {
            Ok(()) => Ok(()),
            // The topic had a route when this consumer opened. While its broker restarts, the
            // name servers drop the broker and with it the route, until it registers again: a
            // missing route here is most likely that window, so the ack is worth making again.
            // (A deletion by another process looks the same from here: acks keep failing.)
            Err(crate::Error::TopicNotFound(topic)) => Err(Error::transient(
                BACKEND,
                format!(
                    "offset of topic {topic:?} not persisted: the topic has no route now (its broker may be restarting); the offset is kept and sent again by the next ack, flush or periodic persist"
                ),
            )),
            Err(e) => Err(e.into()),
        }
    }
}

/// The error of a seek whose offset could not be persisted: nothing moved.
fn seek_not_made(offset: i64, cause: crate::Error) -> Error {
    let message = format!(
        "seek to offset {offset} not made: persisting it failed ({cause}); the consumer reads on where it was"
    );
    if cause.is_transient() {
        Error::transient(BACKEND, message)
    } else {
        Error::backend(BACKEND, message)
    }
}

impl RocketMqConsumer {
    /// A consumer of `options`; a new subscription at `InitialPosition::Timestamp` starts at
    /// `at_time`, the offset the client searched for it.
    pub(crate) async fn open(
        shared: Arc<Shared>,
        options: ConsumerOptions,
        at_time: Option<i64>,
    ) -> Result<Self> {
        let topic = broker_name("topic", &options.topic)?;
        let group = shared.group(&topic, &options.subscription)?;
        let lease = shared.leases.take(&options.topic, &options.subscription)?;
        let queue = shared.ensure_topic(&topic).await?;
        let wrapped_group = shared.namespace.wrap(&group);
        let admin = &shared.admin;
        // A new subscription starts where the options say, fixed now: its start is committed
        // at once, so a Latest subscription sees exactly the messages produced from here on.
        // Latest counts what this client's producers were acknowledged and the broker has not
        // indexed yet (its max offset alone lags a send by a moment, and a Latest subscription
        // made right after a send then received that message: seen once in CI).
        let acked = match admin.query_consumer_offset(&wrapped_group, &queue).await? {
            Some(offset) => offset,
            None => {
                let start = match options.initial_position {
                    InitialPosition::Earliest => admin.min_offset(&queue).await?,
                    InitialPosition::Latest => shared.max_offset(&queue).await?,
                    InitialPosition::Timestamp(_) => at_time.ok_or_else(|| {
                        Error::InvalidArgument(
                            "a subscription at a time starts at the offset searched for it".into(),
                        )
                    })?,
                };
                admin.create_group(&wrapped_group).await?;
                admin
                    .update_consumer_offset(&wrapped_group, &queue, start)
                    .await?;
                start
            }
        };
        let config = &shared.config;
        let batch = config.poll_batch.max(1);
        let lite_options = LiteOptions {
            consume_from: ConsumeFrom::First,
            pull_batch: batch,
            total_buffer: (options.buffer / batch as usize).max(2),
            persist_interval: Duration::from_millis(config.persist_interval_ms.max(1)),
            request_timeout: Duration::from_millis(config.send_timeout_ms.max(1)),
            max_message_bytes: config.max_message_bytes,
            ..LiteOptions::new(group)
        };
        let lite = LitePullConsumer::new(admin, shared.namespace.clone(), lite_options)?;
        lite.assign(vec![queue.clone()])?;
        lite.start().await?;
        Ok(RocketMqConsumer {
            subscription: options.subscription.clone(),
            acks: Arc::new_cyclic(|me| Acks {
                channel: SharedStr::interned(&options.topic),
                queue,
                lite,
                epoch: DeliveryEpoch::new(EPOCHS.fetch_add(1, Ordering::Relaxed)),
                acked: AtomicI64::new(acked),
                closed: AtomicBool::new(false),
                me: me.clone(),
                staged: shared.staged.clone(),
            }),
            shared,
            buffer: VecDeque::new(),
            lease,
            corrupt: None,
        })
    }

    fn closed(&self) -> bool {
        self.acks.closed.load(Ordering::Acquire)
    }

    fn check_open(&self) -> Result<()> {
        if self.closed() {
            return Err(Error::Closed("rocketmq consumer"));
        }
        self.shared.check_open()
    }

    /// Persists the acked position now.
    pub async fn flush(&self) -> Result<()> {
        self.check_open()?;
        self.acks.persist().await
    }
}

#[async_trait]
impl Consumer for RocketMqConsumer {
    fn topic(&self) -> &str {
        &self.acks.channel
    }

    fn subscription(&self) -> &str {
        &self.subscription
    }

    async fn recv(&mut self) -> Result<Option<Message>> {
        Ok(self.recv_batch(1).await?.pop())
    }

    async fn recv_batch(&mut self, max: usize) -> Result<Vec<Message>> {
        let max = max.max(1);
        let mut closing = self.shared.closing.subscribe();
        loop {
            if self.closed() || *closing.borrow_and_update() {
                return Ok(Vec::new());
            }
            if !self.buffer.is_empty() {
                let n = max.min(self.buffer.len());
                return Ok(self.buffer.drain(..n).collect());
            }
            if let Some((id, detail)) = &self.corrupt {
                return Err(Error::Corrupt {
                    channel: self.acks.channel.to_string(),
                    id: id.clone(),
                    detail: detail.clone(),
                });
            }
            let polled = tokio::select! {
                polled = self.acks.lite.poll(Duration::from_secs(3600)) => polled,
                _ = closing.changed() => return Ok(Vec::new()),
            };
            match polled {
                Ok(Some(request)) => {
                    let delivery = Delivery {
                        epoch: self.acks.epoch.current(),
                    };
                    let channel = &self.acks.channel;
                    self.buffer.extend(
                        request
                            .messages
                            .iter()
                            .cloned()
                            .map(|m| to_message(channel, m, delivery)),
                    );
                }
                Ok(None) => {}
                Err(crate::Error::Closed(_)) => return Ok(Vec::new()),
                Err(crate::Error::CorruptRecord { offset, detail, .. }) => {
                    self.corrupt = Some((id_of(offset), detail));
                }
                Err(e) => return Err(channel_error(&self.acks.channel, e)),
            }
        }
    }

    async fn ack(&self, message: &Message) -> Result<()> {
        self.shared.check_open()?;
        self.acks.ack(message).await
    }

    fn acker(&self) -> Arc<dyn Acker> {
        self.acks.clone()
    }

    /// Atomic: the new offset is persisted first, and only once the broker took it does the
    /// consumer move. A failed seek leaves the consumer reading where it was; should the
    /// broker have stored the new offset before the failure (a lost answer), the old one is
    /// marked to be sent again by the next ack, flush or periodic persist.
    async fn seek(&mut self, id: &MessageId, inclusive: bool) -> Result<()> {
        self.check_open()?;
        let offset = checked_offset(
            &self.shared,
            &self.acks.channel,
            &self.acks.queue,
            id,
            inclusive,
        )
        .await?;
        let queue = &self.acks.queue;
        if let Err(e) = self.acks.lite.commit_offset(queue, offset).await {
            let acked = self.acks.acked.load(Ordering::Acquire);
            self.acks.lite.update_offset(queue, acked)?;
            return Err(seek_not_made(offset, e));
        }
        self.acks.lite.reposition(queue, offset)?;
        self.acks.acked.store(offset, Ordering::Release);
        self.buffer.clear();
        self.corrupt = None;
        self.acks
            .epoch
            .renew(EPOCHS.fetch_add(1, Ordering::Relaxed));
        Ok(())
    }

    async fn latest_message_id(&self) -> Result<Option<MessageId>> {
        self.check_open()?;
        let max = self.shared.max_offset(&self.acks.queue).await?;
        Ok((max > 0).then(|| id_of(max - 1)))
    }

    async fn close(&mut self) {
        if self.acks.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        self.buffer.clear();
        if let Err(e) = self.acks.lite.shutdown().await {
            tracing::warn!(error = %e, "persisting the rocketmq offset at close failed");
        }
        self.lease.release();
    }
}
