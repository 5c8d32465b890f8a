//! `MemoryConsumer`: one subscription's delivery cursor over an in-memory topic.

use std::sync::Arc;

use super::broker::Stored;

use async_trait::async_trait;
use tokio::sync::Notify;

use super::client::{decode_id, MemoryClient};
use crate::mq::{Consumer, ConsumerOptions, Delivery, Message, MessageId};
use crate::{Error, Result};

/// Delivers a subscription's messages in id order; acks move the subscription's shared cursor.
#[derive(Debug)]
pub(super) struct MemoryConsumer {
    client: MemoryClient,
    options: ConsumerOptions,
    topic: Arc<str>,
    /// Index of the next message to deliver.
    cursor: u64,
    epoch: u64,
    closed: bool,
    notify: Arc<Notify>,
}

impl MemoryConsumer {
    pub(super) fn new(
        client: MemoryClient,
        options: ConsumerOptions,
        cursor: u64,
        notify: Arc<Notify>,
    ) -> Self {
        MemoryConsumer {
            client,
            topic: Arc::from(options.topic.as_str()),
            options,
            cursor,
            epoch: 0,
            closed: false,
            notify,
        }
    }

    fn check_open(&self) -> Result<()> {
        if self.closed {
            return Err(Error::Closed("memory consumer"));
        }
        self.client.check_open()
    }
}

#[async_trait]
impl Consumer for MemoryConsumer {
    fn topic(&self) -> &str {
        &self.options.topic
    }

    fn subscription(&self) -> &str {
        &self.options.subscription
    }

    async fn recv(&mut self) -> Result<Option<Message>> {
        Ok(self.recv_batch(1).await?.pop())
    }

    async fn recv_batch(&mut self, max: usize) -> Result<Vec<Message>> {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.check_open().is_err() {
                return Ok(Vec::new());
            }
            let start = self.cursor as usize;
            let found: Vec<Stored> = self.client.broker.with_topic(&self.options.topic, |t| {
                let end = t.log.len().min(start.saturating_add(max.max(1)));
                t.log
                    .get(start..end)
                    .map(<[Stored]>::to_vec)
                    .unwrap_or_default()
            });
            if !found.is_empty() {
                let delivery = Delivery { epoch: self.epoch };
                let messages = found
                    .into_iter()
                    .zip(self.cursor..)
                    .map(|(stored, id)| Message {
                        topic: self.topic.clone(),
                        id: MessageId::from_u64(id),
                        payload: stored.payload,
                        properties: stored.properties,
                        delivery,
                    })
                    .collect::<Vec<_>>();
                self.cursor += messages.len() as u64;
                return Ok(messages);
            }
            notified.await;
        }
    }

    async fn ack(&self, message: &Message) -> Result<()> {
        self.check_open()?;
        if *message.topic != *self.options.topic {
            return Err(Error::InvalidArgument(format!(
                "message of channel {:?} acked on a consumer of {:?}",
                message.topic, self.options.topic
            )));
        }
        if message.delivery.epoch != self.epoch {
            return Err(Error::StaleDelivery(format!(
                "message {:?} was delivered before a seek",
                message.id
            )));
        }
        let next = decode_id(&message.id)?.saturating_add(1);
        self.client.broker.with_topic(&self.options.topic, |t| {
            let cursor = t
                .cursors
                .entry(self.options.subscription.clone())
                .or_insert(0);
            *cursor = (*cursor).max(next);
        });
        Ok(())
    }

    async fn seek(&mut self, id: &MessageId, inclusive: bool) -> Result<()> {
        self.check_open()?;
        let id = decode_id(id)?;
        let cursor = if inclusive { id } else { id.saturating_add(1) };
        self.client.broker.with_topic(&self.options.topic, |t| {
            t.cursors.insert(self.options.subscription.clone(), cursor);
        });
        self.cursor = cursor;
        self.epoch += 1;
        Ok(())
    }

    async fn latest_message_id(&self) -> Result<Option<MessageId>> {
        self.check_open()?;
        let len = self
            .client
            .broker
            .with_topic(&self.options.topic, |t| t.log.len() as u64);
        Ok(len.checked_sub(1).map(MessageId::from_u64))
    }

    async fn close(&mut self) {
        self.closed = true;
    }
}
