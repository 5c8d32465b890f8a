//! [`RocksmqReader`]: a non-durable cursor over one topic.

use std::collections::VecDeque;

use async_trait::async_trait;
use msgstream::mq::{Delivery, Message, MessageId, Reader};
use msgstream::msg::SharedStr;
use msgstream::{Error, Result};

use super::{checked_position, to_message};
use crate::{Rocksmq, TopicReader};

const PREFETCH: usize = 256;

/// A reader: like a consumer without a group, keeping no state in the database.
/// `next` waits on the writer's notification and is cancel-safe.
pub struct RocksmqReader {
    engine: Rocksmq,
    reader: TopicReader,
    topic: SharedStr,
    buffer: VecDeque<Message>,
    closed: bool,
}

impl RocksmqReader {
    pub(crate) fn new(engine: Rocksmq, reader: TopicReader) -> Self {
        RocksmqReader {
            engine,
            topic: SharedStr::interned(reader.topic()),
            reader,
            buffer: VecDeque::new(),
            closed: false,
        }
    }

    fn check_open(&self) -> Result<()> {
        if self.closed {
            return Err(Error::Closed("rocksmq reader"));
        }
        Ok(())
    }
}

#[async_trait]
impl Reader for RocksmqReader {
    fn topic(&self) -> &str {
        self.reader.topic()
    }

    async fn next(&mut self) -> Result<Message> {
        loop {
            self.check_open()?;
            if let Some(message) = self.buffer.pop_front() {
                return Ok(message);
            }
            let topic = &self.topic;
            let batch = self
                .reader
                .next_batch_with(PREFETCH, |stored| {
                    to_message(topic, stored, Delivery::default())
                })
                .await?;
            self.buffer.extend(batch);
        }
    }

    async fn has_next(&mut self) -> Result<bool> {
        self.check_open()?;
        if self.buffer.is_empty() {
            let topic = &self.topic;
            let batch = self.reader.read_with(PREFETCH, |stored| {
                to_message(topic, stored, Delivery::default())
            })?;
            self.buffer.extend(batch);
        }
        Ok(!self.buffer.is_empty())
    }

    async fn seek(&mut self, id: &MessageId, inclusive: bool) -> Result<()> {
        self.check_open()?;
        let position = checked_position(&self.engine, &self.topic, id, inclusive)?;
        self.reader.seek(position);
        self.buffer.clear();
        Ok(())
    }

    async fn close(&mut self) {
        self.closed = true;
        self.buffer.clear();
    }
}
