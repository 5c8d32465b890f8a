//! `NsqConsumer`: one subscription (NSQ channel) of one topic.
//!
//! Delivered messages stay in flight on the server until acked (FIN); a background task
//! TOUCHes them, at least three times per message timeout of their connection, so a slow
//! application never sees a timeout redelivery out of order. Closing
//! (or dropping) requeues every unacked message in id order with no delay, so a re-subscribe
//! sees them first and in order: at-least-once. With consume offsets (a Youzan cluster) acks are
//! cumulative.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

use async_trait::async_trait;
use msgstream::mq::{
    Acker, Consumer, ConsumerOptions, Delivery, DeliveryEpoch, Lease, Message, MessageId,
};
use msgstream::msg::SharedStr;
use msgstream::sync::lock;
use msgstream::{Error, Result};

use super::client::Shared;
use super::{delivered_message, Position, BACKEND};
use crate::codec::{ConsumeOffset, MsgId};
use crate::consumer::Consumer as NsqPush;
use crate::message::Message as NsqMessage;

/// Longest touch interval: well inside nsqd's default 60 s message timeout. A connection
/// with a shorter timeout is touched every third of it.
const TOUCH_EVERY: Duration = Duration::from_secs(15);

/// How long a subscription holding `max_in_flight` unacked messages waits for a delivery
/// before it warns that it waits for acks (see `NsqConsumer::next_delivery`).
const STALLED_AFTER: Duration = Duration::from_secs(2);

/// Shortest touch interval (nsqd's shortest message timeout is 1 s).
const TOUCH_AT_MOST_EVERY: Duration = Duration::from_millis(100);

/// Unacked deliveries by message id, then NSQ id: foreign bodies upstream are told apart by
/// their NSQ ids, and two copies of one message (a publish retried after a broken connection)
/// are both held and both finished by its ack.
type Pending = BTreeMap<(MessageId, MsgId), Arc<NsqMessage>>;

/// The lowest and highest NSQ ids, bounding a message id's entries in [`Pending`].
const FIRST_NSQ_ID: MsgId = MsgId([0; 16]);
const LAST_NSQ_ID: MsgId = MsgId([u8::MAX; 16]);

/// Acking state shared by the consumer, its ackers and its touch task.
struct Acks {
    pending: Mutex<Pending>,
    epoch: DeliveryEpoch,
    closed: AtomicBool,
    cumulative: bool,
    /// The touch task's interval in nanoseconds: a third of the shortest message timeout a
    /// delivery came with, at most [`TOUCH_EVERY`].
    touch_every: AtomicU64,
    /// Wakes the touch task when the interval shrank, so a message delivered while it slept
    /// the longer interval is touched in time.
    touch_sooner: Notify,
}

