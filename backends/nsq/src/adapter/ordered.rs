//! `OrderedConsumer` (extensions with `nsqd_http`): a subscription read strictly in offset
//! order through the fork's ordered channels, for consumers that ask for order
//! (`ConsumerOptions::ordered`: the timetick-aligned stream).
//!
//! **Why the reading and the commit point are two channels.** An ordered channel
//! (`SUB_ORDERED`) sends a partition's next message only once the previous one is FINed,
//! whatever RDY says (protocols/nsq.md §2.5). The streams ack a message only once the
//! application has had the pack it belongs to, and a pack holds several messages of one
//! channel (at least a message and its tick), so FINing on ack would wait forever. So the
//! reading side is an ephemeral ordered channel that FINs each message on receipt, and the
//! subscription's NSQ channel (which has no client) holds the commit point: each ack moves it
//! with `/channel/setoffset` and returns once nsqd answered. A restart reads from there, so
//! restarting from the subscription stays at-least-once, as on every other backend.
//!
//! **No gap, no repeat.** Each delivery must sit at the offset where the previous one ended.
//! A delivery elsewhere (the ephemeral channel was re-created by a reconnect and started at
//! the server's choice) restarts the reading channel at the expected offset. If the restarted
//! channel's first message is again further on, the server holds nothing in between (retention
//! removed it): that is accepted with a warning, as any consumer would find it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use msgstream::mq::{
    Acker, Consumer, ConsumerOptions, Delivery, DeliveryEpoch, Lease, Message, MessageId,
};
use msgstream::msg::SharedStr;
use msgstream::{Error, Result};

use super::client::Shared;
use super::{delivered_message, Position, BACKEND};
use crate::codec::ConsumeOffset;
use crate::consumer::{Consumer as NsqPush, SubscribeMode};
use crate::message::Message as NsqMessage;

/// The commit point: what acks move, shared by the consumer and its ackers.
struct CommitPoint {
    shared: Arc<Shared>,
    topic: String,
    subscription: String,
    /// The subscription channel's offset as last set (acks never move it back).
    committed: tokio::sync::Mutex<u64>,
    epoch: DeliveryEpoch,
    closed: AtomicBool,
}

impl CommitPoint {
    async fn ack(&self, message: &Message) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed("nsq consumer"));
        }
        self.epoch.check(message)?;
        let position = Position::parse(&message.id)?;
        let next = position.offset + u64::from(position.raw_size);
        let mut committed = self.committed.lock().await;
        if next <= *committed {
            return Ok(());
        }
        self.move_to(next).await?;
        *committed = next;
        Ok(())
    }

    async fn move_to(&self, offset: u64) -> Result<()> {
        self.shared
            .admin
            .set_offset(
                &self.topic,
                &self.subscription,
                ConsumeOffset::VirtualQueue(offset),
            )
            .await
    }
}

struct CommitAcker(Arc<CommitPoint>);

#[async_trait]
impl Acker for CommitAcker {
    async fn ack(&self, message: &Message) -> Result<()> {
        self.0.ack(message).await
    }
}

/// What to do with a delivery at `offset` when the message at `next` is due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Placement {
    /// Hand it over.
    InPlace,
    /// Restart the reading channel at `next` (a reconnect started it elsewhere).
    Restart,
    /// Just restarted at `next` and the server's first message is further on: nothing is
    /// stored in between (retention), so hand it over.
    Gap,
    /// Just restarted at `next` and the server went back: an error.
    Behind,
}

fn placement(next: u64, offset: u64, restarted: bool) -> Placement {
    if offset == next {
        Placement::InPlace
    } else if !restarted {
        Placement::Restart
    } else if offset > next {
        Placement::Gap
    } else {
        Placement::Behind
    }
}

