//! [`RocketMqReader`]: a non-durable cursor over a channel's queue, on plain pulls.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use msgstream::mq::{Delivery, Message, MessageId, Reader, ReaderOptions};
use msgstream::msg::SharedStr;
use msgstream::{Error, Result};

use super::client::Shared;
use super::{broker_name, channel_error, checked_offset, to_message};
use crate::consumer::{pull, PullRequest};
use crate::MessageQueue;

/// How long one pull may wait on the broker for a new message.
const LONG_POLL: Duration = Duration::from_secs(15);

/// A reader: pulls from its own offset, keeps nothing on the broker.
pub struct RocketMqReader {
    shared: Arc<Shared>,
    channel: String,
    topic: SharedStr,
    queue: MessageQueue,
    group: String,
    offset: i64,
    buffer: VecDeque<Message>,
    closed: bool,
}

impl RocketMqReader {
    pub(crate) async fn open(shared: Arc<Shared>, options: ReaderOptions) -> Result<Self> {
        let topic = broker_name("topic", &options.topic)?;
        let queue = shared.ensure_topic(&topic).await?;
        let offset = checked_offset(
            &shared,
            &options.topic,
            &queue,
            &options.start,
            options.inclusive,
        )
        .await?;
        let group = shared
            .namespace
            .wrap(&format!("{}msgstream-reader", shared.config.group_prefix));
        Ok(RocketMqReader {
            channel: options.topic.clone(),
            topic: SharedStr::interned(&options.topic),
            shared,
            queue,
            group,
            offset,
            buffer: VecDeque::new(),
            closed: false,
        })
    }

    fn check_open(&self) -> Result<()> {
        if self.closed {
            return Err(Error::Closed("rocketmq reader"));
        }
        self.shared.check_open()
    }

    /// Pulls the next batch into the buffer; `wait` lets the broker hold the request until a
    /// message arrives.
    async fn fill(&mut self, wait: bool) -> Result<()> {
        let request = PullRequest {
            group: &self.group,
            queue: &self.queue,
            offset: self.offset,
            max: self.shared.config.poll_batch.max(1),
            expression: "*",
            suspend: if wait { LONG_POLL } else { Duration::ZERO },
            max_body: self.shared.config.max_message_bytes,
        };
        let outcome = pull(&self.shared.admin, &request)
            .await
            .map_err(|e| channel_error(&self.channel, e))?;
        if outcome.offset_moved && outcome.next_offset < self.offset {
            // The broker has not indexed the newest acknowledged messages yet; moving back
            // would return messages before the cursor.
            tokio::time::sleep(Duration::from_millis(20)).await;
            return Ok(());
        }
        // Only after a completed pull does the cursor move: a cancelled `next` loses nothing.
        self.offset = outcome.next_offset;
        let topic = &self.topic;
        self.buffer.extend(
            outcome
                .messages
                .into_iter()
                .map(|m| to_message(topic, m, Delivery::default())),
        );
        Ok(())
    }
}

#[async_trait]
impl Reader for RocketMqReader {
    fn topic(&self) -> &str {
        &self.channel
    }

    async fn next(&mut self) -> Result<Message> {
        loop {
            self.check_open()?;
            if let Some(message) = self.buffer.pop_front() {
                return Ok(message);
            }
            self.fill(true).await?;
        }
    }

    async fn has_next(&mut self) -> Result<bool> {
        self.check_open()?;
        if self.buffer.is_empty() {
            self.fill(false).await?;
        }
        Ok(!self.buffer.is_empty())
    }

    async fn seek(&mut self, id: &MessageId, inclusive: bool) -> Result<()> {
        self.check_open()?;
        self.offset =
            checked_offset(&self.shared, &self.channel, &self.queue, id, inclusive).await?;
        self.buffer.clear();
        Ok(())
    }

    async fn close(&mut self) {
        self.closed = true;
        self.buffer.clear();
    }
}
