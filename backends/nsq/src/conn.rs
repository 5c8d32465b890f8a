//! One negotiated connection to an nsqd: magic, IDENTIFY (feature negotiation), AUTH, then a
//! reader task that answers heartbeats with NOP and hands every other frame to a sink.
//!
//! Guarantees: every read and write has a deadline (a silent server is an error, not a hang);
//! the server's `max_rdy_count`, `max_msg_timeout` and `auth_required` are honoured; frames are
//! bounded by `max_frame_size`; the sink hears `Closed` exactly once, last.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::BytesMut;
use serde::Deserialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{oneshot, watch, Notify};
use tokio::task::JoinHandle;

use crate::codec::{decode_frame, Command, Frame, RawMessage, ServerError, HEARTBEAT, MAGIC_V2};
use crate::error::{Error, Result};
use crate::requests::Requests;

/// Connection settings shared by producers and consumers.
#[derive(Debug, Clone)]
pub struct ConnConfig {
    /// `client_id` sent in IDENTIFY.
    pub client_id: String,
    /// `user_agent` sent in IDENTIFY.
    pub user_agent: String,
    /// Heartbeat interval asked for; the server disconnects after two silent intervals.
    pub heartbeat_interval: Duration,
    /// Message timeout asked for (`None`: the server's default); capped at the server's max.
    pub msg_timeout: Option<Duration>,
    /// TCP connect deadline.
    pub dial_timeout: Duration,
    /// Longest wait for any frame; must exceed the heartbeat interval.
    pub read_timeout: Duration,
    /// Longest wait for a write.
    pub write_timeout: Duration,
    /// Secret for AUTH, sent when the server says `auth_required`.
    pub auth_secret: Option<String>,
    /// Largest frame accepted (nsqd's max_msg_size plus headers by default).
    pub max_frame_size: usize,
}

impl Default for ConnConfig {
    fn default() -> Self {
        ConnConfig {
            client_id: "msgstream".into(),
            user_agent: concat!("msgstream-nsq/", env!("CARGO_PKG_VERSION")).into(),
            heartbeat_interval: Duration::from_secs(30),
            msg_timeout: None,
            dial_timeout: Duration::from_secs(1),
            read_timeout: Duration::from_secs(60),
            write_timeout: Duration::from_secs(1),
            auth_secret: None,
            max_frame_size: 1024 * 1024 + 1024,
        }
    }
}

/// What the server granted in its IDENTIFY reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Negotiated {
    /// Highest RDY this connection may send.
    pub max_rdy_count: u32,
    /// Message timeout in effect.
    pub msg_timeout: Duration,
    /// Highest message timeout the server allows.
    pub max_msg_timeout: Duration,
    /// Whether AUTH was required (and done).
    pub auth_required: bool,
    /// Server version string.
    pub version: String,
}

#[derive(Deserialize)]
struct IdentifyReply {
    #[serde(default = "default_max_rdy")]
    max_rdy_count: u32,
    #[serde(default)]
    msg_timeout: u64,
    #[serde(default)]
    max_msg_timeout: u64,
    #[serde(default)]
    auth_required: bool,
    #[serde(default)]
    version: String,
}

fn default_max_rdy() -> u32 {
    2500
}

/// A frame, as the reader task hands it on.
#[derive(Debug)]
pub enum Event {
    /// A response other than a heartbeat.
    Response(bytes::Bytes),
    /// An error frame; fatal ones are followed by `Closed`.
    Error(ServerError),
    /// A message.
    Message(RawMessage),
    /// The connection ended; `None` when the socket closed cleanly (either side).
    Closed(Option<Error>),
}

