//! [`RocksmqConsumer`]: one consumer of a durable subscription (consumer group).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use msgstream::mq::{Acker, Consumer, Delivery, DeliveryEpoch, Lease, Message, MessageId};
use msgstream::msg::SharedStr;
use msgstream::{Error, Result};

use super::{checked_position, engine_id, to_message};
use crate::topics::TopicState;
use crate::{Rocksmq, Subscription};

/// A consumer: prefetches up to `buffer` messages at a time from the group's cursor.
///
/// Delivery is pulled, not pushed: `recv` reads from RocksDB when its buffer is empty and waits
/// on the writer's notification when there is nothing to read. So a slow caller never stalls
/// delivery for later (Milvus bug #34045 cannot happen: there is no output channel to fill), and
/// `recv` is cancel-safe: the buffer is only filled after a completed read.
///
/// Every consumer gets a process-unique delivery epoch, renewed on each seek; acking a message
/// carrying another epoch (from before a seek, or from another consumer) is
/// `Error::StaleDelivery`. It holds the subscription's lease (subscriptions are exclusive)
/// until closed or dropped. `ack` writes the position as the queue's [`crate::AckWrite`] says:
/// before it returns (the default), or grouped by a background thread; `close` writes what
/// this subscription has staged.
pub struct RocksmqConsumer {
    subscription: Subscription,
    /// Read but not yet handed over, in order.
    buffer: VecDeque<Message>,
    capacity: usize,
    lease: Lease,
    acks: Arc<RocksmqAcker>,
}

/// What acking needs, shared by a consumer and its [`Acker`] handles.
struct RocksmqAcker {
    engine: Rocksmq,
    topic: SharedStr,
    /// The state of the topic subscribed to: acks find it without a look-up by name.
    state: Arc<TopicState>,
    group: String,
    epoch: DeliveryEpoch,
    closed: AtomicBool,
}

impl std::fmt::Debug for RocksmqAcker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RocksmqAcker")
            .field("topic", &self.topic)
            .field("group", &self.group)
            .field("epoch", &self.epoch)
            .field("closed", &self.closed)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl Acker for RocksmqAcker {
    async fn ack(&self, message: &Message) -> Result<()> {
        let id = self.checked_id(message)?;
        self.engine
            .ack_as_configured_on(&self.state, &self.group, id)
    }

    /// Staged in the engine, written with every other staged ack of the queue by the next
    /// flush (one `WriteBatch` for a whole pack's channels).
    async fn stage(&self, message: &Message) -> Result<()> {
        let id = self.checked_id(message)?;
        self.engine.stage_ack_on(&self.state, &self.group, id)
    }

    async fn flush(&self) -> Result<()> {
        self.engine.flush_acks()
    }
}

impl RocksmqAcker {
    /// The engine id of `message`, if this acker may ack it: the consumer is open, the message
    /// is of its topic and of its current delivery epoch.
    fn checked_id(&self, message: &Message) -> Result<u64> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed("rocksmq consumer"));
        }
        if *message.topic != *self.topic {
            return Err(Error::InvalidArgument(format!(
                "message of topic {:?} acked on a consumer of {:?}",
                message.topic, self.topic
            )));
        }
        self.epoch.check(message)?;
        engine_id(&message.id)
    }
}

impl RocksmqConsumer {
    pub(crate) fn new(
        engine: Rocksmq,
        subscription: Subscription,
        capacity: usize,
        lease: Lease,
    ) -> Self {
        let acks = Arc::new(RocksmqAcker {
            epoch: DeliveryEpoch::new(engine.next_epoch()),
            engine,
            topic: SharedStr::interned(subscription.topic()),
            state: subscription.topic_state().clone(),
            group: subscription.group().to_string(),
            closed: AtomicBool::new(false),
        });
        RocksmqConsumer {
            subscription,
            buffer: VecDeque::new(),
            capacity: capacity.max(1),
            lease,
            acks,
        }
    }

    fn closed(&self) -> bool {
        self.acks.closed.load(Ordering::Acquire)
    }
}

#[async_trait]
impl Consumer for RocksmqConsumer {
    fn topic(&self) -> &str {
        self.subscription.topic()
    }

    fn subscription(&self) -> &str {
        self.subscription.group()
    }

    async fn recv(&mut self) -> Result<Option<Message>> {
        Ok(self.recv_batch(1).await?.pop())
    }

    async fn recv_batch(&mut self, max: usize) -> Result<Vec<Message>> {
        let max = max.max(1);
        loop {
            if self.closed() || self.acks.engine.is_closed() {
                return Ok(Vec::new());
            }
            if !self.buffer.is_empty() {
                // The buffer is a read's `Vec` taken over whole, so handing all of it back
                // moves nothing; only a part is moved message by message.
                if self.buffer.len() <= max {
                    return Ok(Vec::from(std::mem::take(&mut self.buffer)));
                }
                return Ok(self.buffer.drain(..max).collect());
            }
            let delivery = Delivery {
                epoch: self.acks.epoch.current(),
            };
            let topic = &self.acks.topic;
            let read = self
                .subscription
                .next_batch_with(self.capacity, |stored| to_message(topic, stored, delivery))
                .await;
            match read {
                // The whole read fits: hand it over without staging it in the buffer.
                Ok(batch) if batch.len() <= max => return Ok(batch),
                Ok(batch) => self.buffer = VecDeque::from(batch),
                Err(Error::Closed(_)) => return Ok(Vec::new()),
                Err(e) => return Err(e),
            }
        }
    }

    async fn ack(&self, message: &Message) -> Result<()> {
        self.acks.ack(message).await
    }

    fn acker(&self) -> Arc<dyn Acker> {
        self.acks.clone()
    }

    async fn seek(&mut self, id: &MessageId, inclusive: bool) -> Result<()> {
        if self.closed() {
            return Err(Error::Closed("rocksmq consumer"));
        }
        let position = checked_position(&self.acks.engine, &self.acks.topic, id, inclusive)?;
        self.subscription.seek(position)?;
        self.buffer.clear();
        self.acks.epoch.renew(self.acks.engine.next_epoch());
        Ok(())
    }

    async fn latest_message_id(&self) -> Result<Option<MessageId>> {
        if self.closed() {
            return Err(Error::Closed("rocksmq consumer"));
        }
        Ok(self
            .acks
            .engine
            .latest_message_id(self.subscription.topic())?
            .map(MessageId::from_u64))
    }

    async fn close(&mut self) {
        self.acks.closed.store(true, Ordering::Release);
        self.buffer.clear();
        // Grouped acks of this subscription are written now, not by the background thread.
        if let Err(error) = self
            .acks
            .engine
            .flush_group_acks(&self.acks.topic, &self.acks.group)
        {
            if !self.acks.engine.is_closed() {
                tracing::warn!(%error, topic = %self.acks.topic, "rocksmq: writing the acks of a closing consumer failed; they stay staged");
            }
        }
        self.lease.release();
    }
}
