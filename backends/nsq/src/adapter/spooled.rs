//! `SpooledConsumer`: a subscription read one message in flight at a time, for consumers that
//! must see a channel in order where the server has no ordered channel with a settable commit
//! point (upstream nsqd; the fork without `nsqd_http`).
//!
//! **One in flight.** The subscription is read with RDY 1: nsqd sends the channel's next
//! message only once the previous one is answered, so deliveries come in the order nsqd holds
//! them. The streams ack only once the application had a pack, which holds several messages of
//! a channel, so a message cannot wait for its ack on the server: a pump task writes each
//! delivery to the subscription's [`Spool`] and only then FINs it, at once, whatever the
//! application is doing, so nothing stays in flight long enough to time out and come back
//! behind newer messages. The application is handed messages from the spool, in spool order,
//! and its acks are written there. A consumer of the subscription started later (after
//! `close`, a drop, or the process dying) hands over the spool's unacked messages first, then
//! what the pump reads on: a restart from the subscription is at-least-once, as on every
//! backend, and nothing FINed is lost with the process.
//!
//! **Bounded.** The pump stops taking messages from nsqd once [`AHEAD`] spooled messages wait
//! to be handed over; the one message nsqd has sent meanwhile is TOUCHed until there is room.
//!
//! **Redeliveries.** If the process dies between a spool write and its FIN reaching nsqd, nsqd
//! sends the message again; the spool knows its NSQ id, so it is FINed and not spooled twice.
//!
//! **Acks** name messages by id; on upstream nsqd that is the producer's stamp, which two
//! producers may share, so an ack takes the oldest handed-over message with that id (the
//! streams ack in arrival order).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use msgstream::mq::{Acker, Consumer, ConsumerOptions, Delivery, Lease, Message, MessageId};
use msgstream::msg::SharedStr;
use msgstream::sync::lock;
use msgstream::{Error, Result};
use tokio::sync::Notify;

use super::client::Shared;
use super::{delivered_message, BACKEND};
use crate::codec::{ConsumeOffset, MsgId};
use crate::consumer::Consumer as NsqPush;
use crate::message::Message as NsqMessage;
use crate::spool::{Spool, SpoolSync, Spooled};

/// Most spooled messages waiting to be handed over before the pump stops reading.
const AHEAD: usize = 4096;

/// How long the pump waits after a failed spool write before it tries again.
const RETRY_AFTER: Duration = Duration::from_millis(500);

/// The spool and the bookkeeping around it, shared by the consumer, its pump and its ackers.
struct Journal {
    /// `None` once the consumer closed: the spool's lock goes with it, so the next consumer of
    /// the subscription can open it even while old ackers live on.
    spool: Mutex<Option<Spool>>,
    /// The seq of the next message to hand over.
    cursor: AtomicU64,
    /// Below this seq, messages are handed over from the spool file (what a previous consumer
    /// left unacked); from it on, from `ready`.
    replay_end: u64,
    /// Messages the pump spooled, not handed over yet (at most [`AHEAD`]).
    ready: Mutex<VecDeque<Spooled>>,
    /// Handed-over, unacked messages (id and seq), oldest first. The streams ack in arrival
    /// order, so an ack almost always takes the front: no map, no allocation per message.
    handed: Mutex<VecDeque<(MessageId, u64)>>,
    /// Seqs acked through `stage`, written by the next `flush`.
    staged: Mutex<Vec<u64>>,
    /// A spool write that failed, reported by the next `recv`.
    failed: Mutex<Option<Error>>,
    /// The pump spooled a message (or failed to).
    spooled: Notify,
    /// The consumer handed messages over: there may be room for the pump.
    room: Notify,
    /// The pump stopped: what the spool holds is all there is.
    ended: AtomicBool,
    sync: SpoolSync,
    closed: AtomicBool,
}

impl Journal {
    /// The journal of `spool`, open, nothing handed over yet.
    fn new(spool: Spool, sync: SpoolSync) -> Journal {
        Journal {
            replay_end: spool.next_seq(),
            spool: Mutex::new(Some(spool)),
            cursor: AtomicU64::new(0),
            ready: Mutex::default(),
            handed: Mutex::default(),
            staged: Mutex::default(),
            failed: Mutex::default(),
            spooled: Notify::new(),
            room: Notify::new(),
            ended: AtomicBool::new(false),
            sync,
            closed: AtomicBool::new(false),
        }
    }

    fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            Err(Error::Closed("nsq consumer"))
        } else {
            Ok(())
        }
    }

    fn stage(&self, message: &Message) -> Result<()> {
        self.check_open()?;
        let seq = {
            let mut handed = lock(&self.handed);
            let Some(at) = handed.iter().position(|(id, _)| *id == message.id) else {
                // Never handed over, or acked already: nothing to do.
                return Ok(());
            };
            handed.remove(at).map(|(_, seq)| seq)
        };
        lock(&self.staged).extend(seq);
        Ok(())
    }

    /// Writes the staged acks; they stay staged if the write fails.
    async fn flush(self: &Arc<Self>) -> Result<()> {
        self.check_open()?;
        let journal = self.clone();
        run(move || {
            let mut staged = lock(&journal.staged);
            if staged.is_empty() {
                return Ok(());
            }
            let mut spool = lock(&journal.spool);
            let spool = spool.as_mut().ok_or(Error::Closed("nsq consumer"))?;
            spool.ack(&staged)?;
            staged.clear();
            Ok(())
        })
        .await
    }

    /// Up to `max` spooled messages not handed over yet: first what a previous consumer left
    /// unacked (read back from the file), then what the pump spooled since.
    async fn next(self: &Arc<Self>, max: usize) -> Result<Vec<Spooled>> {
        let cursor = self.cursor.load(Ordering::Acquire);
        if cursor < self.replay_end {
            let journal = self.clone();
            let left = run(move || {
                let spool = lock(&journal.spool);
                let spool = spool.as_ref().ok_or(Error::Closed("nsq consumer"))?;
                spool.read_from(cursor, max)
            })
            .await?;
            let left: Vec<Spooled> = left
                .into_iter()
                .take_while(|m| m.seq < self.replay_end)
                .collect();
            if !left.is_empty() {
                return Ok(left);
            }
            // Acked meanwhile: the rest comes from the pump.
            self.cursor.store(self.replay_end, Ordering::Release);
        }
        let mut ready = lock(&self.ready);
        let take = ready.len().min(max);
        Ok(ready.drain(..take).collect())
    }

    fn handed_over(&self, id: &MessageId, seq: u64) {
        lock(&self.handed).push_back((id.clone(), seq));
        self.cursor.store(seq + 1, Ordering::Release);
        self.room.notify_one();
    }

    /// Spooled messages waiting in `ready`.
    fn ahead(&self) -> usize {
        lock(&self.ready).len()
    }

    /// Whether the spool holds the message nsqd calls `nsq_id`.
    fn holds(&self, nsq_id: &[u8; 16]) -> bool {
        lock(&self.spool).as_ref().is_some_and(|s| s.holds(nsq_id))
    }

    /// Spools a delivery and queues it for hand-over. A synced append runs on the blocking
    /// pool; a buffered one is a `write(2)` into the page cache, the same cost class as the
    /// socket write that FINs it, so it runs here (the hop to the pool cost a sixth of the
    /// throughput in `sub mode=spooled`).
    async fn append(self: &Arc<Self>, nsq: &NsqMessage) -> Result<()> {
        let (nsq_id, position, body) = (nsq.id().0, nsq.position(), nsq.body().clone());
        let journal = self.clone();
        let write = move || {
            let seq = {
                let mut spool = lock(&journal.spool);
                let spool = spool.as_mut().ok_or(Error::Closed("nsq consumer"))?;
                spool.append(nsq_id, position, &body)?
            };
            lock(&journal.ready).push_back(Spooled {
                seq,
                nsq_id,
                position,
                body,
            });
            Ok(())
        };
        if self.sync == SpoolSync::SyncData {
            run(write).await
        } else {
            write()
        }
    }
}

/// Runs blocking spool work on tokio's blocking pool.
async fn run<T: Send + 'static>(work: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| Error::backend(BACKEND, format!("spool task failed: {e}")))?
}