/// The writing half, shared by whoever sends commands on the connection.
///
/// Commands are encoded straight into one pending buffer (no allocation or channel node per
/// command) that a write task sends in one write, in queue order, each write bounded by the
/// write timeout. Only the first command after a write wakes the task, and the task yields
/// (again while yielding gathers more) before taking the buffer, so everything the tasks that are ready at that moment queue
/// (the publishers woken by one read of `OK`s, a burst of FINs) joins one write: one wake-up
/// and one syscall per burst instead of per command (without the yield the woken task runs
/// right after the first sender and writes its command alone). A failed or timed-out write closes the
/// connection; queuing on a closed connection is [`Error::Closed`]. Dropping the last handle
/// flushes what is queued and shuts the write side.
///
/// Commands the server answers ([`Writer::request`]: a producer's PUBs) queue per thread
/// instead (see [`Requests`]), with their reply waiters; each write carries the other
/// commands first, then the requests, and hands the waiters to the reader in the same order.
///
/// A caller that knows no command follows soon (a consumer's answer to the last message the
/// application had waiting, see [`Writer::queue_now`]) writes what is pending itself, without
/// blocking, while the task is not writing: at `max_in_flight` 1 every FIN would otherwise cost
/// a wake-up of the task. Whatever the socket does not take at once is left to the task.
#[derive(Debug)]
pub struct Writer {
    addr: String,
    shared: Arc<WriteShared>,
}

#[derive(Debug)]
struct WriteShared {
    pending: Mutex<Pending>,
    /// Commands the server answers, queued per thread (see [`Requests`]).
    requests: Requests,
    wake: Notify,
    /// Bytes handed to the socket so far, and whether the write task has ended: what
    /// [`Writer::flush`] waits on.
    written: watch::Sender<Written>,
}

impl Default for WriteShared {
    fn default() -> Self {
        WriteShared {
            pending: Mutex::default(),
            requests: Requests::default(),
            wake: Notify::new(),
            written: watch::Sender::new(Written::default()),
        }
    }
}

#[derive(Debug, Default, Clone, Copy)]
struct Written {
    bytes: u64,
    ended: bool,
}

#[derive(Debug, Default)]
struct Pending {
    buf: BytesMut,
    /// Bytes ever queued (the end of `buf` in the connection's byte stream).
    queued: u64,
    /// The socket, here while the task is not writing; the task takes it along with `buf`,
    /// so a direct write can never overtake (or interleave with) one of the task's.
    half: Option<OwnedWriteHalf>,
    /// The task was woken and has not taken `buf` yet: later commands need not wake it.
    scheduled: bool,
    /// No more commands accepted (shut down, or a write failed).
    closed: bool,
    /// The write task has returned.
    ended: bool,
    /// Told once what was queued before a shutdown is written and the write side shut.
    shutdown: Option<oneshot::Sender<()>>,
    /// Where the replies to the requests written so far go, in wire order (the reader takes
    /// them as replies come).
    replies: VecDeque<ReplyTo>,
    /// Requests written ever.
    requests: u64,
}

/// Where the reply to one command goes.
pub(crate) type ReplyTo = oneshot::Sender<Result<bytes::Bytes>>;

impl WriteShared {
    /// No more commands of either kind.
    fn close(&self, pending: &mut Pending) {
        pending.closed = true;
        self.requests.close();
    }