impl Acks {
    async fn ack(&self, message: &Message) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed("nsq consumer"));
        }
        self.epoch.check(message)?;
        let done: Vec<Arc<NsqMessage>> = {
            let key = |nsq_id| (message.id.clone(), nsq_id);
            let mut pending = lock(&self.pending);
            // Later messages stay pending.
            let after = pending
                .range((Bound::Excluded(key(LAST_NSQ_ID)), Bound::Unbounded))
                .next()
                .map(|(k, _)| k.clone());
            let later = after.map_or_else(BTreeMap::new, |k| pending.split_off(&k));
            let mut upto = std::mem::replace(&mut *pending, later);
            if !self.cumulative {
                // Earlier ones too.
                let this = upto.split_off(&key(FIRST_NSQ_ID));
                pending.append(&mut upto);
                upto = this;
            }
            upto.into_values().collect()
        };
        let stale = || {
            Error::StaleDelivery(format!(
                "message {:?} came over a connection that has since dropped; it will be delivered again",
                message.id
            ))
        };
        // Highest offset first: the server's confirmed offset is its lowest unfinished
        // message, so if this process dies with only some of these FINs written, the channel
        // still resumes at the first of them, never in the middle of what this ack covers.
        for nsq in done.iter().rev() {
            nsq.finish().await.map_err(|_| stale())?;
        }
        // FIN has no reply, so the most an ack can wait for is the FINs being on the socket
        // (once per connection: each writes in order). That is not quite the mq contract's
        // "survives this process dying": a process killed while its connection holds unread
        // deliveries has the connection reset, and the kernel drops what it had not sent yet,
        // FINs included (seen in the restart test against a server in another process).
        // Those messages come again: redelivery, never a loss.
        let mut flushed: Vec<&crate::message::Origin> = Vec::new();
        for nsq in &done {
            if !flushed.contains(&nsq.origin()) {
                nsq.flush().await.map_err(|_| stale())?;
                flushed.push(nsq.origin());
            }
        }
        Ok(())
    }

    /// Requeues everything unacked, lowest id first, with no delay and no backoff.
    async fn requeue_all(&self) {
        let pending = std::mem::take(&mut *lock(&self.pending));
        for nsq in pending.into_values() {
            if let Err(e) = nsq.requeue_without_backoff(Some(Duration::ZERO)).await {
                tracing::debug!("requeue of an unacked message: {e}");
            }
        }
    }

    /// Holds `nsq` unacked: TOUCHed from now on by the touch task, at least three times per
    /// message timeout of its connection. (A redelivery of a message still pending, its
    /// connection dropped, replaces the old copy, which can no longer be answered.)
    fn hold(&self, id: MessageId, nsq: NsqMessage) {
        if let Some(timeout) = nsq.msg_timeout() {
            let every = (timeout / 3).clamp(TOUCH_AT_MOST_EVERY, TOUCH_EVERY);
            let every = u64::try_from(every.as_nanos()).unwrap_or(u64::MAX);
            if self.touch_every.fetch_min(every, Ordering::AcqRel) > every {
                self.touch_sooner.notify_one();
            }
        }
        lock(&self.pending).insert((id, nsq.id()), Arc::new(nsq));
    }

    /// The touch task: TOUCHes everything unacked every `touch_every`.
    async fn keep_touching(&self) {
        loop {
            let every = Duration::from_nanos(self.touch_every.load(Ordering::Acquire));
            tokio::select! {
                _ = tokio::time::sleep(every) => self.touch_all().await,
                // A shorter interval from now on: a message delivered just now is touched
                // within it.
                _ = self.touch_sooner.notified() => {}
            }
        }
    }

    async fn touch_all(&self) {
        let pending: Vec<Arc<NsqMessage>> = lock(&self.pending).values().cloned().collect();
        for nsq in pending {
            let _ = nsq.touch().await;
        }
    }
}

/// The id of the newest message of `topic`, as a consumer receives it.
pub(super) async fn latest_message_id(shared: &Shared, topic: &str) -> Result<Option<MessageId>> {
    shared.check_open()?;
    if !shared.capabilities().latest_id {
        return Err(Error::Unsupported {
            backend: BACKEND,
            what: "latest message id (needs a Youzan cluster's consume offsets and nsqd_http)",
        });
    }
    let latest = shared.admin.latest(topic).await?;
    Ok(latest.map(Position::id))
}

async fn shut(acks: &Acks, inner: Option<Arc<NsqPush>>) {
    if let Some(inner) = &inner {
        inner.stop_intake().await;
    }
    acks.requeue_all().await;
    if let Some(inner) = inner {
        inner.stop().await;
    }
}

struct SharedAcker(Arc<Acks>);

#[async_trait]
impl Acker for SharedAcker {
    async fn ack(&self, message: &Message) -> Result<()> {
        self.0.ack(message).await
    }
}

/// A consumer of one subscription.
pub(crate) struct NsqConsumer {
    shared: Arc<Shared>,
    topic: String,
    subscription: String,
    topic_name: SharedStr,
    inner: Option<Arc<NsqPush>>,
    acks: Arc<Acks>,
    toucher: tokio::task::JoinHandle<()>,
    /// A message `recv_batch` could not decode, reported by the next `recv`.
    undecodable: Option<NsqMessage>,
    /// Whether the current stretch of holding `max_in_flight` unacked messages was reported.
    starved: bool,
    /// This consumer's hold of the subscription, given back by `close` or with the consumer.
    lease: Lease,
}

