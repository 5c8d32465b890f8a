//! Publishing: PUB, MPUB (atomic batches), DPUB, PUB with a partition, PUB_TRACE, over a pool
//! of nsqd connections with failover.
//!
//! Commands on one connection are pipelined: replies come back in command order, so each
//! caller waits for its own reply from a FIFO of waiters. Guarantees: a publish returns `Ok`
//! only after the server's `OK`; names and sizes the server would refuse are refused before
//! sending ([`Error::Invalid`]); a broken connection or a transient server refusal moves on to
//! the next nsqd (reconnecting lazily), while a permanent refusal (bad topic, bad message) is
//! returned at once; a server that stops reading fails each attempt within the connection's
//! `write_timeout` ([`Error::Timeout`] with `what: "write"`), one that stops answering within
//! its `read_timeout` (`what: "publish reply"`).

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use msgstream::sync::lock;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::codec::{validate_name, Command, TraceReceipt};
use crate::conn::{Conn, ConnConfig, Event, ReplyTo, Writer};
use crate::error::{Error, Result};

/// Producer settings.
#[derive(Debug, Clone)]
pub struct ProducerConfig {
    /// nsqd TCP addresses, tried in turn.
    pub nsqd: Vec<String>,
    /// Connection settings.
    pub conn: ConnConfig,
    /// Largest message body (nsqd's `max_msg_size`).
    pub max_msg_size: usize,
    /// Largest MPUB body (nsqd's `max_body_size`).
    pub max_body_size: usize,
}

impl Default for ProducerConfig {
    fn default() -> Self {
        ProducerConfig {
            nsqd: vec!["127.0.0.1:4150".into()],
            conn: ConnConfig::default(),
            max_msg_size: 1024 * 1024,
            max_body_size: 5 * 1024 * 1024,
        }
    }
}

/// The requests of one connection waiting for their replies, in command order: replies come
/// in command order, so each one answers the oldest waiter.
///
/// Senders queue their waiter with their command ([`crate::conn::Writer::request`]); the
/// reader moves them here when it runs out, one lock shared with senders per read of replies,
/// not per reply. With publishers on both workers of a runtime, every lock a publish or a
/// reply takes is a contended one.
struct Waiters {
    /// Taken by the reader (and the watchdog, once): older than every waiter still queued
    /// with the writer.
    answering: Mutex<VecDeque<ReplyTo>>,
    /// Replies received (only the reader writes it), what the watchdog reads progress from,
    /// alone on its cache line: publishers do not share it.
    answered: OwnLine<AtomicU64>,
    /// The watchdog gave up on the connection: its waiters failed with a timeout.
    timed_out: AtomicBool,
}

/// A value alone on its cache line (two 64-byte lines: adjacent lines are fetched together).
#[repr(align(128))]
struct OwnLine<T>(T);

impl<T> std::ops::Deref for OwnLine<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

impl Waiters {
    /// The oldest waiter, for the reply that just came.
    fn take(&self, writer: &Writer) -> Option<ReplyTo> {
        let mut answering = lock(&self.answering);
        if answering.is_empty() {
            writer.take_replies(&mut answering);
        }
        answering.pop_front()
    }

    /// Fails every waiting request with `error()`; the writer must be closed (no request can
    /// queue after this).
    fn fail_all(&self, writer: &Writer, error: impl Fn() -> Error) {
        let mut answering = lock(&self.answering);
        writer.take_all_replies(&mut answering);
        for reply_to in answering.drain(..) {
            let _ = reply_to.send(Err(error()));
        }
    }
}

/// One pipelined producer connection.
///
/// Replies are timed by one watchdog task per connection instead of a timer per request (a
/// timer wheel entry made and dropped for every publish was a visible part of the cost of a
/// single PUB): when requests wait and no reply came for a whole `read_timeout`, it fails
/// them all with [`Error::Timeout`] and closes the connection, which a later reply could no
/// longer be matched on. So a request fails at most `read_timeout` (plus a quarter, the
/// watchdog's period) after the connection's last reply, if its own has not come.
struct Link {
    conn: Conn,
    alive: Arc<AtomicBool>,
    watchdog: JoinHandle<()>,
}

impl Drop for Link {
    fn drop(&mut self) {
        self.watchdog.abort();
    }
}

