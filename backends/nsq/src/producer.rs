//! Publishing: PUB, MPUB (atomic batches), DPUB, PUB with a partition, PUB_TRACE, over a pool
//! of nsqd connections with failover.
//!
//! Commands on one connection are pipelined: replies come back in command order, so each
//! caller waits for its own reply from a FIFO of waiters. Guarantees: a publish returns `Ok`
//! only after the server's `OK`; names and sizes the server would refuse are refused before
//! sending ([`Error::Invalid`]); a broken connection or a transient server refusal moves on to
//! the next nsqd (reconnecting lazily), while a permanent refusal (bad topic, bad message) is
//! returned at once.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::codec::{validate_name, Command, TraceReceipt};
use crate::conn::{Conn, ConnConfig, Event};
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

/// A request waiting for its reply; replies come in command order, so they pop from the front.
struct Waiter {
    /// When the request gives up: sent plus the read timeout.
    deadline: Instant,
    /// `None` once the watchdog failed the request: its slot stays, so a late reply is still
    /// matched to it and not to the request after it.
    reply: Option<oneshot::Sender<Result<Bytes>>>,
}

/// One pipelined producer connection.
///
/// Request deadlines are kept by one watchdog task per connection instead of a timer per
/// request (a timer wheel entry made and dropped for every publish was a visible part of the
/// cost of a single PUB): it sleeps until the oldest unanswered request's deadline and fails
/// every request past its own, so a stuck reply still fails the waiting sends within the
/// timeout.
struct Link {
    conn: Conn,
    waiters: Arc<Mutex<VecDeque<Waiter>>>,
    alive: Arc<AtomicBool>,
    watchdog: JoinHandle<()>,
}

impl Drop for Link {
    fn drop(&mut self) {
        self.watchdog.abort();
    }
}

fn lock(waiters: &Mutex<VecDeque<Waiter>>) -> std::sync::MutexGuard<'_, VecDeque<Waiter>> {
    waiters.lock().unwrap_or_else(|p| p.into_inner())
}

impl Link {
    async fn open(addr: &str, config: &ConnConfig) -> Result<Link> {
        let waiters: Arc<Mutex<VecDeque<Waiter>>> = Arc::default();
        let alive = Arc::new(AtomicBool::new(true));
        let (sink_waiters, sink_alive, sink_addr) =
            (waiters.clone(), alive.clone(), addr.to_string());
        let conn = Conn::connect(addr, config, None, false, move |event, _: &Arc<_>| {
            let reply = match event {
                // The frame is a slice of the read buffer: handing it to the publisher would
                // drop its reference count on the publisher's thread, one contended atomic per
                // publish on a count every reply of the read shares. The common `OK` is
                // answered with a static copy and the slice dropped here.
                Event::Response(data) if data.as_ref() == b"OK" => Ok(Bytes::from_static(b"OK")),
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
                Event::Closed(_) => {
                    sink_alive.store(false, Ordering::Release);
                    for reply_to in lock(&sink_waiters).drain(..).filter_map(|w| w.reply) {
                        let _ = reply_to.send(Err(Error::Closed("producer connection")));
                    }
                    return;
                }
            };
            let waiter = lock(&sink_waiters).pop_front();
            if let Some(reply_to) = waiter.and_then(|w| w.reply) {
                let _ = reply_to.send(reply);
            }
        })
        .await?;
        let watchdog = tokio::spawn(watchdog(
            addr.to_string(),
            waiters.clone(),
            alive.clone(),
            config.read_timeout,
        ));
        Ok(Link {
            conn,
            waiters,
            alive,
            watchdog,
        })
    }

    /// Sends one command and waits for its reply (or the watchdog's timeout). The command is
    /// encoded into the connection's pending writes under the waiters' lock, so replies match
    /// waiters in command order, and concurrent requests share the connection's writes (see
    /// [`crate::conn::Writer`]).
    async fn request(&self, encode: &impl Fn(&mut BytesMut), timeout: Duration) -> Result<Bytes> {
        let (tx, rx) = oneshot::channel();
        {
            let mut waiters = lock(&self.waiters);
            if let Err(e) = self.conn.writer.encode(encode) {
                self.alive.store(false, Ordering::Release);
                return Err(e);
            }
            waiters.push_back(Waiter {
                deadline: Instant::now() + timeout,
                reply: Some(tx),
            });
        }
        rx.await
            .unwrap_or(Err(Error::Closed("producer connection")))
    }
}

/// Fails each request of `waiters` whose deadline passed with [`Error::Timeout`] and marks the
/// connection dead, as a per-request timer would. Deadlines grow in queue order (same timeout,
/// later sends), so it sleeps until the first unanswered one; with none it sleeps a whole
/// timeout, which ends before the deadline of any request sent meanwhile.
async fn watchdog(
    addr: String,
    waiters: Arc<Mutex<VecDeque<Waiter>>>,
    alive: Arc<AtomicBool>,
    timeout: Duration,
) {
    let mut next = Instant::now() + timeout;
    loop {
        tokio::time::sleep_until(next).await;
        let now = Instant::now();
        next = now + timeout;
        let mut waiters = lock(&waiters);
        for waiter in waiters.iter_mut().filter(|w| w.reply.is_some()) {
            if waiter.deadline > now {
                next = waiter.deadline;
                break;
            }
            alive.store(false, Ordering::Release);
            if let Some(reply_to) = waiter.reply.take() {
                let _ = reply_to.send(Err(Error::Timeout {
                    addr: addr.clone(),
                    what: "publish reply",
                    after: timeout,
                }));
            }
        }
    }
}

/// One nsqd's connection slot.
#[derive(Default)]
struct Slot {
    /// The current connection, read on every send: a plain lock held only to clone the `Arc`.
    live: Mutex<Option<Arc<Link>>>,
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
        self.send(Command::Pub {
            topic,
            partition: None,
            body,
        })
        .await
        .map(drop)
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

    /// Publishes a batch atomically: all of it or none.
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
            let link = link.live.lock().unwrap_or_else(|p| p.into_inner()).take();
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
        let n = self.links.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let mut last = None;
        for i in 0..2 * n {
            if self.closed.load(Ordering::Acquire) {
                return Err(Error::Closed("producer"));
            }
            let index = (start + i) % n;
            let addr = &self.config.nsqd[index];
            let link = match self.live(index) {
                Some(link) => Ok(link),
                None => self.connect(index).await,
            };
            let link = match link {
                Ok(link) => link,
                Err(e) => {
                    tracing::debug!(addr, "nsqd unavailable: {e}");
                    last = Some(e);
                    continue;
                }
            };
            match link.request(&encode, self.config.conn.read_timeout).await {
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

    /// The live connection to nsqd `index`, if there is one: the path of every publish, kept
    /// out of [`Producer::connect`] so it builds and drops no future of the connect path.
    fn live(&self, index: usize) -> Option<Arc<Link>> {
        let link = self.links[index]
            .live
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        link.as_ref()
            .filter(|l| l.alive.load(Ordering::Acquire))
            .cloned()
    }

    /// (Re)connects to nsqd `index`, unless a concurrent sender did while this one waited.
    async fn connect(&self, index: usize) -> Result<Arc<Link>> {
        let slot = &self.links[index];
        let _connecting = slot.connecting.lock().await;
        if let Some(link) = self.live(index) {
            return Ok(link);
        }
        let link = Arc::new(Link::open(&self.config.nsqd[index], &self.config.conn).await?);
        *slot.live.lock().unwrap_or_else(|p| p.into_inner()) = Some(link.clone());
        Ok(link)
    }
}
