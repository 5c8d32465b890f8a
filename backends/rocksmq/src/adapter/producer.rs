//! [`RocksmqProducer`]: appends to one topic through the group-committing writer.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use msgstream::mq::{MessageId, Producer, ProducerMessage, Sending};
use msgstream::{Error, Result};

use crate::engine::Produced;
use crate::topics::TopicState;
use crate::writer::Batch;
use crate::Rocksmq;

/// A producer of one topic. `send_batch` writes the whole batch in one `WriteBatch` with
/// consecutive ids; concurrent producers share writes (group commit).
pub struct RocksmqProducer {
    engine: Rocksmq,
    topic: Arc<TopicState>,
    closed: AtomicBool,
}

impl RocksmqProducer {
    pub(crate) fn new(engine: Rocksmq, topic: Arc<TopicState>) -> RocksmqProducer {
        RocksmqProducer {
            engine,
            topic,
            closed: AtomicBool::new(false),
        }
    }
}

#[async_trait]
impl Producer for RocksmqProducer {
    fn topic(&self) -> &str {
        &self.topic.name
    }

    fn send(&self, message: ProducerMessage) -> Sending<'_> {
        if self.closed.load(Ordering::Acquire) {
            return Sending::ready(Err(Error::Closed("rocksmq producer")));
        }
        // An uncontended buffered send is written by `start_produce` itself, before this
        // returns: its answer goes back ready, with no future to allocate. Only a send queued
        // behind another write, or waiting for a sync, has something to await.
        match self.engine.start_produce(&self.topic, Batch::One(message)) {
            Ok(Produced::Written(ids)) => Sending::ready(Ok(MessageId::from_u64(ids.start))),
            Ok(waiting) => Sending::new(async move {
                let ids = waiting.ids().await?;
                Ok(MessageId::from_u64(ids.start))
            }),
            Err(e) => Sending::ready(Err(e)),
        }
    }

    async fn send_batch(&self, messages: Vec<ProducerMessage>) -> Result<Vec<MessageId>> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed("rocksmq producer"));
        }
        let ids = match self
            .engine
            .start_produce(&self.topic, Batch::Many(messages))?
        {
            Produced::Written(ids) => ids,
            waiting => waiting.ids().await?,
        };
        Ok(ids.map(MessageId::from_u64).collect())
    }

    async fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }
}