impl NsqConsumer {
    pub(crate) async fn start(
        shared: Arc<Shared>,
        options: &ConsumerOptions,
        offset: Option<ConsumeOffset>,
        lease: Lease,
    ) -> Result<NsqConsumer> {
        let config = shared.consumer_config(&options.topic, &options.subscription, offset);
        let inner = shared.connect_push(config).await?;
        let acks = Arc::new(Acks {
            pending: Mutex::default(),
            epoch: DeliveryEpoch::new(0),
            closed: AtomicBool::new(false),
            cumulative: shared.offsets(),
            touch_every: AtomicU64::new(u64::try_from(TOUCH_EVERY.as_nanos()).unwrap_or(u64::MAX)),
            touch_sooner: Notify::new(),
        });
        let toucher = {
            let acks = acks.clone();
            tokio::spawn(async move { acks.keep_touching().await })
        };
        Ok(NsqConsumer {
            shared,
            topic: options.topic.clone(),
            subscription: options.subscription.clone(),
            topic_name: SharedStr::interned(&options.topic),
            inner: Some(Arc::new(inner)),
            acks,
            toucher,
            undecodable: None,
            starved: false,
            lease,
        })
    }

    fn to_message(&self, nsq: &NsqMessage) -> Result<Message> {
        let delivery = Delivery {
            epoch: self.acks.epoch.current(),
        };
        delivered_message(
            &self.topic_name,
            self.shared.partition(),
            &nsq.id(),
            nsq.body(),
            nsq.position(),
            delivery,
        )
    }

    /// The next delivery. Warns, once per stretch, when this subscription holds
    /// `max_in_flight` unacked messages and nothing came for [`STALLED_AFTER`]: nsqd sends a
    /// subscription no more than that many unanswered messages, and the streams ack only once
    /// a pack was handed over, so a timetick stream whose channel does not tick within
    /// `max_in_flight` messages would otherwise wait without a word. Shorter waits at the limit
    /// are a stream's normal flow (it acks as the application takes messages) and say nothing.
    async fn next_delivery(&mut self, inner: &NsqPush) -> Option<NsqMessage> {
        let limit = usize::try_from(self.shared.config.max_in_flight.max(1)).unwrap_or(usize::MAX);
        let held = || lock(&self.acks.pending).len();
        if held() < limit {
            self.starved = false;
        }
        if self.starved || held() < limit {
            return inner.recv().await;
        }
        // `Consumer::recv` is cancel-safe: a delivery racing the timer is not lost.
        tokio::select! {
            next = inner.recv() => return next,
            () = tokio::time::sleep(STALLED_AFTER) => {}
        }
        let held = held();
        if held >= limit {
            self.starved = true;
            tracing::warn!(
                topic = %self.topic,
                subscription = %self.subscription,
                held,
                "the subscription holds max_in_flight ({limit}) unacked messages, so nsqd sends \
                 it no more until some are acked; a timetick stream needs every channel to tick \
                 within max_in_flight messages: raise [nsq] max_in_flight"
            );
        }
        inner.recv().await
    }

    /// After a seek failed past the point where the old subscription was closed: the channel
    /// may or may not have moved to the target (nsqd may have taken the new offset before the
    /// SUB failed), so the consumer subscribes again where the channel now stands and the seek
    /// is reported as [`Error::SeekMoved`] (the stream then puts the channel back with another
    /// seek). If even that subscription fails, the consumer has no connection until a seek
    /// succeeds, and `recv` reports the consumer as ended.
    async fn read_on_after_failed_seek(&mut self, source: Error) -> Error {
        let config = self
            .shared
            .consumer_config(&self.topic, &self.subscription, None);
        match self.shared.connect_push(config).await {
            Ok(inner) => self.inner = Some(Arc::new(inner)),
            Err(e) => tracing::warn!(
                topic = %self.topic,
                subscription = %self.subscription,
                "re-subscribing after a failed seek failed too: {e}"
            ),
        }
        Error::SeekMoved {
            channel: self.topic.clone(),
            source: Box::new(source),
        }
    }

    /// Reports a delivery that came again (see `redelivery`).
    fn report_if_redelivered(&self, nsq: Option<&NsqMessage>) {
        if let Some(nsq) = nsq.filter(|nsq| nsq.attempts() > 1) {
            super::redelivery::report(&self.topic, &self.subscription, nsq);
        }
    }

    /// Stops the server's deliveries, requeues the unacked in id order (so they come back
    /// first and in order), then stops the push consumer gracefully.
    async fn shut(&mut self) {
        let inner = self.inner.take();
        shut(&self.acks, inner).await;
    }
}

