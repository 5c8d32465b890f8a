//! [`RocketMqProducer`]: sends to a channel's single queue.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use msgstream::mq::{MessageId, Producer, ProducerMessage, Sending};
use msgstream::{Error, Result};

use super::client::Shared;
use super::id_of;
use crate::producer::{OutgoingMessage, QueueSelector};
use crate::MessageQueue;

/// A producer of one channel; sends are synchronous (acknowledged by the broker).
pub struct RocketMqProducer {
    shared: Arc<Shared>,
    channel: String,
    broker_topic: String,
    /// The channel's queue: every message goes there, so order is the queue's order.
    queue: QueueSelector,
    closed: AtomicBool,
}

impl RocketMqProducer {
    pub(crate) fn new(
        shared: Arc<Shared>,
        channel: String,
        topic: String,
        queue: MessageQueue,
    ) -> Self {
        RocketMqProducer {
            shared,
            channel,
            broker_topic: topic,
            queue: QueueSelector::Queue(queue),
            closed: AtomicBool::new(false),
        }
    }

    fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed("rocketmq producer"));
        }
        self.shared.check_open()
    }

    fn outgoing(&self, message: ProducerMessage) -> OutgoingMessage {
        OutgoingMessage {
            properties: message.properties,
            ..OutgoingMessage::new(self.broker_topic.clone(), message.payload)
        }
    }
}

#[async_trait]
impl Producer for RocketMqProducer {
    fn topic(&self) -> &str {
        &self.channel
    }

    fn send(&self, message: ProducerMessage) -> Sending<'_> {
        Sending::new(async move {
            self.check_open()?;
            let sent = self
                .shared
                .producer
                .send(&self.outgoing(message), &self.queue)
                .await?;
            self.shared.produced(&sent.queue, sent.queue_offset);
            Ok(id_of(sent.queue_offset))
        })
    }

    async fn send_batch(&self, messages: Vec<ProducerMessage>) -> Result<Vec<MessageId>> {
        self.check_open()?;
        let batch: Vec<OutgoingMessage> = messages.into_iter().map(|m| self.outgoing(m)).collect();
        let sent = self.shared.producer.send_batch(&batch, &self.queue).await?;
        if let Some(last) = sent.last() {
            self.shared.produced(&last.queue, last.queue_offset);
        }
        Ok(sent.iter().map(|s| id_of(s.queue_offset)).collect())
    }

    async fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }
}
