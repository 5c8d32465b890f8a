//! A backend that fails where a test says: any client, with a hook consulted before each
//! consumer's receive and seek, and after each seek that went through. For the paths no real
//! broker fails on demand: a receive that errors transiently, a seek that fails after the
//! stream already moved other channels, a seek that fails after its own consumer moved.

use std::sync::Arc;

use async_trait::async_trait;

use crate::mq::{
    Acker, Capabilities, Client, Consumer, ConsumerOptions, Message, MessageId, Producer, Reader,
    ReaderOptions,
};
use crate::{Error, Result};

/// A consumer call a [`FaultyClient`] asks its hook about, with the consumer's channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call<'a> {
    /// `recv` or `recv_batch`.
    Receive(&'a str),
    /// `seek`, before the backend's seek runs.
    Seek(&'a str),
    /// `seek`, after the backend's seek succeeded: the consumer has moved. A fault here makes
    /// the seek fail after the move; a truthful one is [`Error::SeekMoved`].
    Sought(&'a str),
}

/// Decides whether a call fails, and with what (`None`: it goes through).
pub type Fault = dyn Fn(Call<'_>) -> Option<Error> + Send + Sync;

/// `inner`, except that its consumers ask `fault` before each receive and seek, and after
/// each seek the backend made.
pub struct FaultyClient {
    inner: Arc<dyn Client>,
    fault: Arc<Fault>,
}

impl FaultyClient {
    /// Wraps `inner`; `fault` runs before every receive and seek of every consumer, and after
    /// every seek that succeeded.
    pub fn new(
        inner: Arc<dyn Client>,
        fault: impl Fn(Call<'_>) -> Option<Error> + Send + Sync + 'static,
    ) -> FaultyClient {
        FaultyClient {
            inner,
            fault: Arc::new(fault),
        }
    }
}

struct FaultyConsumer {
    inner: Box<dyn Consumer>,
    fault: Arc<Fault>,
}

impl FaultyConsumer {
    fn check(&self, call: Call<'_>) -> Result<()> {
        (self.fault)(call).map_or(Ok(()), Err)
    }
}

#[async_trait]
impl Consumer for FaultyConsumer {
    fn topic(&self) -> &str {
        self.inner.topic()
    }
    fn subscription(&self) -> &str {
        self.inner.subscription()
    }
    async fn recv(&mut self) -> Result<Option<Message>> {
        self.check(Call::Receive(self.inner.topic()))?;
        self.inner.recv().await
    }
    async fn recv_batch(&mut self, max: usize) -> Result<Vec<Message>> {
        self.check(Call::Receive(self.inner.topic()))?;
        self.inner.recv_batch(max).await
    }
    async fn ack(&self, message: &Message) -> Result<()> {
        self.inner.ack(message).await
    }
    fn acker(&self) -> Arc<dyn Acker> {
        self.inner.acker()
    }
    async fn seek(&mut self, id: &MessageId, inclusive: bool) -> Result<()> {
        self.check(Call::Seek(self.inner.topic()))?;
        self.inner.seek(id, inclusive).await?;
        self.check(Call::Sought(self.inner.topic()))
    }
    async fn latest_message_id(&self) -> Result<Option<MessageId>> {
        self.inner.latest_message_id().await
    }
    async fn close(&mut self) {
        self.inner.close().await
    }
}

#[async_trait]
impl Client for FaultyClient {
    fn backend_name(&self) -> &'static str {
        self.inner.backend_name()
    }
    async fn create_producer(&self, topic: &str) -> Result<Box<dyn Producer>> {
        self.inner.create_producer(topic).await
    }
    async fn subscribe(&self, options: ConsumerOptions) -> Result<Box<dyn Consumer>> {
        Ok(Box::new(FaultyConsumer {
            inner: self.inner.subscribe(options).await?,
            fault: self.fault.clone(),
        }))
    }
    async fn create_reader(&self, options: ReaderOptions) -> Result<Box<dyn Reader>> {
        self.inner.create_reader(options).await
    }
    fn earliest_message_id(&self) -> MessageId {
        self.inner.earliest_message_id()
    }
    fn message_id_from_bytes(&self, bytes: &[u8]) -> Result<MessageId> {
        self.inner.message_id_from_bytes(bytes)
    }
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    async fn time_lower_bound(&self, topic: &str, timestamp: u64) -> Result<MessageId> {
        self.inner.time_lower_bound(topic, timestamp).await
    }
    async fn close(&self) {
        self.inner.close().await
    }
}