impl Link {
    async fn open(addr: &str, config: &ConnConfig) -> Result<Link> {
        let waiters = Arc::new(Waiters {
            answering: Mutex::default(),
            answered: OwnLine(AtomicU64::new(0)),
            timed_out: AtomicBool::new(false),
        });
        let alive = Arc::new(AtomicBool::new(true));
        let (sink_waiters, sink_alive, sink_addr) =
            (waiters.clone(), alive.clone(), addr.to_string());
        let read_timeout = config.read_timeout;
        let conn = Conn::connect(
            addr,
            config,
            None,
            false,
            move |event, writer: &Arc<Writer>| {
                let reply = match event {
                    // The frame is a slice of the read buffer: handing it to the publisher would
                    // drop its reference count on the publisher's thread, one contended atomic per
                    // publish on a count every reply of the read shares. The common `OK` is
                    // answered with a static copy and the slice dropped here.
                    Event::Response(data) if data.as_ref() == b"OK" => {
                        Ok(Bytes::from_static(b"OK"))
                    }
                    Event::Response(data) => Ok(data),
                    Event::Error(error) => {
                        if error.is_fatal() {
                            // The server closes after a fatal error: no new request may use it.
                            sink_alive.store(false, Ordering::Release);
                        }
                        Err(Error::Server {
                            addr: sink_addr.clone(),
                            error,
                        })
                    }
                    Event::Message(_) => Err(Error::Protocol {
                        addr: sink_addr.clone(),
                        what: "a message on a producer connection".into(),
                    }),
                    Event::Closed(end) => {
                        sink_alive.store(false, Ordering::Release);
                        // Closed by the watchdog: the waiters' failure is its timeout. Closed
                        // because a write stalled (or a read): theirs is that timeout.
                        let timeout = if sink_waiters.timed_out.load(Ordering::Acquire) {
                            Some(("publish reply", read_timeout))
                        } else {
                            match end {
                                Some(Error::Timeout { what, after, .. }) => Some((what, after)),
                                _ => None,
                            }
                        };
                        match timeout {
                            Some((what, after)) => {
                                sink_waiters.fail_all(writer, || Error::Timeout {
                                    addr: sink_addr.clone(),
                                    what,
                                    after,
                                })
                            }
                            None => sink_waiters
                                .fail_all(writer, || Error::Closed("producer connection")),
                        }
                        return;
                    }
                };
                // Only the reader writes it: a plain load and store.
                let answered = sink_waiters.answered.load(Ordering::Relaxed);
                sink_waiters.answered.store(answered + 1, Ordering::Release);
                if let Some(reply_to) = sink_waiters.take(writer) {
                    let _ = reply_to.send(reply);
                }
            },
        )
        .await?;
        let watchdog = tokio::spawn(watchdog(
            addr.to_string(),
            conn.writer.clone(),
            waiters,
            alive.clone(),
            config.read_timeout,
        ));
        Ok(Link {
            conn,
            alive,
            watchdog,
        })
    }

    /// Queues one command; its reply (or the watchdog's timeout, or the connection's end)
    /// comes through the returned receiver. The command is encoded into the connection's
    /// pending writes and its waiter queued under one lock, so replies match waiters in
    /// command order, and concurrent requests share the connection's writes (see
    /// [`crate::conn::Writer`]).
    fn send(&self, encode: &impl Fn(&mut BytesMut)) -> Result<oneshot::Receiver<Result<Bytes>>> {
        let (tx, rx) = oneshot::channel();
        let queued = self.conn.writer.request(encode, tx);
        if let Err(e) = queued {
            self.alive.store(false, Ordering::Release);
            return Err(e);
        }
        Ok(rx)
    }
}

/// Gives up on the connection when requests wait and no reply came for a whole `timeout`
/// (checked every quarter of it): marks it dead, closes its writes (no request can queue
/// after that) and fails every waiting request with [`Error::Timeout`].
async fn watchdog(
    addr: String,
    writer: Arc<Writer>,
    waiters: Arc<Waiters>,
    alive: Arc<AtomicBool>,
    timeout: Duration,
) {
    let period = timeout / 4;
    let (mut answered, mut still) = (waiters.answered.load(Ordering::Acquire), Duration::ZERO);
    loop {
        tokio::time::sleep(period).await;
        let now_answered = waiters.answered.load(Ordering::Acquire);
        let waiting = writer.requests() > now_answered;
        if now_answered != answered || !waiting {
            (answered, still) = (now_answered, Duration::ZERO);
            continue;
        }
        still += period;
        if still < timeout {
            continue;
        }
        alive.store(false, Ordering::Release);
        waiters.timed_out.store(true, Ordering::Release);
        writer.shutdown().await;
        waiters.fail_all(&writer, || Error::Timeout {
            addr: addr.clone(),
            what: "publish reply",
            after: timeout,
        });
        return;
    }
}