    /// Bytes queued and not yet taken by the write task.
    fn queued_len(&self) -> usize {
        self.lock().buf.len() + self.requests.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Writer {
    fn spawn(addr: &str, half: OwnedWriteHalf, timeout: Duration) -> Arc<Writer> {
        let shared = Arc::new(WriteShared::default());
        shared.lock().half = Some(half);
        tokio::spawn(write_loop(addr.to_string(), shared.clone(), timeout));
        Arc::new(Writer {
            addr: addr.to_string(),
            shared,
        })
    }

    /// Queues one command.
    pub async fn send(&self, command: Command<'_>) -> Result<()> {
        self.queue(command)
    }

    /// Queues one command without awaiting (for callers that are not async, like the reader's
    /// deliveries).
    pub(crate) fn queue(&self, command: Command<'_>) -> Result<()> {
        self.encode(|buf| command.encode(buf))
    }

    /// Queues one command and writes everything pending at once if the task is not writing
    /// and the socket takes it without blocking; for a command no other is likely to join.
    pub(crate) fn queue_now(&self, command: Command<'_>) -> Result<()> {
        let mut pending = self.shared.lock();
        if pending.closed {
            return Err(Error::Closed("connection"));
        }
        let before = pending.buf.len();
        command.encode(&mut pending.buf);
        pending.queued += (pending.buf.len() - before) as u64;
        let pending = &mut *pending;
        if let Some(half) = &pending.half {
            while !pending.buf.is_empty() {
                match half.try_write(&pending.buf) {
                    Ok(n) if n > 0 => {
                        let _ = pending.buf.split_to(n);
                        self.shared.written.send_modify(|w| w.bytes += n as u64);
                    }
                    // Blocked or failed: the task waits for the socket, or reports the error.
                    _ => break,
                }
            }
            if pending.buf.is_empty() {
                // Written in full; the buffer keeps its capacity for the next commands.
                pending.buf.clear();
                return Ok(());
            }
        }
        if !pending.scheduled {
            pending.scheduled = true;
            self.shared.wake.notify_one();
        }
        Ok(())
    }

    /// Queues already-encoded commands.
    pub async fn send_raw(&self, bytes: &[u8]) -> Result<()> {
        self.encode(|buf| buf.extend_from_slice(bytes))
    }

    /// Appends what `encode` writes to the pending buffer, without awaiting anything; callers
    /// that must order something else with the command (the producer's reply waiters) do it
    /// before this returns.
    pub(crate) fn encode(&self, encode: impl FnOnce(&mut BytesMut)) -> Result<()> {
        self.queue_command(encode)
    }

    /// Queues a command the server answers (PUB and its kin) and where its reply goes, in
    /// the calling thread's shard of the connection's requests (see [`Requests`]: senders
    /// on different cores do not meet on one lock). The write task moves the waiters on to
    /// the reader, in wire order; the reader takes them with [`Writer::take_replies`].
    pub(crate) fn request(
        &self,
        encode: impl FnOnce(&mut BytesMut),
        reply_to: ReplyTo,
    ) -> Result<()> {
        if self.shared.requests.push(encode, reply_to)? {
            self.shared.wake.notify_one();
        }
        Ok(())
    }

    /// Moves the reply waiters of every request written so far to the end of `into`, oldest
    /// first.
    pub(crate) fn take_replies(&self, into: &mut VecDeque<ReplyTo>) {
        into.append(&mut self.shared.lock().replies);
    }

    /// Once the connection is closed: moves the reply waiters of every request, written or
    /// not, to the end of `into`, so that each can be failed.
    pub(crate) fn take_all_replies(&self, into: &mut VecDeque<ReplyTo>) {
        self.take_replies(into);
        self.shared.requests.take_all_replies(into);
    }

    /// Requests written so far.
    pub(crate) fn requests(&self) -> u64 {
        self.shared.lock().requests
    }

    fn queue_command(&self, encode: impl FnOnce(&mut BytesMut)) -> Result<()> {
        let mut pending = self.shared.lock();
        if pending.closed {
            return Err(Error::Closed("connection"));
        }
        let before = pending.buf.len();
        encode(&mut pending.buf);
        pending.queued += (pending.buf.len() - before) as u64;
        if !pending.scheduled {
            pending.scheduled = true;
            drop(pending);
            self.shared.wake.notify_one();
        }
        Ok(())
    }

    /// Waits until everything queued so far is written to the socket, so it reaches the
    /// server even if this process dies now (an answer like FIN has no reply to wait for).
    /// [`Error::Closed`] if the connection ended first.
    pub async fn flush(&self) -> Result<()> {
        let mark = self.shared.lock().queued;
        let mut written = self.shared.written.subscribe();
        let state = written
            .wait_for(|w| w.bytes >= mark || w.ended)
            .await
            .map_err(|_| Error::Closed("connection"))?;
        if state.bytes >= mark {
            Ok(())
        } else {
            Err(Error::Closed("connection"))
        }
    }

    /// Writes what is queued, then shuts the socket's write side; the server then closes and
    /// the reader ends.
    pub async fn shutdown(&self) {
        let flushed = {
            let mut pending = self.shared.lock();
            self.shared.close(&mut pending);
            if pending.ended {
                return;
            }
            let (done, flushed) = oneshot::channel();
            pending.shutdown = Some(done);
            pending.scheduled = true;
            flushed
        };
        self.shared.wake.notify_one();
        let _ = flushed.await;
    }

    /// The nsqd address.
    pub fn addr(&self) -> &str {
        &self.addr
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.shared.close(&mut self.shared.lock());
        self.shared.wake.notify_one();
    }
}

/// Most yields after the first while they keep gathering commands (see `write_loop`).
const MORE_YIELDS: usize = 8;

/// Yields in a row that gathered nothing after which the write task stops yielding (see
/// `write_loop`).
const SKIP_AFTER_MISSES: u32 = 4;

async fn write_loop(addr: String, shared: Arc<WriteShared>, timeout: Duration) {
    // Two buffers taking turns: commands queue into one while the other is written.
    let mut batch = BytesMut::new();
    // Wake-ups in a row whose yield gathered nothing, and wake-ups counted for probing again.
    let (mut misses, mut wakeups) = (0u32, 0u32);
    let shutdown = loop {
        shared.wake.notified().await;
        wakeups = wakeups.wrapping_add(1);
        // The yield costs a lone command a trip through the scheduler: once yields keep
        // gathering nothing (commands come one at a time, e.g. a lone publisher) only every
        // 8th wake-up tries again. It takes several misses in a row: a burst's straggler (the
        // last of 64 pipelined publishers, run late on the other worker) misses once per
        // burst, and stopping at the first miss split the following bursts in two writes
        // (1 + 63 PUBs) until the next probe.
        if misses < SKIP_AFTER_MISSES || wakeups % 8 == 0 {
            let mut before = shared.queued_len();
            tokio::task::yield_now().await;
            let mut queued = shared.queued_len();
            misses = if queued > before {
                0
            } else {
                misses.saturating_add(1)
            };
            // Senders woken together run on both workers, so one yield can end before the
            // other worker's have queued: keep yielding while each yield still gathers
            // (bounded). Single PUBs from 64 callers took about a fifth fewer writes so.
            for _ in 0..MORE_YIELDS {
                if queued <= before {
                    break;
                }
                before = queued;
                tokio::task::yield_now().await;
                queued = shared.queued_len();
            }
        }
        let (shutdown, closed, half) = {
            let mut pending = shared.lock();
            pending.scheduled = false;
            std::mem::swap(&mut pending.buf, &mut batch);
            // Requests after the other commands; their waiters move on in the same order,
            // under the lock the reader takes them with.
            let pending = &mut *pending;
            let taken = shared.requests.take(&mut batch, &mut pending.replies);
            pending.queued += taken.bytes as u64;
            pending.requests += taken.requests as u64;
            let half = if batch.is_empty() {
                None
            } else {
                pending.half.take()
            };
            (pending.shutdown.take(), pending.closed, half)
        };
        if let Some(mut half) = half {
            let written = tokio::time::timeout(timeout, half.write_all(&batch)).await;
            let len = batch.len() as u64;
            batch.clear();
            shared.lock().half = Some(half);
            if !matches!(written, Ok(Ok(()))) {
                tracing::debug!(addr, "write failed or timed out; closing the connection");
                break shutdown;
            }
            shared.written.send_modify(|w| w.bytes += len);
        }
        // Only a shutdown or the last handle's drop closes: nothing can follow.
        if closed {
            break shutdown;
        }
    };
    let half = {
        let mut pending = shared.lock();
        shared.close(&mut pending);
        pending.half.take()
    };
    if let Some(mut half) = half {
        let _ = half.shutdown().await;
    }
    {
        let mut pending = shared.lock();
        pending.ended = true;
        // A shutdown asked for after this point returns at once; one asked for before the end
        // hears when its sender drops here.
        pending.shutdown = None;
    }
    shared.written.send_modify(|w| w.ended = true);
    if let Some(done) = shutdown {
        let _ = done.send(());
    }
}

/// A connected, identified connection; the reader task runs until the socket ends.
#[derive(Debug)]
pub struct Conn {
    /// Commands go here.
    pub writer: Arc<Writer>,
    /// What the server granted.
    pub negotiated: Negotiated,
    reader: JoinHandle<()>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

fn io(addr: &str) -> impl Fn(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        addr: addr.to_string(),
        source,
    }
}

/// Reads until one whole frame is buffered.
async fn read_frame(
    addr: &str,
    read: &mut OwnedReadHalf,
    buf: &mut BytesMut,
    config: &ConnConfig,
) -> Result<Frame> {
    loop {
        match decode_frame(buf, config.max_frame_size) {
            Ok(Some(frame)) => return Ok(frame),
            Ok(None) => {}
            Err(source) => {
                return Err(Error::Codec {
                    addr: addr.to_string(),
                    source,
                })
            }
        }
        buf.reserve(16 * 1024);
        let n = tokio::time::timeout(config.read_timeout, read.read_buf(buf))
            .await
            .map_err(|_| Error::Timeout {
                addr: addr.to_string(),
                what: "read",
                after: config.read_timeout,
            })?
            .map_err(io(addr))?;
        if n == 0 {
            return Err(Error::Io {
                addr: addr.to_string(),
                source: std::io::ErrorKind::UnexpectedEof.into(),
            });
        }
    }
}

/// Reads the reply to a handshake command: a response, or the server's error.
async fn read_reply(
    addr: &str,
    read: &mut OwnedReadHalf,
    buf: &mut BytesMut,
    config: &ConnConfig,
) -> Result<bytes::Bytes> {
    loop {
        match read_frame(addr, read, buf, config).await? {
            Frame::Response(data) if data.as_ref() == HEARTBEAT => continue,
            Frame::Response(data) => return Ok(data),
            Frame::Error(error) => {
                return Err(Error::Server {
                    addr: addr.to_string(),
                    error,
                })
            }
            Frame::Message(_) => {
                return Err(Error::Protocol {
                    addr: addr.to_string(),
                    what: "a message before SUB".into(),
                })
            }
        }
    }
}

impl Conn {
    /// Dials `addr`, negotiates, authenticates, sends `subscribe` (a SUB variant) and waits
    /// for its `OK`, then starts the reader task feeding `sink`, which gets the connection's
    /// writer along so a consumer can hand out and answer messages on the reader's task.
    /// `positions` says whether deliveries carry offset and raw size (SUB_ADVANCED,
    /// SUB_ORDERED).
    pub async fn connect(
        addr: &str,
        config: &ConnConfig,
        subscribe: Option<Command<'_>>,
        positions: bool,
        sink: impl FnMut(Event, &Arc<Writer>) + Send + 'static,
    ) -> Result<Conn> {
        let stream = tokio::time::timeout(config.dial_timeout, TcpStream::connect(addr))
            .await
            .map_err(|_| Error::Timeout {
                addr: addr.to_string(),
                what: "connect",
                after: config.dial_timeout,
            })?
            .map_err(io(addr))?;
        let _ = stream.set_nodelay(true);
        let (mut read, write) = stream.into_split();
        let writer = Writer::spawn(addr, write, config.write_timeout);
        let identify = serde_json::json!({
            "client_id": config.client_id,
            "hostname": "localhost",
            "user_agent": config.user_agent,
            "feature_negotiation": true,
            "heartbeat_interval": config.heartbeat_interval.as_millis() as u64,
            "msg_timeout": config.msg_timeout.map_or(0, |t| t.as_millis() as u64),
        })
        .to_string();
        let mut buf = BytesMut::from(&MAGIC_V2[..]);
        Command::Identify(identify.as_bytes()).encode(&mut buf);
        writer.send_raw(&buf).await?;
        let mut buf = BytesMut::new();
        let reply = read_reply(addr, &mut read, &mut buf, config).await?;
        let negotiated = parse_identify(addr, &reply)?;
        if negotiated.auth_required {
            let secret = config
                .auth_secret
                .as_ref()
                .ok_or_else(|| Error::Unsupported {
                    addr: addr.to_string(),
                    what: "the server requires AUTH and no secret is configured".into(),
                })?;
            writer.send(Command::Auth(secret.as_bytes())).await?;
            read_reply(addr, &mut read, &mut buf, config).await?;
        }
        if let Some(command) = subscribe {
            writer.send(command).await?;
            read_reply(addr, &mut read, &mut buf, config).await?;
        }
        let reader = tokio::spawn(read_loop(
            addr.to_string(),
            read,
            buf,
            config.clone(),
            positions,
            writer.clone(),
            sink,
        ));
        Ok(Conn {
            writer,
            negotiated,
            reader,
        })
    }

    /// Shuts the write side; the server closes the socket and the sink hears `Closed`.
    pub async fn close(&self) {
        self.writer.shutdown().await;
    }
}

fn parse_identify(addr: &str, reply: &[u8]) -> Result<Negotiated> {
    if reply == b"OK" {
        return Ok(Negotiated {
            max_rdy_count: default_max_rdy(),
            msg_timeout: Duration::from_secs(60),
            max_msg_timeout: Duration::from_secs(15 * 60),
            auth_required: false,
            version: String::new(),
        });
    }
    let parsed: IdentifyReply = serde_json::from_slice(reply).map_err(|e| Error::Protocol {
        addr: addr.to_string(),
        what: format!("IDENTIFY reply: {e}"),
    })?;
    Ok(Negotiated {
        max_rdy_count: parsed.max_rdy_count,
        msg_timeout: Duration::from_millis(parsed.msg_timeout),
        max_msg_timeout: Duration::from_millis(parsed.max_msg_timeout),
        auth_required: parsed.auth_required,
        version: parsed.version,
    })
}

async fn read_loop(
    addr: String,
    mut read: OwnedReadHalf,
    mut buf: BytesMut,
    config: ConnConfig,
    positions: bool,
    writer: Arc<Writer>,
    mut sink: impl FnMut(Event, &Arc<Writer>),
) {
    // The reply to every publish, taken off the buffer as it is: decoding slices each frame
    // out of the buffer (a reference count up and down, per publish).
    const OK_FRAME: [u8; 10] = [0, 0, 0, 6, 0, 0, 0, 0, b'O', b'K'];
    let end = loop {
        if buf.starts_with(&OK_FRAME) {
            bytes::Buf::advance(&mut buf, OK_FRAME.len());
            sink(Event::Response(bytes::Bytes::from_static(b"OK")), &writer);
            continue;
        }
        let frame = match read_frame(&addr, &mut read, &mut buf, &config).await {
            Ok(frame) => frame,
            Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::UnexpectedEof => {
                break None
            }
            Err(e) => break Some(e),
        };
        match frame {
            Frame::Response(data) if data.as_ref() == HEARTBEAT => {
                if let Err(e) = writer.send(Command::Nop).await {
                    break Some(e);
                }
            }
            Frame::Response(data) => sink(Event::Response(data), &writer),
            Frame::Error(error) => sink(Event::Error(error), &writer),
            Frame::Message(data) => match RawMessage::parse(data, positions) {
                Ok(message) => sink(Event::Message(message), &writer),
                Err(source) => {
                    break Some(Error::Codec {
                        addr: addr.clone(),
                        source,
                    })
                }
            },
        }
    };
    writer.shutdown().await;
    sink(Event::Closed(end), &writer);
}