/// The pump: spools each delivery, then FINs it; stops when the reading consumer stops.
///
/// Also while the consumer closes: what nsqd sent before it took the CLS is spooled too (the
/// next consumer of the subscription gets it first, in order), not requeued, because upstream
/// nsqd would put a requeued message behind everything already waiting in the channel.
async fn pump(journal: Arc<Journal>, reading: Arc<NsqPush>, topic: String, subscription: String) {
    while let Some(nsq) = reading.recv().await {
        if journal.holds(&nsq.id().0) {
            // Spooled before the process died, its FIN lost.
            let _ = nsq.finish().await;
            continue;
        }
        if nsq.attempts() > 1 {
            super::redelivery::report(&topic, &subscription, &nsq);
        }
        wait_for_room(&journal, &nsq).await;
        match journal.append(&nsq).await {
            Ok(()) => {
                if let Err(e) = nsq.finish().await {
                    // Spooled: if nsqd sends it again, the spool recognises it.
                    tracing::debug!("FIN of a spooled message: {e}");
                }
            }
            Err(e) => {
                // Not spooled, so not FINed: nsqd sends it again.
                let _ = nsq.requeue_without_backoff(Some(Duration::ZERO)).await;
                if journal.closed.load(Ordering::Acquire) {
                    continue;
                }
                tracing::warn!("spool write failed; retrying: {e}");
                *lock(&journal.failed) = Some(e);
                tokio::time::sleep(RETRY_AFTER).await;
            }
        }
        journal.spooled.notify_one();
    }
    journal.ended.store(true, Ordering::Release);
    journal.spooled.notify_one();
}

/// Holds `nsq` (TOUCHed so it does not time out) while [`AHEAD`] messages wait.
async fn wait_for_room(journal: &Journal, nsq: &NsqMessage) {
    let every = nsq
        .msg_timeout()
        .map_or(Duration::from_secs(15), |t| t / 3)
        .max(Duration::from_millis(100));
    while journal.ahead() >= AHEAD && !journal.closed.load(Ordering::Acquire) {
        tokio::select! {
            _ = journal.room.notified() => {}
            _ = tokio::time::sleep(every) => {
                let _ = nsq.touch().await;
            }
        }
    }
}

struct JournalAcker(Arc<Journal>);

#[async_trait]
impl Acker for JournalAcker {
    async fn ack(&self, message: &Message) -> Result<()> {
        self.0.stage(message)?;
        self.0.flush().await
    }

    async fn stage(&self, message: &Message) -> Result<()> {
        self.0.stage(message)
    }

    async fn flush(&self) -> Result<()> {
        self.0.flush().await
    }
}

/// A consumer of one subscription, one message in flight, through its spool.
pub(crate) struct SpooledConsumer {
    shared: Arc<Shared>,
    topic: String,
    subscription: String,
    topic_name: SharedStr,
    reading: Option<Arc<NsqPush>>,
    pump: Option<tokio::task::JoinHandle<()>>,
    journal: Arc<Journal>,
    /// This consumer's hold of the subscription, given back once its spool is released (by
    /// `close`, or by the task a drop leaves behind), so a new consumer of the subscription in
    /// this client never finds the spool locked.
    lease: Option<Lease>,
}

impl SpooledConsumer {
    /// Opens the subscription's spool (`Error::SubscriptionBusy` if another process holds it),
    /// then subscribes with RDY 1 from `offset` (the fork) or where nsqd continues.
    pub(crate) async fn start(
        shared: Arc<Shared>,
        options: &ConsumerOptions,
        offset: Option<ConsumeOffset>,
        lease: Lease,
    ) -> Result<SpooledConsumer> {
        let (topic, subscription) = (options.topic.clone(), options.subscription.clone());
        let (dir, sync) = (shared.config.spool_dir.clone(), shared.config.spool_sync);
        let spool = {
            let (topic, subscription) = (topic.clone(), subscription.clone());
            run(move || Spool::open(&dir, &topic, &subscription, sync)).await?
        };
        let mut config = shared.consumer_config(&topic, &subscription, offset);
        config.max_in_flight = 1;
        // Every delivery is spooled and FINed; none is ever given up.
        config.max_attempts = 0;
        let reading = Arc::new(shared.connect_push(config).await?);
        let journal = Arc::new(Journal::new(spool, sync));
        let pump = tokio::spawn(pump(
            journal.clone(),
            reading.clone(),
            topic.clone(),
            subscription.clone(),
        ));
        Ok(SpooledConsumer {
            topic_name: SharedStr::interned(&topic),
            shared,
            topic,
            subscription,
            reading: Some(reading),
            pump: Some(pump),
            journal,
            lease: Some(lease),
        })
    }

