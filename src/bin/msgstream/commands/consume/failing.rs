//! A memory backend whose consumers fail permanently (`Error::Corrupt`) after their first
//! message, to drive `consume` into a failure it cannot continue past.
//!
//! The mq traits are `async_trait`s, which this crate does not depend on; the methods are
//! written out as that macro expands them.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use msgstream_facade::msgstream::mem::MemoryClient;
use msgstream_facade::msgstream::mq::{
    Acker, Capabilities, Client, Consumer, ConsumerOptions, Message, MessageId, Producer, Reader,
    ReaderOptions,
};
use msgstream_facade::msgstream::{Error, Result};

type Fut<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Delegates to a [`MemoryClient`]; its consumers are [`FailingConsumer`]s.
pub struct FailingClient(pub MemoryClient);

/// Delivers one message, then fails every receive with `Error::Corrupt`.
pub struct FailingConsumer {
    inner: Box<dyn Consumer>,
    delivered: bool,
}

impl Client for FailingClient {
    fn backend_name(&self) -> &'static str {
        self.0.backend_name()
    }

    fn create_producer<'s, 't, 'a>(&'s self, topic: &'t str) -> Fut<'a, Result<Box<dyn Producer>>>
    where
        's: 'a,
        't: 'a,
        Self: 'a,
    {
        self.0.create_producer(topic)
    }

    fn subscribe<'s, 'a>(&'s self, options: ConsumerOptions) -> Fut<'a, Result<Box<dyn Consumer>>>
    where
        's: 'a,
        Self: 'a,
    {
        Box::pin(async move {
            let inner = self.0.subscribe(options).await?;
            Ok(Box::new(FailingConsumer {
                inner,
                delivered: false,
            }) as Box<dyn Consumer>)
        })
    }

    fn create_reader<'s, 'a>(&'s self, options: ReaderOptions) -> Fut<'a, Result<Box<dyn Reader>>>
    where
        's: 'a,
        Self: 'a,
    {
        self.0.create_reader(options)
    }

    fn earliest_message_id(&self) -> MessageId {
        self.0.earliest_message_id()
    }

    fn message_id_from_bytes(&self, bytes: &[u8]) -> Result<MessageId> {
        self.0.message_id_from_bytes(bytes)
    }

    fn capabilities(&self) -> Capabilities {
        self.0.capabilities()
    }

    fn time_lower_bound<'s, 't, 'a>(
        &'s self,
        topic: &'t str,
        timestamp: u64,
    ) -> Fut<'a, Result<MessageId>>
    where
        's: 'a,
        't: 'a,
        Self: 'a,
    {
        self.0.time_lower_bound(topic, timestamp)
    }

    fn close<'s, 'a>(&'s self) -> Fut<'a, ()>
    where
        's: 'a,
        Self: 'a,
    {
        self.0.close()
    }
}

impl Consumer for FailingConsumer {
    fn topic(&self) -> &str {
        self.inner.topic()
    }

    fn subscription(&self) -> &str {
        self.inner.subscription()
    }

    fn recv<'s, 'a>(&'s mut self) -> Fut<'a, Result<Option<Message>>>
    where
        's: 'a,
        Self: 'a,
    {
        Box::pin(async move {
            if self.delivered {
                return Err(Error::Corrupt {
                    channel: self.inner.topic().to_string(),
                    id: MessageId::from_u64(1),
                    detail: "injected by the test".into(),
                });
            }
            self.delivered = true;
            self.inner.recv().await
        })
    }

    fn ack<'s, 'm, 'a>(&'s self, message: &'m Message) -> Fut<'a, Result<()>>
    where
        's: 'a,
        'm: 'a,
        Self: 'a,
    {
        self.inner.ack(message)
    }

    fn acker(&self) -> Arc<dyn Acker> {
        self.inner.acker()
    }

    fn seek<'s, 'i, 'a>(&'s mut self, id: &'i MessageId, inclusive: bool) -> Fut<'a, Result<()>>
    where
        's: 'a,
        'i: 'a,
        Self: 'a,
    {
        self.inner.seek(id, inclusive)
    }

    fn latest_message_id<'s, 'a>(&'s self) -> Fut<'a, Result<Option<MessageId>>>
    where
        's: 'a,
        Self: 'a,
    {
        self.inner.latest_message_id()
    }

    fn close<'s, 'a>(&'s mut self) -> Fut<'a, ()>
    where
        's: 'a,
        Self: 'a,
    {
        self.inner.close()
    }
}
