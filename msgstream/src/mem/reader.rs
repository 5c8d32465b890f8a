//! `MemoryReader`: a non-durable cursor over an in-memory topic.

use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::Notify;

use super::client::{decode_id, MemoryClient};
use crate::mq::{Delivery, Message, MessageId, Reader};
use crate::msg::SharedStr;
use crate::{Error, Result};

#[derive(Debug)]
pub(super) struct MemoryReader {
    client: MemoryClient,
    topic: SharedStr,
    cursor: u64,
    closed: bool,
    notify: Arc<Notify>,
}

impl MemoryReader {
    pub(super) fn new(
        client: MemoryClient,
        topic: String,
        cursor: u64,
        notify: Arc<Notify>,
    ) -> Self {
        MemoryReader {
            client,
            topic: SharedStr::interned(&topic),
            cursor,
            closed: false,
            notify,
        }
    }

    fn check_open(&self) -> Result<()> {
        if self.closed {
            return Err(Error::Closed("memory reader"));
        }
        self.client.check_open()
    }

    fn len(&self) -> u64 {
        self.client
            .broker
            .with_topic(&self.topic, |t| t.log.len() as u64)
    }
}

#[async_trait]
impl Reader for MemoryReader {
    fn topic(&self) -> &str {
        &self.topic
    }

    async fn next(&mut self) -> Result<Message> {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            self.check_open()?;
            let cursor = self.cursor;
            let found = self
                .client
                .broker
                .with_topic(&self.topic, |t| t.log.get(cursor as usize).cloned());
            if let Some(stored) = found {
                self.cursor += 1;
                return Ok(Message {
                    topic: self.topic.clone(),
                    id: MessageId::from_u64(cursor),
                    payload: stored.payload,
                    properties: stored.properties,
                    delivery: Delivery::default(),
                });
            }
            notified.await;
        }
    }

    async fn has_next(&mut self) -> Result<bool> {
        self.check_open()?;
        Ok(self.cursor < self.len())
    }

    async fn seek(&mut self, id: &MessageId, inclusive: bool) -> Result<()> {
        self.check_open()?;
        let id = decode_id(id)?;
        let topic = &self.topic;
        self.client
            .broker
            .with_topic(topic, |t| t.check_id(topic, id))?;
        self.cursor = if inclusive { id } else { id.saturating_add(1) };
        Ok(())
    }

    async fn close(&mut self) {
        self.closed = true;
    }
}
