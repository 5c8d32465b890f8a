//! [`RocksmqConsumer`]: one consumer of a durable subscription (consumer group).

use std::collections::VecDeque;
use std::sync::Arc;

use async_trait::async_trait;
use msgstream::mq::{Consumer, Delivery, Message, MessageId};
use msgstream::{Error, Result};

use super::{engine_id, seek_position, to_message};
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
/// `Error::StaleDelivery`.
pub struct RocksmqConsumer {
    engine: Rocksmq,
    subscription: Subscription,
    topic: Arc<str>,
    buffer: VecDeque<Message>,
    capacity: usize,
    epoch: u64,
    closed: bool,
}

impl RocksmqConsumer {
    pub(crate) fn new(engine: Rocksmq, subscription: Subscription, capacity: usize) -> Self {
        let epoch = engine.next_epoch();
        RocksmqConsumer {
            engine,
            topic: Arc::from(subscription.topic()),
            subscription,
            buffer: VecDeque::new(),
            capacity: capacity.max(1),
            epoch,
            closed: false,
        }
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
            if self.closed || self.engine.is_closed() {
                return Ok(Vec::new());
            }
            if !self.buffer.is_empty() {
                let n = max.min(self.buffer.len());
                return Ok(self.buffer.drain(..n).collect());
            }
            let (topic, delivery) = (&self.topic, Delivery { epoch: self.epoch });
            let read = self
                .subscription
                .next_batch_with(self.capacity, |stored| to_message(topic, stored, delivery))
                .await;
            match read {
                // The whole read fits: hand it over without staging it in the buffer.
                Ok(batch) if batch.len() <= max => return Ok(batch),
                Ok(batch) => self.buffer.extend(batch),
                Err(Error::Closed(_)) => return Ok(Vec::new()),
                Err(e) => return Err(e),
            }
        }
    }

    async fn ack(&self, message: &Message) -> Result<()> {
        if self.closed {
            return Err(Error::Closed("rocksmq consumer"));
        }
        if *message.topic != *self.subscription.topic() {
            return Err(Error::InvalidArgument(format!(
                "message of topic {:?} acked on a consumer of {:?}",
                message.topic,
                self.subscription.topic()
            )));
        }
        if message.delivery.epoch != self.epoch {
            return Err(Error::StaleDelivery(format!(
                "message {:?} was delivered in epoch {}, the consumer is at epoch {} (it seeked or was re-created since)",
                message.id, message.delivery.epoch, self.epoch
            )));
        }
        self.subscription.ack(engine_id(&message.id)?)
    }

    async fn seek(&mut self, id: &MessageId, inclusive: bool) -> Result<()> {
        if self.closed {
            return Err(Error::Closed("rocksmq consumer"));
        }
        self.subscription.seek(seek_position(id, inclusive)?)?;
        self.buffer.clear();
        self.epoch = self.engine.next_epoch();
        Ok(())
    }

    async fn latest_message_id(&self) -> Result<Option<MessageId>> {
        if self.closed {
            return Err(Error::Closed("rocksmq consumer"));
        }
        Ok(self
            .engine
            .latest_message_id(self.subscription.topic())?
            .map(MessageId::from_u64))
    }

    async fn close(&mut self) {
        self.closed = true;
        self.buffer.clear();
    }
}