    /// Hands over spooled messages: up to `max`, waiting for the first. An undecodable one is
    /// reported alone, in its place (and counts as handed over: it never will decode).
    async fn hand_over(&mut self, max: usize) -> Result<Vec<Message>> {
        loop {
            if self.journal.check_open().is_err() || self.shared.check_open().is_err() {
                return Ok(Vec::new());
            }
            if let Some(e) = lock(&self.journal.failed).take() {
                return Err(e);
            }
            let ended = self.journal.ended.load(Ordering::Acquire);
            let spooled = self.journal.next(max).await?;
            if spooled.is_empty() {
                if ended {
                    return Ok(Vec::new());
                }
                self.journal.spooled.notified().await;
                continue;
            }
            let mut batch = Vec::with_capacity(spooled.len());
            for m in spooled {
                let message = delivered_message(
                    &self.topic_name,
                    self.shared.partition(),
                    &MsgId(m.nsq_id),
                    &m.body,
                    m.position,
                    Delivery::default(),
                );
                match message {
                    Ok(message) => {
                        self.journal.handed_over(&message.id, m.seq);
                        batch.push(message);
                    }
                    Err(e) if batch.is_empty() => {
                        self.journal.cursor.store(m.seq + 1, Ordering::Release);
                        // Acked at once: nothing can ack it later.
                        let journal = self.journal.clone();
                        run(move || match lock(&journal.spool).as_mut() {
                            Some(spool) => spool.ack(&[m.seq]),
                            None => Ok(()),
                        })
                        .await?;
                        return Err(e);
                    }
                    Err(_) => break,
                }
            }
            return Ok(batch);
        }
    }

    /// Stops reading: CLS, then the pump spools what nsqd had sent before it (see [`pump`])
    /// and ends with the reading consumer; then releases the spool.
    async fn shut(
        reading: Option<Arc<NsqPush>>,
        pump: Option<tokio::task::JoinHandle<()>>,
        journal: Arc<Journal>,
    ) {
        if let Some(reading) = &reading {
            reading.stop_intake().await;
        }
        if let Some(pump) = pump {
            let _ = pump.await;
        }
        if let Some(reading) = reading {
            reading.stop().await;
        }
        lock(&journal.spool).take();
    }
}

#[async_trait]
impl Consumer for SpooledConsumer {
    fn topic(&self) -> &str {
        &self.topic
    }

    fn subscription(&self) -> &str {
        &self.subscription
    }

    async fn recv(&mut self) -> Result<Option<Message>> {
        Ok(self.hand_over(1).await?.into_iter().next())
    }

    async fn recv_batch(&mut self, max: usize) -> Result<Vec<Message>> {
        if max == 0 {
            return Ok(Vec::new());
        }
        self.hand_over(max).await
    }

    async fn ack(&self, message: &Message) -> Result<()> {
        JournalAcker(self.journal.clone()).ack(message).await
    }

    fn acker(&self) -> Arc<dyn Acker> {
        Arc::new(JournalAcker(self.journal.clone()))
    }

    async fn seek(&mut self, _id: &MessageId, _inclusive: bool) -> Result<()> {
        self.shared.check_open()?;
        self.journal.check_open()?;
        Err(Error::Unsupported {
            backend: BACKEND,
            what: "seek (needs extensions = partitions and nsqd_http)",
        })
    }

    async fn latest_message_id(&self) -> Result<Option<MessageId>> {
        super::consumer::latest_message_id(&self.shared, &self.topic).await
    }

    async fn close(&mut self) {
        if self.journal.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        self.journal.room.notify_one();
        SpooledConsumer::shut(self.reading.take(), self.pump.take(), self.journal.clone()).await;
        self.lease.take();
    }
}

impl Drop for SpooledConsumer {
    fn drop(&mut self) {
        if self.journal.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        self.journal.room.notify_one();
        let (reading, pump, journal, lease) = (
            self.reading.take(),
            self.pump.take(),
            self.journal.clone(),
            self.lease.take(),
        );
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    SpooledConsumer::shut(reading, pump, journal).await;
                    drop(lease);
                });
            }
            Err(_) => {
                lock(&journal.spool).take();
                drop(lease);
            }
        }
    }
}

#[cfg(test)]
#[path = "spooled_tests.rs"]
mod tests;