/// One nsqd's connection slot.
#[derive(Default)]
struct Slot {
    /// The current connection, read on every send (a read lock: concurrent senders queue on
    /// the connection's write lock only, not on this one too).
    live: RwLock<Option<Arc<Link>>>,
    /// Held while (re)connecting, so concurrent senders open one connection, not one each.
    connecting: tokio::sync::Mutex<()>,
}

/// A publisher over one or more nsqd.
pub struct Producer {
    config: ProducerConfig,
    links: Vec<Slot>,
    next: AtomicUsize,
    closed: AtomicBool,
}

impl Producer {
    /// A producer over `config.nsqd`; connections open on first use.
    pub fn new(config: ProducerConfig) -> Result<Producer> {
        if config.nsqd.is_empty() {
            return Err(Error::Invalid(
                "a producer needs at least one nsqd address".into(),
            ));
        }
        let links = config.nsqd.iter().map(|_| Slot::default()).collect();
        Ok(Producer {
            config,
            links,
            next: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
        })
    }

    /// Publishes one message.
    pub async fn publish(&self, topic: &str, body: &[u8]) -> Result<()> {
        self.check(topic, &[body])?;
        let command = Command::Pub {
            topic,
            partition: None,
            body,
        };
        // Straight to `send_with`: one async layer less on the path of every single PUB.
        self.send_with(|buf| command.encode(buf)).await.map(drop)
    }

    /// Queues one PUB on a connection now and returns the receipt of its reply, so that one
    /// task keeps many publishes in flight without a task each (go-nsq's `PublishAsync`).
    /// Only the queueing is awaited: connecting, when no connection is open.
    ///
    /// Guarantees: a receipt resolves to `Ok` only after the server's `OK`; to the server's
    /// refusal; or, when its connection ends, a write on it stalls past `write_timeout` or its
    /// reply times out first, to [`Error::Closed`], [`Error::Io`] or [`Error::Timeout`]
    /// (`what: "write"` or `"publish reply"`), after which the message may or
    /// may not be stored. Unlike [`Producer::publish`], a receipt is not retried on another
    /// connection: publish again if at-least-once delivery is wanted. Queueing fails over
    /// between nsqd like `publish`. Publishes in flight together keep no order among them on
    /// the server (the connection's write task takes each thread's commands in turn, and a
    /// task may move between threads while it awaits a receipt): await each publish when
    /// their order matters. Nothing bounds how many are queued: the caller keeps its own
    /// window (say, awaits the oldest receipt once 64 are out), as with go-nsq.
    pub async fn publish_queued(&self, topic: &str, body: &[u8]) -> Result<PublishReceipt> {
        self.check(topic, &[body])?;
        let command = Command::Pub {
            topic,
            partition: None,
            body,
        };
        let encode = |buf: &mut BytesMut| command.encode(buf);
        let mut last = None;
        for index in self.attempts() {
            if self.closed.load(Ordering::Acquire) {
                return Err(Error::Closed("producer"));
            }
            match self.queue_on(index, &encode).await {
                Ok(reply) => return Ok(PublishReceipt { reply }),
                Err(e) if e.is_transient() => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| Error::NoServer("no nsqd configured".into())))
    }

    /// Publishes one message to a partition (Youzan).
    pub async fn publish_to(&self, topic: &str, partition: u32, body: &[u8]) -> Result<()> {
        self.check(topic, &[body])?;
        self.send(Command::Pub {
            topic,
            partition: Some(partition),
            body,
        })
        .await
        .map(drop)
    }