/// A name no other ordered reading channel of this process uses.
fn reading_channel() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "ordered-{}-{}#ephemeral",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// A consumer of one subscription, in strict offset order.
pub(crate) struct OrderedConsumer {
    shared: Arc<Shared>,
    topic_name: SharedStr,
    partition: u32,
    reading: Option<NsqPush>,
    /// Offset of the next message to hand over.
    next: u64,
    /// `next` as the reading channel's dials see it: a reconnect re-creates the ephemeral
    /// channel there.
    resume: Arc<AtomicU64>,
    /// Set when the reading channel was restarted at `next` because of an unexpected offset.
    restarted: bool,
    commit: Arc<CommitPoint>,
    /// This consumer's hold of the subscription, given back by `close` or with the consumer.
    lease: Lease,
}

impl OrderedConsumer {
    /// Starts at `start` (the subscription's own position, or the initial position of a new
    /// one), which the subscription channel is first set to, so it exists and a restart finds
    /// the same point.
    pub(crate) async fn start(
        shared: Arc<Shared>,
        options: &ConsumerOptions,
        start: Option<ConsumeOffset>,
        lease: Lease,
    ) -> Result<OrderedConsumer> {
        let admin = &shared.admin;
        let (topic, subscription) = (&options.topic, &options.subscription);
        let next = match start {
            Some(ConsumeOffset::VirtualQueue(offset)) => offset,
            other => {
                if let Some(offset) = other {
                    admin.set_offset(topic, subscription, offset).await?;
                }
                admin
                    .confirmed_offset(topic, subscription)
                    .await?
                    .ok_or_else(|| {
                        Error::backend(
                            BACKEND,
                            format!(
                                "nsqd reports no confirmed offset (depth_size) of {topic}/{subscription}: an ordered subscription needs it"
                            ),
                        )
                    })?
            }
        };
        admin
            .set_offset(topic, subscription, ConsumeOffset::VirtualQueue(next))
            .await?;
        let commit = Arc::new(CommitPoint {
            shared: shared.clone(),
            topic: topic.clone(),
            subscription: subscription.clone(),
            committed: tokio::sync::Mutex::new(next),
            epoch: DeliveryEpoch::new(0),
            closed: AtomicBool::new(false),
        });
        let mut consumer = OrderedConsumer {
            partition: shared.partition().unwrap_or(0),
            shared,
            topic_name: SharedStr::interned(topic),
            reading: None,
            next,
            resume: Arc::new(AtomicU64::new(next)),
            restarted: false,
            commit,
            lease,
        };
        consumer.read_from(next).await?;
        Ok(consumer)
    }

    /// (Re)starts the reading channel at `offset`: a new ephemeral channel, so nothing of the
    /// old one can leak into it.
    async fn read_from(&mut self, offset: u64) -> Result<()> {
        self.stop_reading().await;
        self.next = offset;
        self.resume.store(offset, Ordering::Release);
        let mut config = self
            .shared
            .consumer_config(&self.commit.topic, &reading_channel(), None);
        config.mode = SubscribeMode::Ordered;
        config.resume_at = Some(self.resume.clone());
        self.reading = Some(self.shared.connect_push(config).await?);
        Ok(())
    }

    async fn stop_reading(&mut self) {
        if let Some(reading) = self.reading.take() {
            reading.stop().await;
        }
    }

    /// Checks a delivery's place: `Ok(true)` to hand it over, `Ok(false)` when the reading
    /// channel was restarted instead.
    async fn place(&mut self, nsq: &NsqMessage) -> Result<bool> {
        let (offset, raw_size) = nsq.position().ok_or_else(|| {
            Error::backend(
                BACKEND,
                "a delivery without an offset on a SUB_ORDERED channel",
            )
        })?;
        match placement(self.next, offset, self.restarted) {
            Placement::InPlace => {}
            Placement::Restart => {
                tracing::debug!(
                    topic = %self.commit.topic,
                    expected = self.next,
                    offset,
                    "an ordered delivery out of place; restarting the reading channel"
                );
                self.restarted = true;
                self.read_from(self.next).await?;
                return Ok(false);
            }
            Placement::Gap => tracing::warn!(
                topic = %self.commit.topic,
                subscription = %self.commit.subscription,
                from = self.next,
                to = offset,
                "the partition holds nothing between these offsets (retention): continuing"
            ),
            Placement::Behind => {
                // The next delivery tries a restart again.
                self.restarted = false;
                return Err(Error::backend(
                    BACKEND,
                    format!(
                        "nsqd delivered offset {offset} to a channel just set to {}",
                        self.next
                    ),
                ));
            }
        }
        self.restarted = false;
        self.next = offset + u64::from(raw_size);
        self.resume.store(self.next, Ordering::Release);
        Ok(true)
    }