#[async_trait]
impl Consumer for NsqConsumer {
    fn topic(&self) -> &str {
        &self.topic
    }

    fn subscription(&self) -> &str {
        &self.subscription
    }

    async fn recv(&mut self) -> Result<Option<Message>> {
        if self.acks.closed.load(Ordering::Acquire) || self.shared.check_open().is_err() {
            return Ok(None);
        }
        let Some(inner) = self.inner.clone() else {
            return Ok(None);
        };
        let next = match self.undecodable.take() {
            Some(nsq) => Some(nsq),
            None => {
                let next = self.next_delivery(&inner).await;
                self.report_if_redelivered(next.as_ref());
                next
            }
        };
        let Some(nsq) = next else {
            return Ok(None);
        };
        let message = match self.to_message(&nsq) {
            Ok(message) => message,
            Err(e) => {
                // A body that cannot be decoded never will be: FIN it so it is not redelivered
                // forever, and report it.
                let _ = nsq.finish().await;
                return Err(e);
            }
        };
        self.acks.hold(message.id.clone(), nsq);
        Ok(Some(message))
    }

    async fn recv_batch(&mut self, max: usize) -> Result<Vec<Message>> {
        let Some(first) = self.recv().await? else {
            return Ok(Vec::new());
        };
        let mut batch = vec![first];
        while batch.len() < max {
            let Some(inner) = self.inner.clone() else {
                break;
            };
            let Some(nsq) = inner.try_recv().await else {
                break;
            };
            self.report_if_redelivered(Some(&nsq));
            let Ok(message) = self.to_message(&nsq) else {
                // Reported by the next `recv`, in its place in the order.
                self.undecodable = Some(nsq);
                break;
            };
            self.acks.hold(message.id.clone(), nsq);
            batch.push(message);
        }
        Ok(batch)
    }

    async fn ack(&self, message: &Message) -> Result<()> {
        self.acks.ack(message).await
    }

    fn acker(&self) -> Arc<dyn Acker> {
        Arc::new(SharedAcker(self.acks.clone()))
    }

    async fn seek(&mut self, id: &MessageId, inclusive: bool) -> Result<()> {
        self.shared.check_open()?;
        if self.acks.closed.load(Ordering::Acquire) {
            return Err(Error::Closed("nsq consumer"));
        }
        let Some(partition) = self
            .shared
            .partition()
            .filter(|_| self.shared.capabilities().seek)
        else {
            return Err(Error::Unsupported {
                backend: BACKEND,
                what: "seek (needs a Youzan cluster's consume offsets and nsqd_http)",
            });
        };
        let offset = self
            .shared
            .admin
            .start_offset(&self.topic, partition, id, inclusive)
            .await?;
        // From here on the subscription is closed and its unacked messages are requeued:
        // whatever happens next is a reconnect at least, so earlier deliveries are stale.
        self.shut().await;
        self.acks.epoch.bump();
        let moved = async {
            self.shared
                .admin
                .wait_until_unsubscribed(&self.topic, &self.subscription)
                .await?;
            let config = self.shared.consumer_config(
                &self.topic,
                &self.subscription,
                Some(ConsumeOffset::VirtualQueue(offset)),
            );
            self.shared.connect_push(config).await
        }
        .await;
        match moved {
            Ok(inner) => {
                self.inner = Some(Arc::new(inner));
                Ok(())
            }
            Err(source) => Err(self.read_on_after_failed_seek(source).await),
        }
    }

    /// From the fork's `/stats` and `/message/get` (see `Admin::latest`); the id is the one
    /// this consumer receives for that message, so a seek to it is exact.
    async fn latest_message_id(&self) -> Result<Option<MessageId>> {
        latest_message_id(&self.shared, &self.topic).await
    }

    async fn close(&mut self) {
        if self.acks.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        self.toucher.abort();
        self.shut().await;
        self.lease.release();
    }
}

impl Drop for NsqConsumer {
    fn drop(&mut self) {
        if self.acks.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        self.toucher.abort();
        let (acks, inner) = (self.acks.clone(), self.inner.take());
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { shut(&acks, inner).await });
        }
    }
}