    /// Publishes a batch atomically: all of it or none. An empty batch, an empty body, a body
    /// above `max_msg_size` or a batch above `max_body_size` is refused before sending
    /// ([`Error::Invalid`]); a batch the server refuses (its limits may be lower than the
    /// configured ones) is [`Error::Server`] (`E_BAD_MESSAGE`, `E_BAD_BODY`), and then none of
    /// it was stored.
    pub async fn multi_publish(
        &self,
        topic: &str,
        partition: Option<u32>,
        bodies: &[Bytes],
    ) -> Result<()> {
        let refs: Vec<&[u8]> = bodies.iter().map(|b| b.as_ref()).collect();
        self.check(topic, &refs)?;
        if bodies.is_empty() {
            return Err(Error::Invalid("MPUB of no messages".into()));
        }
        let total: usize = 4 + bodies.iter().map(|b| 4 + b.len()).sum::<usize>();
        if total > self.config.max_body_size {
            return Err(Error::Invalid(format!(
                "MPUB body of {total} bytes exceeds max_body_size {}",
                self.config.max_body_size
            )));
        }
        self.send(Command::Mpub {
            topic,
            partition,
            bodies,
        })
        .await
        .map(drop)
    }

    /// Publishes a message that becomes visible after `delay` (upstream nsqd only).
    pub async fn deferred_publish(&self, topic: &str, delay: Duration, body: &[u8]) -> Result<()> {
        self.check(topic, &[body])?;
        let defer_ms = delay.as_millis() as u64;
        self.send(Command::Dpub {
            topic,
            defer_ms,
            body,
        })
        .await
        .map(drop)
    }

    /// Publishes to a partition with a trace id (Youzan) and returns where it was stored.
    pub async fn publish_trace(
        &self,
        topic: &str,
        partition: u32,
        trace_id: u64,
        body: &[u8],
    ) -> Result<TraceReceipt> {
        self.check(topic, &[body])?;
        let (reply, index) = self
            .send(Command::PubTrace {
                topic,
                partition,
                trace_id,
                body,
            })
            .await?;
        TraceReceipt::parse(&reply).map_err(|source| Error::Codec {
            addr: self.config.nsqd[index].clone(),
            source,
        })
    }

    /// Creates a topic partition on a Youzan nsqd (`INTERNAL_CREATE_TOPIC`); creating one that
    /// exists succeeds.
    pub async fn create_topic(&self, topic: &str, partition: u32) -> Result<()> {
        if !validate_name(topic) {
            return Err(Error::Invalid(format!(
                "topic name {topic:?}: nsqd allows [.a-zA-Z0-9_-]{{1,64}}"
            )));
        }
        let line = format!("INTERNAL_CREATE_TOPIC {topic} {partition} false\n");
        self.send_with(|buf| buf.extend_from_slice(line.as_bytes()))
            .await
            .map(drop)
    }

    /// Closes every connection; later publishes return [`Error::Closed`].
    pub async fn close(&self) {
        self.closed.store(true, Ordering::Release);
        for link in &self.links {
            let link = link.live.write().unwrap_or_else(|p| p.into_inner()).take();
            if let Some(link) = link {
                link.conn.close().await;
            }
        }
    }

