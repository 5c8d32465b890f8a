//! Copying one channel: a source reader, a target producer, one batch in between.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use msgstream::mq::{Client, Message, MessageId, ProducerMessage, Reader, ReaderOptions};
use tokio::sync::{watch, Notify};

use super::{ChannelProgress, MigrateOptions, MAX_BATCH_BYTES, SOURCE_ID_PROPERTY};
use crate::positions::encode_hex;
use crate::Result;

/// One channel of a migration: where its copy stands and what this run copied.
pub(super) struct ChannelCopy {
    pub(super) channel: String,
    /// The source id of the last message already at the target; `None`: nothing is.
    pub(super) resume_after: Option<MessageId>,
    pub(super) stats: Arc<ChannelStats>,
}

/// Counters a copier updates and the progress reports read.
pub(super) struct ChannelStats {
    channel: String,
    resumed: bool,
    copied: AtomicU64,
    bytes: AtomicU64,
    /// Whether the copier has read a message it has not yet written (or not yet looked).
    behind: AtomicBool,
    /// When the copier last found the source had nothing more.
    caught_up_at: Mutex<Option<Instant>>,
}

impl ChannelStats {
    pub(super) fn new(channel: &str, resumed: bool) -> Self {
        ChannelStats {
            channel: channel.to_string(),
            resumed,
            copied: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            behind: AtomicBool::new(true),
            caught_up_at: Mutex::new(None),
        }
    }

    pub(super) fn snapshot(&self) -> ChannelProgress {
        let caught_up_at = *self
            .caught_up_at
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let lag = caught_up_at.map(|at| {
            if self.behind.load(Ordering::Acquire) {
                at.elapsed()
            } else {
                Duration::ZERO
            }
        });
        ChannelProgress {
            channel: self.channel.clone(),
            copied: self.copied.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            resumed: self.resumed,
            lag,
        }
    }

    fn caught_up(&self) {
        *self
            .caught_up_at
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(Instant::now());
        self.behind.store(false, Ordering::Release);
    }
}

/// The message to write for `message`: the same payload and properties, plus its source id,
/// and its timestamp for the target's time index (so seeking by time works on the copies).
fn copy_of(message: Message) -> ProducerMessage {
    let timestamp = msgstream::mq::message_timestamp(&message.payload);
    let mut properties = message.properties;
    properties.insert(
        SOURCE_ID_PROPERTY.to_string(),
        encode_hex(message.id.as_bytes()),
    );
    ProducerMessage {
        payload: message.payload,
        properties,
        timestamp,
    }
}

impl ChannelCopy {
    /// Copies until the source has nothing more (or, following, until `stop` says so),
    /// writing a batch at a time and waking `wake` each time it catches up.
    pub(super) async fn run(
        &mut self,
        source: &Arc<dyn Client>,
        target: &Arc<dyn Client>,
        options: &MigrateOptions,
        mut stop: watch::Receiver<bool>,
        wake: Arc<Notify>,
    ) -> Result<()> {
        let mut reader = source
            .create_reader(ReaderOptions {
                topic: self.channel.clone(),
                start: self
                    .resume_after
                    .clone()
                    .unwrap_or_else(|| source.earliest_message_id()),
                inclusive: self.resume_after.is_none(),
            })
            .await?;
        let producer = target.create_producer(&self.channel).await?;
        tracing::debug!(channel = %self.channel, after = ?self.resume_after, "migration: copying");
        let result = self
            .copy(
                reader.as_mut(),
                producer.as_ref(),
                options,
                &mut stop,
                &wake,
            )
            .await;
        producer.close().await;
        reader.close().await;
        result
    }

    async fn copy(
        &mut self,
        reader: &mut dyn Reader,
        producer: &dyn msgstream::mq::Producer,
        options: &MigrateOptions,
        stop: &mut watch::Receiver<bool>,
        wake: &Notify,
    ) -> Result<()> {
        let mut batch: Vec<ProducerMessage> = Vec::with_capacity(options.batch);
        loop {
            let mut bytes = batch.iter().map(|m| m.payload.len()).sum::<usize>();
            while batch.len() < options.batch
                && bytes < MAX_BATCH_BYTES
                && reader.has_next().await?
            {
                let message = reader.next().await?;
                bytes += message.payload.len();
                batch.push(copy_of(message));
            }
            if !batch.is_empty() {
                let count = batch.len() as u64;
                let first = batch
                    .first()
                    .and_then(|m| m.properties.get(SOURCE_ID_PROPERTY).cloned());
                let ids = producer.send_batch(std::mem::take(&mut batch)).await?;
                tracing::debug!(channel = %self.channel, ?first, first_target = ?ids.first().map(|i| encode_hex(i.as_bytes())), count, "migration: batch written");
                self.stats.copied.fetch_add(count, Ordering::Relaxed);
                self.stats.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
                if *stop.borrow() {
                    return Ok(());
                }
                continue;
            }
            self.stats.caught_up();
            wake.notify_one();
            if !options.follow || *stop.borrow() {
                return Ok(());
            }
            tokio::select! {
                message = reader.next() => {
                    self.stats.behind.store(true, Ordering::Release);
                    batch.push(copy_of(message?));
                }
                _ = stop.wait_for(|stop| *stop) => return Ok(()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use msgstream::base::SharedStr;
    use msgstream::mq::Delivery;

    use super::*;

    #[test]
    fn a_copy_names_its_latest_source() {
        let mut properties = msgstream::base::Properties::new();
        properties.insert("traceparent".into(), "00-ab-cd-01".into());
        properties.insert(SOURCE_ID_PROPERTY.into(), "0000000000000001".into());
        let copy = copy_of(Message {
            topic: SharedStr::from("a"),
            id: MessageId::from_u64(0x2a),
            payload: b"payload".to_vec().into(),
            properties,
            delivery: Delivery::default(),
        });
        assert_eq!(&copy.payload[..], b"payload");
        assert_eq!(copy.properties["traceparent"], "00-ab-cd-01");
        assert_eq!(
            copy.properties[SOURCE_ID_PROPERTY], "000000000000002a",
            "a message migrated twice names the source it was copied from last"
        );
    }

    #[test]
    fn lag_is_zero_when_caught_up_and_unknown_before() {
        let stats = ChannelStats::new("a", false);
        assert_eq!(stats.snapshot().lag, None, "never caught up");
        stats.caught_up();
        assert_eq!(stats.snapshot().lag, Some(Duration::ZERO));
        stats.behind.store(true, Ordering::Release);
        assert!(stats
            .snapshot()
            .lag
            .is_some_and(|lag| lag < Duration::from_secs(60)));
    }
}
