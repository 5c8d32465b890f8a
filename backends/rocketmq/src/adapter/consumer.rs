//! [`RocketMqConsumer`]: one subscription (consumer group) on one channel's queue.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use msgstream::mq::{Consumer, ConsumerOptions, Delivery, InitialPosition, Message, MessageId};
use msgstream::{Error, Result};

use super::client::Shared;
use super::{broker_name, id_of, offset_of, to_message};
use crate::consumer::{ConsumeFrom, ConsumerOptions as LiteOptions, LitePullConsumer};
use crate::MessageQueue;

/// Process-wide delivery epochs: every consumer and every seek gets a new one.
static EPOCHS: AtomicU64 = AtomicU64::new(1);

/// A consumer of one subscription. It is assigned the channel's only queue; acks move the
/// group's offset cumulatively, persisted on an interval, on close and by [`Self::flush`].
///
/// Subscriptions are exclusive per client: a second live consumer of the same subscription
/// through the same client is refused. RocketMQ cannot enforce this across processes (two
/// processes would both fetch the queue).
pub struct RocketMqConsumer {
    shared: Arc<Shared>,
    channel: String,
    subscription: String,
    topic: Arc<str>,
    lite: LitePullConsumer,
    queue: MessageQueue,
    buffer: VecDeque<Message>,
    epoch: u64,
    acked: AtomicI64,
    closed: bool,
}

impl RocketMqConsumer {
    pub(crate) async fn open(shared: Arc<Shared>, options: ConsumerOptions) -> Result<Self> {
        let topic = broker_name("topic", &options.topic)?;
        let group = shared.group(&options.subscription)?;
        shared.claim(&options.topic, &options.subscription)?;
        match Self::start(shared.clone(), &options, &topic, &group).await {
            Ok(consumer) => Ok(consumer),
            Err(e) => {
                shared.release(&options.topic, &options.subscription);
                Err(e)
            }
        }
    }

    async fn start(
        shared: Arc<Shared>,
        options: &ConsumerOptions,
        topic: &str,
        group: &str,
    ) -> Result<Self> {
        let queue = shared.ensure_topic(topic).await?;
        let wrapped_group = shared.namespace.wrap(group);
        let admin = &shared.admin;
        // A new subscription starts where the options say, fixed now: its start is committed
        // at once, so a Latest subscription sees exactly the messages produced from here on.
        let acked = match admin.query_consumer_offset(&wrapped_group, &queue).await? {
            Some(offset) => offset,
            None => {
                let start = match options.initial_position {
                    InitialPosition::Earliest => admin.min_offset(&queue).await?,
                    InitialPosition::Latest => admin.max_offset(&queue).await?,
                };
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
            ..LiteOptions::new(group)
        };
        let lite = LitePullConsumer::new(admin, shared.namespace.clone(), lite_options)?;
        lite.assign(vec![queue.clone()])?;
        lite.start().await?;
        Ok(RocketMqConsumer {
            channel: options.topic.clone(),
            subscription: options.subscription.clone(),
            topic: Arc::from(options.topic.as_str()),
            shared,
            lite,
            queue,
            buffer: VecDeque::new(),
            epoch: EPOCHS.fetch_add(1, Ordering::Relaxed),
            acked: AtomicI64::new(acked),
            closed: false,
        })
    }

    fn check_open(&self) -> Result<()> {
        if self.closed {
            return Err(Error::Closed("rocketmq consumer"));
        }
        self.shared.check_open()
    }

    /// Persists the acked position now.
    pub async fn flush(&self) -> Result<()> {
        self.check_open()?;
        Ok(self.lite.persist_offset().await?)
    }

    async fn shut(&mut self) {
        if self.closed {
            return;
        }
        self.closed = true;
        self.buffer.clear();
        if let Err(e) = self.lite.shutdown().await {
            tracing::warn!(error = %e, "persisting the rocketmq offset at close failed");
        }
        self.shared.release(&self.channel, &self.subscription);
    }
}

#[async_trait]
impl Consumer for RocketMqConsumer {
    fn topic(&self) -> &str {
        &self.channel
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
            if self.closed || *closing.borrow_and_update() {
                return Ok(Vec::new());
            }
            if !self.buffer.is_empty() {
                let n = max.min(self.buffer.len());
                return Ok(self.buffer.drain(..n).collect());
            }
            let polled = tokio::select! {
                polled = self.lite.poll(Duration::from_secs(3600)) => polled,
                _ = closing.changed() => return Ok(Vec::new()),
            };
            match polled {
                Ok(Some(request)) => {
                    let delivery = Delivery { epoch: self.epoch };
                    let topic = &self.topic;
                    self.buffer.extend(
                        request
                            .messages
                            .iter()
                            .cloned()
                            .map(|m| to_message(topic, m, delivery)),
                    );
                }
                Ok(None) => {}
                Err(crate::Error::Closed(_)) => return Ok(Vec::new()),
                Err(e) => return Err(e.into()),
            }
        }
    }

    async fn ack(&self, message: &Message) -> Result<()> {
        self.check_open()?;
        if *message.topic != *self.channel {
            return Err(Error::InvalidArgument(format!(
                "message of channel {:?} acked on a consumer of {:?}",
                message.topic, self.channel
            )));
        }
        if message.delivery.epoch != self.epoch {
            return Err(Error::StaleDelivery(format!(
                "message {:?} was delivered in epoch {}, the consumer is at epoch {} (it seeked or was re-created since)",
                message.id, message.delivery.epoch, self.epoch
            )));
        }
        let next = offset_of(&message.id)? + 1;
        if self.acked.fetch_max(next, Ordering::AcqRel) < next {
            self.lite.update_offset(&self.queue, next)?;
        }
        Ok(())
    }

    async fn seek(&mut self, id: &MessageId, inclusive: bool) -> Result<()> {
        self.check_open()?;
        let offset = offset_of(id)? + i64::from(!inclusive);
        self.lite.seek(&self.queue, offset).await?;
        self.lite.persist_offset().await?;
        self.acked.store(offset, Ordering::Release);
        self.buffer.clear();
        self.epoch = EPOCHS.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    async fn latest_message_id(&self) -> Result<Option<MessageId>> {
        self.check_open()?;
        let max = self.shared.admin.max_offset(&self.queue).await?;
        Ok((max > 0).then(|| id_of(max - 1)))
    }

    async fn close(&mut self) {
        self.shut().await;
    }
}

impl Drop for RocketMqConsumer {
    fn drop(&mut self) {
        if !self.closed {
            self.shared.release(&self.channel, &self.subscription);
        }
    }
}