    fn check(&self, topic: &str, bodies: &[&[u8]]) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed("producer"));
        }
        if !validate_name(topic) {
            return Err(Error::Invalid(format!(
                "topic name {topic:?}: nsqd allows [.a-zA-Z0-9_-]{{1,64}}"
            )));
        }
        for body in bodies {
            if body.is_empty() {
                return Err(Error::Invalid(
                    "message body is empty; nsqd refuses it".into(),
                ));
            }
            if body.len() > self.config.max_msg_size {
                return Err(Error::Invalid(format!(
                    "message body of {} bytes exceeds max_msg_size {}",
                    body.len(),
                    self.config.max_msg_size
                )));
            }
        }
        Ok(())
    }

    async fn send(&self, command: Command<'_>) -> Result<(Bytes, usize)> {
        self.send_with(|buf| command.encode(buf)).await
    }

    /// Sends to one nsqd after another, starting round robin, until one answers `OK` or
    /// refuses for good, and returns the reply with the index of the nsqd that gave it (not
    /// its address: a copy per publish that only PUB_TRACE's errors need). Each nsqd is tried
    /// twice, so a connection that died since its last use is replaced by a fresh one.
    async fn send_with(&self, encode: impl Fn(&mut BytesMut)) -> Result<(Bytes, usize)> {
        let mut last = None;
        for index in self.attempts() {
            if self.closed.load(Ordering::Acquire) {
                return Err(Error::Closed("producer"));
            }
            let addr = &self.config.nsqd[index];
            let reply = match self.queue_on(index, &encode).await {
                Ok(reply) => reply
                    .await
                    .unwrap_or_else(|_| Err(Error::Closed("producer connection"))),
                Err(e) => Err(e),
            };
            match reply {
                Ok(reply) => return Ok((reply, index)),
                Err(e) if e.is_transient() => {
                    tracing::debug!(addr, "publish failed, trying the next nsqd: {e}");
                    last = Some(e);
                }
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| Error::NoServer("no nsqd configured".into())))
    }

    /// The nsqd a send tries, in turn: each one twice (so a connection that died since its
    /// last use is replaced by a fresh one), starting round robin over several. One nsqd (the
    /// common case) needs no round robin: the shared counter would be one more cache line
    /// every publisher on every worker writes.
    fn attempts(&self) -> impl Iterator<Item = usize> {
        let n = self.links.len();
        let start = if n == 1 {
            0
        } else {
            self.next.fetch_add(1, Ordering::Relaxed)
        };
        (0..2 * n).map(move |i| (start + i) % n)
    }

    /// Queues a command on nsqd `index`'s connection, connecting first if it has none, and
    /// returns where its reply will come.
    async fn queue_on(
        &self,
        index: usize,
        encode: &impl Fn(&mut BytesMut),
    ) -> Result<oneshot::Receiver<Result<Bytes>>> {
        match self.send_live(index, encode) {
            Some(queued) => queued,
            // Boxed: the connect path's future is large, and inline it would make every
            // publish's future as large (built and dropped per publish).
            None => match Box::pin(self.connect(index)).await {
                Ok(link) => link.send(encode),
                Err(e) => Err(e),
            },
        }
    }

    /// Sends on the live connection to nsqd `index`, if there is one: the path of every
    /// publish, kept out of [`Producer::connect`] so it builds and drops no future of the
    /// connect path. The command is queued under the slot's lock, so the connection is used
    /// without taking a reference to it (a count every publisher on every worker would write
    /// twice per publish).
    fn send_live(
        &self,
        index: usize,
        encode: &impl Fn(&mut BytesMut),
    ) -> Option<Result<oneshot::Receiver<Result<Bytes>>>> {
        self.with_live(index, |link| link.send(encode))
    }

    /// The live connection to nsqd `index`, if there is one.
    fn live(&self, index: usize) -> Option<Arc<Link>> {
        self.with_live(index, Arc::clone)
    }

    /// `use_link` on the live connection to nsqd `index` (under the slot's read lock), if
    /// there is one.
    fn with_live<R>(&self, index: usize, use_link: impl FnOnce(&Arc<Link>) -> R) -> Option<R> {
        let link = self.links[index]
            .live
            .read()
            .unwrap_or_else(|p| p.into_inner());
        link.as_ref()
            .filter(|l| l.alive.load(Ordering::Acquire))
            .map(use_link)
    }

    /// (Re)connects to nsqd `index`, unless a concurrent sender did while this one waited.
    async fn connect(&self, index: usize) -> Result<Arc<Link>> {
        let slot = &self.links[index];
        let _connecting = slot.connecting.lock().await;
        if let Some(link) = self.live(index) {
            return Ok(link);
        }
        let link = Arc::new(Link::open(&self.config.nsqd[index], &self.config.conn).await?);
        *slot.live.write().unwrap_or_else(|p| p.into_inner()) = Some(link.clone());
        Ok(link)
    }
}

/// The pending reply of a [`Producer::publish_queued`]: resolves to `Ok` once the server
/// answered `OK`, to the server's refusal, or to the error that ended the connection (or the
/// watchdog's [`Error::Timeout`]) first. Dropping it does not withdraw the publish.
#[derive(Debug)]
#[must_use = "a receipt says whether the publish was stored"]
pub struct PublishReceipt {
    reply: oneshot::Receiver<Result<Bytes>>,
}

impl Future for PublishReceipt {
    type Output = Result<()>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        Pin::new(&mut self.reply).poll(cx).map(|reply| match reply {
            Ok(reply) => reply.map(drop),
            Err(_) => Err(Error::Closed("producer connection")),
        })
    }
}