    fn to_message(&self, nsq: &NsqMessage) -> Result<Message> {
        let delivery = Delivery {
            epoch: self.commit.epoch.current(),
        };
        delivered_message(
            &self.topic_name,
            Some(self.partition),
            &nsq.id(),
            nsq.body(),
            nsq.position(),
            delivery,
        )
    }
}

#[async_trait]
impl Consumer for OrderedConsumer {
    fn topic(&self) -> &str {
        &self.commit.topic
    }

    fn subscription(&self) -> &str {
        &self.commit.subscription
    }

    async fn recv(&mut self) -> Result<Option<Message>> {
        loop {
            if self.commit.closed.load(Ordering::Acquire) || self.shared.check_open().is_err() {
                return Ok(None);
            }
            let Some(reading) = self.reading.as_ref() else {
                return Ok(None);
            };
            let Some(nsq) = reading.recv().await else {
                return Ok(None);
            };
            if self.place(&nsq).await? {
                // The ordered channel sends nothing more until this FIN; the commit point, not
                // the FIN, is what a restart resumes from.
                if let Err(e) = nsq.finish().await {
                    tracing::debug!("ordered FIN: {e}");
                }
                // An undecodable body is reported in its place; the next recv goes on after it.
                return self.to_message(&nsq).map(Some);
            }
        }
    }

    /// One message at a time: the ordered channel has never more than one in flight.
    async fn recv_batch(&mut self, max: usize) -> Result<Vec<Message>> {
        if max == 0 {
            return Ok(Vec::new());
        }
        Ok(self.recv().await?.into_iter().collect())
    }

    async fn ack(&self, message: &Message) -> Result<()> {
        self.commit.ack(message).await
    }

    fn acker(&self) -> Arc<dyn Acker> {
        Arc::new(CommitAcker(self.commit.clone()))
    }

    async fn seek(&mut self, id: &MessageId, inclusive: bool) -> Result<()> {
        self.shared.check_open()?;
        if self.commit.closed.load(Ordering::Acquire) {
            return Err(Error::Closed("nsq consumer"));
        }
        let offset = self
            .shared
            .admin
            .start_offset(&self.commit.topic, self.partition, id, inclusive)
            .await?;
        {
            let mut committed = self.commit.committed.lock().await;
            self.commit.move_to(offset).await?;
            *committed = offset;
        }
        self.commit.epoch.bump();
        self.restarted = false;
        // The subscription's offset has moved: a failure from here on says so.
        self.read_from(offset)
            .await
            .map_err(|source| Error::SeekMoved {
                channel: self.commit.topic.clone(),
                source: Box::new(source),
            })
    }

    async fn latest_message_id(&self) -> Result<Option<MessageId>> {
        super::consumer::latest_message_id(&self.shared, &self.commit.topic).await
    }

    async fn close(&mut self) {
        if self.commit.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        self.stop_reading().await;
        self.lease.release();
    }
}

impl Drop for OrderedConsumer {
    fn drop(&mut self) {
        if self.commit.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        if let Some(reading) = self.reading.take() {
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move { reading.stop().await });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deliveries_out_of_place_restart_once_then_count_as_a_gap_or_an_error() {
        assert_eq!(placement(70, 70, false), Placement::InPlace);
        assert_eq!(placement(70, 70, true), Placement::InPlace);
        // A re-created channel that started at the end, or at the beginning.
        assert_eq!(placement(70, 140, false), Placement::Restart);
        assert_eq!(placement(70, 0, false), Placement::Restart);
        // Restarted at 70: the first message is further on only if nothing lies between.
        assert_eq!(placement(70, 140, true), Placement::Gap);
        assert_eq!(placement(70, 35, true), Placement::Behind);
    }
}
