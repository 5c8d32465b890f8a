//! `MemoryConsumer`: one subscription's delivery cursor over an in-memory topic.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::Notify;

use super::broker::Stored;
use super::client::{decode_id, MemoryClient};
use crate::mq::{Acker, Consumer, ConsumerOptions, Delivery, DeliveryEpoch, Message, MessageId};
use crate::msg::SharedStr;
use crate::{Error, Result};

/// Delivers a subscription's messages in id order; acks move the subscription's shared cursor.
///
/// Holds the subscription's exclusive slot (`Topic::live`) until closed or dropped.
#[derive(Debug)]
pub(super) struct MemoryConsumer {
    options: ConsumerOptions,
    /// Index of the next message to deliver.
    cursor: u64,
    notify: Arc<Notify>,
    acks: Arc<MemoryAcker>,
}

/// What acking needs, shared by the consumer and its [`Acker`] handles.
#[derive(Debug)]
struct MemoryAcker {
    client: MemoryClient,
    topic: SharedStr,
    subscription: String,
    epoch: DeliveryEpoch,
    closed: AtomicBool,
}

impl MemoryAcker {
    fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed("memory consumer"));
        }
        self.client.check_open()
    }
}

#[async_trait]
impl Acker for MemoryAcker {
    async fn ack(&self, message: &Message) -> Result<()> {
        self.check_open()?;
        if *message.topic != *self.topic {
            return Err(Error::InvalidArgument(format!(
                "message of channel {:?} acked on a consumer of {:?}",
                message.topic, self.topic
            )));
        }
        self.epoch.check(message)?;
        let next = decode_id(&message.id)?.saturating_add(1);
        self.client
            .broker
            .with_existing(&self.topic, |t| {
                match t.cursors.get_mut(&self.subscription) {
                    Some(cursor) => *cursor = (*cursor).max(next),
                    None => drop(t.cursors.insert(self.subscription.clone(), next)),
                }
            })
            .ok_or_else(|| Error::NotSubscribed {
                channel: self.topic.to_string(),
            })
    }
}

impl MemoryConsumer {
    pub(super) fn new(
        client: MemoryClient,
        options: ConsumerOptions,
        cursor: u64,
        notify: Arc<Notify>,
    ) -> Self {
        let acks = Arc::new(MemoryAcker {
            client,
            topic: SharedStr::interned(&options.topic),
            subscription: options.subscription.clone(),
            epoch: DeliveryEpoch::new(0),
            closed: AtomicBool::new(false),
        });
        MemoryConsumer {
            options,
            cursor,
            notify,
            acks,
        }
    }

    fn check_open(&self) -> Result<()> {
        self.acks.check_open()
    }

    fn client(&self) -> &MemoryClient {
        &self.acks.client
    }

    /// Gives the subscription's exclusive slot back (once).
    fn release(&self) {
        if !self.acks.closed.swap(true, Ordering::AcqRel) {
            let subscription = &self.options.subscription;
            self.client()
                .broker
                .with_existing(&self.options.topic, |t| t.live.remove(subscription));
        }
    }
}

impl Drop for MemoryConsumer {
    fn drop(&mut self) {
        self.release();
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
            let found: Vec<Stored> = self.client().broker.with_topic(&self.options.topic, |t| {
                let end = t.log.len().min(start.saturating_add(max.max(1)));
                t.log
                    .get(start..end)
                    .map(<[Stored]>::to_vec)
                    .unwrap_or_default()
            });
            if !found.is_empty() {
                let delivery = Delivery {
                    epoch: self.acks.epoch.current(),
                };
                let messages = found
                    .into_iter()
                    .zip(self.cursor..)
                    .map(|(stored, id)| Message {
                        topic: self.acks.topic.clone(),
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
        self.acks.ack(message).await
    }

    fn acker(&self) -> Arc<dyn Acker> {
        self.acks.clone()
    }

    async fn seek(&mut self, id: &MessageId, inclusive: bool) -> Result<()> {
        self.check_open()?;
        let id = decode_id(id)?;
        let cursor = if inclusive { id } else { id.saturating_add(1) };
        let (topic, subscription) = (&self.options.topic, &self.options.subscription);
        self.client().broker.with_topic(topic, |t| {
            t.check_id(topic, id)?;
            t.cursors.insert(subscription.clone(), cursor);
            Ok::<_, Error>(())
        })?;
        self.cursor = cursor;
        self.acks.epoch.bump();
        Ok(())
    }

    async fn latest_message_id(&self) -> Result<Option<MessageId>> {
        self.check_open()?;
        let len = self
            .client()
            .broker
            .with_topic(&self.options.topic, |t| t.log.len() as u64);
        Ok(len.checked_sub(1).map(MessageId::from_u64))
    }

    async fn close(&mut self) {
        self.release();
    }
}
