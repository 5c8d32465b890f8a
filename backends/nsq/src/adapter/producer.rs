//! `NsqProducer`: PUB/MPUB (upstream, with an id stamped in the envelope) or PUB_TRACE into the
//! configured partition (extensions, the id being where the server stored it).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use msgstream::mq::{MessageId, Producer, ProducerMessage, Sending};
use msgstream::{Error, Result};

use super::client::Shared;
use super::{encode, map_err, Position};

/// A `u64` that increases on every call in this process and roughly follows the clock, so
/// ids of one producer increase and ids of later processes are larger.
fn next_id() -> u64 {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let mut prev = LAST.load(Ordering::Relaxed);
    loop {
        let next = now.max(prev + 1);
        match LAST.compare_exchange_weak(prev, next, Ordering::AcqRel, Ordering::Relaxed) {
            Ok(_) => return next,
            Err(actual) => prev = actual,
        }
    }
}

/// Appends to one topic.
pub(crate) struct NsqProducer {
    pub shared: Arc<Shared>,
    pub topic: String,
    pub closed: AtomicBool,
}

impl NsqProducer {
    fn check(&self) -> Result<()> {
        self.shared.check_open()?;
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed("nsq producer"));
        }
        Ok(())
    }
}

#[async_trait]
impl Producer for NsqProducer {
    fn topic(&self) -> &str {
        &self.topic
    }

    fn send(&self, message: ProducerMessage) -> Sending<'_> {
        Sending::new(async move {
            self.check()?;
            let client = &self.shared.producer;
            match self.shared.partition() {
                Some(partition) => {
                    let body = encode(0, &message.payload, &message.properties);
                    let receipt = match &self.shared.cluster {
                        Some(cluster) => cluster.publish(&self.topic, &body).await?,
                        None => client
                            .publish_trace(&self.topic, partition, 0, &body)
                            .await
                            .map_err(map_err)?,
                    };
                    Ok(Position {
                        partition,
                        offset: receipt.offset,
                        raw_size: receipt.raw_size,
                    }
                    .id())
                }
                None => {
                    let id = next_id();
                    let body = encode(id, &message.payload, &message.properties);
                    client.publish(&self.topic, &body).await.map_err(map_err)?;
                    Ok(MessageId::from_u64(id))
                }
            }
        })
    }

    async fn send_batch(&self, messages: Vec<ProducerMessage>) -> Result<Vec<MessageId>> {
        self.check()?;
        if self.shared.partition().is_some() || messages.len() < 2 {
            let mut ids = Vec::with_capacity(messages.len());
            for message in messages {
                ids.push(self.send(message).await?);
            }
            return Ok(ids);
        }
        let ids: Vec<u64> = messages.iter().map(|_| next_id()).collect();
        let bodies: Vec<Bytes> = messages
            .iter()
            .zip(&ids)
            .map(|(m, id)| encode(*id, &m.payload, &m.properties))
            .collect();
        self.shared
            .producer
            .multi_publish(&self.topic, None, &bodies)
            .await
            .map_err(map_err)?;
        Ok(ids.into_iter().map(MessageId::from_u64).collect())
    }

    async fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }
}
