//! One negotiated connection to an nsqd: magic, IDENTIFY (feature negotiation), AUTH, then a
//! reader task that answers heartbeats with NOP and hands every other frame to a sink.
//!
//! Guarantees: every read and write has a deadline (a silent server, or one that stops
//! reading, is an error, not a hang); the server's `max_rdy_count`, `max_msg_timeout` and
//! `auth_required` are honoured; frames are bounded by `max_frame_size`; a connection that
//! ends in the middle of a frame is an error ([`CodecError::Truncated`]), only an end between
//! frames is a clean close; the sink hears `Closed` exactly once, last.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::BytesMut;
use serde::Deserialize;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{oneshot, watch, Notify};
use tokio::task::JoinHandle;

use crate::codec::{decode_frame, Command, Frame, RawMessage, ServerError, HEARTBEAT, MAGIC_V2};
use crate::error::{CodecError, Error, Result};
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
    /// Message timeout asked for (`None`: the server's default), never more than the server
    /// allows. nsqd refuses an IDENTIFY asking for more than its `max_msg_timeout`
    /// (`E_BAD_BODY`, closing the connection) and tells that maximum only in its reply, so on
    /// that refusal the client connects again without asking, learns the maximum, and (unless
    /// the server's default already is the maximum) connects once more asking for exactly the
    /// maximum: the timeout in effect is `min(msg_timeout, max_msg_timeout)`, reported in
    /// [`Negotiated::msg_timeout`]. A value below the server's minimum (nsqd: 1 s) is not
    /// raised: the server's refusal is returned.
    pub msg_timeout: Option<Duration>,
    /// TCP connect deadline.
    pub dial_timeout: Duration,
    /// Longest wait for any frame; must exceed the heartbeat interval.
    pub read_timeout: Duration,
    /// Longest one write to the socket may take. A server that stops reading fills the socket
    /// buffers and a write stalls: past this the connection is closed and whatever waits on it
    /// fails with [`Error::Timeout`] (`what: "write"`), a publish's reply included, instead of
    /// hanging until the read timeout.
    pub write_timeout: Duration,
    /// Secret for AUTH, sent when the server says `auth_required`.
    pub auth_secret: Option<String>,
    /// Largest frame accepted (nsqd's max_msg_size plus headers by default).
    pub max_frame_size: usize,
    /// How the server buffers what it writes to this connection.
    pub output_buffer: OutputBuffer,
}

/// How nsqd buffers the frames it writes to a connection (IDENTIFY `output_buffer_size` and
/// `output_buffer_timeout`). nsqd writes deliveries into a buffer and flushes it when the
/// client has no RDY left, when it fills, or on a ticker of `output_buffer_timeout` (250 ms by
/// default): a consumer with RDY to spare gets a lone message up to that long after it was
/// published, so a one-at-a-time round trip takes about the timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutputBuffer {
    /// The server's settings (nsqd: 16 KiB, flushed at least every 250 ms).
    #[default]
    ServerDefault,
    /// Flushed at least this often, in whole milliseconds (nsqd accepts 25 ms to 30 s by
    /// default and refuses the IDENTIFY otherwise).
    FlushEvery(Duration),
    /// No buffering: each frame is written as it is made (`output_buffer_size: -1`), for the
    /// lowest latency at one write per frame on the server.
    Off,
}

impl OutputBuffer {
    /// The IDENTIFY fields `(output_buffer_size, output_buffer_timeout)`; 0 asks for the
    /// server's setting.
    fn identify_fields(self) -> (i64, i64) {
        match self {
            OutputBuffer::ServerDefault => (0, 0),
            OutputBuffer::FlushEvery(every) => (
                0,
                i64::try_from(every.as_millis()).unwrap_or(i64::MAX).max(1),
            ),
            OutputBuffer::Off => (-1, -1),
        }
    }
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
            output_buffer: OutputBuffer::ServerDefault,
        }
    }
}

/// What the server granted in its IDENTIFY reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Negotiated {
    /// Highest RDY this connection may send.
    pub max_rdy_count: u32,
    /// Message timeout in effect: the configured one capped at `max_msg_timeout`, or the
    /// server's default when none was configured (see [`ConnConfig::msg_timeout`]).
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
    /// The connection ended; `None` when the socket closed cleanly (either side) between
    /// frames. An end in the middle of a frame is [`CodecError::Truncated`]; a write that
    /// failed or timed out is the write's error.
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
/// connection (its reader ends with the write's error, so nothing waits on for a reply that
/// cannot come); queuing on a closed connection is [`Error::Closed`]. Dropping the last handle
/// flushes what is queued and shuts the write side.
///
/// Commands the server answers (`Writer::request`: a producer's PUBs) queue per thread
/// instead (see `Requests`), with their reply waiters; each write carries the other
/// commands first, then the requests, and hands the waiters to the reader in the same order.
///
/// A caller that knows no command follows soon (a consumer's answer to the last message the
/// application had waiting, see `Writer::queue_now`) writes what is pending itself, without
/// blocking, while the task is not writing: at `max_in_flight` 1 every FIN would otherwise cost
/// a wake-up of the task. Whatever the socket does not take at once is left to the task.
#[derive(Debug)]
pub struct Writer {
    addr: String,
    shared: Arc<WriteShared>,
    /// The deadline of each write, for the error a timed-out one is reported with.
    timeout: Duration,
}

#[derive(Debug)]
struct WriteShared {
    pending: Mutex<Pending>,
    /// Commands the server answers, queued per thread (see `Requests`).
    requests: Requests,
    wake: Notify,
    /// Bytes handed to the socket so far, and whether the write task has ended: what
    /// [`Writer::flush`] waits on.
    written: watch::Sender<Written>,
    /// Why the write task gave up, set before it ends: the reader ends the connection with it
    /// (see `read_frame`). Apart from `written`, which changes with every write, so the reader
    /// waiting on it wakes only for a failure.
    failed: watch::Sender<Option<WriteFailed>>,
}

impl Default for WriteShared {
    fn default() -> Self {
        WriteShared {
            pending: Mutex::default(),
            requests: Requests::default(),
            wake: Notify::new(),
            written: watch::Sender::new(Written::default()),
            failed: watch::Sender::new(None),
        }
    }
}

#[derive(Debug, Default, Clone, Copy)]
struct Written {
    bytes: u64,
    ended: bool,
}

/// How a write failed (a copyable summary: `std::io::Error` is not `Clone`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WriteFailed {
    /// It did not complete within the write timeout.
    TimedOut,
    /// The socket refused it.
    Io(std::io::ErrorKind),
}

impl WriteFailed {
    fn error(self, addr: &str, timeout: Duration) -> Error {
        match self {
            WriteFailed::TimedOut => Error::Timeout {
                addr: addr.to_string(),
                what: "write",
                after: timeout,
            },
            WriteFailed::Io(kind) => Error::Io {
                addr: addr.to_string(),
                source: kind.into(),
            },
        }
    }
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
            timeout,
        })
    }

    /// Why the write task gave up, if a write failed or timed out.
    pub(crate) fn failure(&self) -> Option<Error> {
        let failed = *self.shared.failed.borrow();
        failed.map(|f| f.error(&self.addr, self.timeout))
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
            let failed = match written {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(WriteFailed::Io(e.kind())),
                Err(_) => Some(WriteFailed::TimedOut),
            };
            if let Some(failed) = failed {
                tracing::debug!(addr, ?failed, "write failed; closing the connection");
                // The reader ends the connection with this (it may be waiting for a reply that
                // the server, which stopped reading, will never send).
                shared.failed.send_replace(Some(failed));
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

/// Reads until one whole frame is buffered. `Ok(None)` when the peer closed between frames
/// (nothing of a next frame buffered); a close in the middle of a frame is
/// [`CodecError::Truncated`]. A write that failed meanwhile (see `write_loop`) ends the wait
/// with its error: a server that stopped reading may never answer.
async fn read_frame(
    addr: &str,
    read: &mut (impl AsyncRead + Unpin),
    buf: &mut BytesMut,
    config: &ConnConfig,
    write_failed: &mut watch::Receiver<Option<WriteFailed>>,
) -> Result<Option<Frame>> {
    loop {
        match decode_frame(buf, config.max_frame_size) {
            Ok(Some(frame)) => return Ok(Some(frame)),
            Ok(None) => {}
            Err(source) => {
                return Err(Error::Codec {
                    addr: addr.to_string(),
                    source,
                })
            }
        }
        buf.reserve(16 * 1024);
        let write_failed = async {
            let failed = write_failed.wait_for(Option::is_some).await.map(|f| *f);
            match failed {
                Ok(failed) => failed,
                // The write side is gone without failing: only the read matters.
                Err(_) => std::future::pending().await,
            }
        };
        let read = tokio::time::timeout(config.read_timeout, read.read_buf(buf));
        let n = tokio::select! {
            // The read first: the failure is waited for (a waiter registered) only while the
            // read has to wait anyway.
            biased;
            n = read => n
                .map_err(|_| Error::Timeout {
                    addr: addr.to_string(),
                    what: "read",
                    after: config.read_timeout,
                })?
                .map_err(io(addr))?,
            Some(failed) = write_failed => {
                return Err(failed.error(addr, config.write_timeout));
            }
        };
        if n == 0 {
            if buf.is_empty() {
                return Ok(None);
            }
            // `decode_frame` accepted the size field if it is there.
            let needed = match buf.get(..4) {
                Some(&[a, b, c, d]) => 4 + u32::from_be_bytes([a, b, c, d]) as usize,
                _ => 4,
            };
            return Err(Error::Codec {
                addr: addr.to_string(),
                source: CodecError::Truncated {
                    what: "frame (the connection closed mid-frame)",
                    needed,
                    got: buf.len(),
                },
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
    write_failed: &mut watch::Receiver<Option<WriteFailed>>,
) -> Result<bytes::Bytes> {
    loop {
        match read_frame(addr, read, buf, config, write_failed).await? {
            None => {
                return Err(Error::Io {
                    addr: addr.to_string(),
                    source: std::io::ErrorKind::UnexpectedEof.into(),
                })
            }
            Some(Frame::Response(data)) if data.as_ref() == HEARTBEAT => continue,
            Some(Frame::Response(data)) => return Ok(data),
            Some(Frame::Error(error)) => {
                return Err(Error::Server {
                    addr: addr.to_string(),
                    error,
                })
            }
            Some(Frame::Message(_)) => {
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
    /// SUB_ORDERED). A server that refuses the configured message timeout as above its
    /// maximum costs up to two more dials (see [`ConnConfig::msg_timeout`]).
    pub async fn connect(
        addr: &str,
        config: &ConnConfig,
        subscribe: Option<Command<'_>>,
        positions: bool,
        sink: impl FnMut(Event, &Arc<Writer>) + Send + 'static,
    ) -> Result<Conn> {
        let Handshake {
            mut read,
            writer,
            mut buf,
            mut write_failed,
            negotiated,
        } = Handshake::capped(addr, config).await?;
        if negotiated.auth_required {
            let secret = config
                .auth_secret
                .as_ref()
                .ok_or_else(|| Error::Unsupported {
                    addr: addr.to_string(),
                    what: "the server requires AUTH and no secret is configured".into(),
                })?;
            writer.send(Command::Auth(secret.as_bytes())).await?;
            read_reply(addr, &mut read, &mut buf, config, &mut write_failed).await?;
        }
        if let Some(command) = subscribe {
            writer.send(command).await?;
            read_reply(addr, &mut read, &mut buf, config, &mut write_failed).await?;
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

/// A dialled connection that sent the magic and IDENTIFY and read the reply.
struct Handshake {
    read: OwnedReadHalf,
    writer: Arc<Writer>,
    buf: BytesMut,
    write_failed: watch::Receiver<Option<WriteFailed>>,
    negotiated: Negotiated,
}

impl Handshake {
    /// Dials and identifies asking for `config.msg_timeout`, capped at the server's
    /// `max_msg_timeout` (see [`ConnConfig::msg_timeout`]): the maximum comes only in the
    /// reply to IDENTIFY, and a server asked for more refuses and closes, so a refusal of the
    /// timeout costs one connection that asks for nothing (to learn the maximum) and, unless
    /// the server's default is the maximum, one that asks for exactly it.
    async fn capped(addr: &str, config: &ConnConfig) -> Result<Handshake> {
        let Some(asked) = config.msg_timeout else {
            return Handshake::identify(addr, config, None).await;
        };
        let refused = match Handshake::identify(addr, config, Some(asked)).await {
            Err(Error::Server { error, .. }) if refuses_msg_timeout(&error) => Error::Server {
                addr: addr.to_string(),
                error,
            },
            other => return other,
        };
        let probe = Handshake::identify(addr, config, None).await?;
        let max = probe.negotiated.max_msg_timeout;
        if asked <= max || max.is_zero() {
            // Not above the maximum (below the server's minimum, say): not the client's to
            // change. (No maximum reported: nothing to cap at.)
            return Err(refused);
        }
        if probe.negotiated.msg_timeout == max {
            return Ok(probe);
        }
        drop(probe);
        tracing::debug!(
            addr,
            ?asked,
            ?max,
            "msg_timeout above the server's max_msg_timeout; asking for the maximum"
        );
        Handshake::identify(addr, config, Some(max)).await
    }

    /// Dials, sends the magic and IDENTIFY (asking for `msg_timeout`, or the server's default)
    /// and reads the reply.
    async fn identify(
        addr: &str,
        config: &ConnConfig,
        msg_timeout: Option<Duration>,
    ) -> Result<Handshake> {
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
        let mut write_failed = writer.shared.failed.subscribe();
        let (output_buffer_size, output_buffer_timeout) = config.output_buffer.identify_fields();
        let identify = serde_json::json!({
            "client_id": config.client_id,
            "hostname": "localhost",
            "user_agent": config.user_agent,
            "feature_negotiation": true,
            "heartbeat_interval": config.heartbeat_interval.as_millis() as u64,
            "msg_timeout": msg_timeout.map_or(0, |t| t.as_millis() as u64),
            "output_buffer_size": output_buffer_size,
            "output_buffer_timeout": output_buffer_timeout,
        })
        .to_string();
        let mut buf = BytesMut::from(&MAGIC_V2[..]);
        Command::Identify(identify.as_bytes()).encode(&mut buf);
        writer.send_raw(&buf).await?;
        let mut buf = BytesMut::new();
        let reply = read_reply(addr, &mut read, &mut buf, config, &mut write_failed).await?;
        let negotiated = parse_identify(addr, &reply)?;
        Ok(Handshake {
            read,
            writer,
            buf,
            write_failed,
            negotiated,
        })
    }
}

/// Whether an IDENTIFY was refused for its message timeout (nsqd and the Youzan fork:
/// `E_BAD_BODY IDENTIFY msg timeout (<ms>) is invalid`).
fn refuses_msg_timeout(error: &ServerError) -> bool {
    error.code == "E_BAD_BODY" && error.text.contains("msg timeout")
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
    // Sees a failure that happened before it subscribed: `wait_for` checks the current value.
    let mut write_failed = writer.shared.failed.subscribe();
    // The reply to every publish, taken off the buffer as it is: decoding slices each frame
    // out of the buffer (a reference count up and down, per publish).
    const OK_FRAME: [u8; 10] = [0, 0, 0, 6, 0, 0, 0, 0, b'O', b'K'];
    let end = loop {
        if buf.starts_with(&OK_FRAME) {
            bytes::Buf::advance(&mut buf, OK_FRAME.len());
            sink(Event::Response(bytes::Bytes::from_static(b"OK")), &writer);
            continue;
        }
        let frame = match read_frame(&addr, &mut read, &mut buf, &config, &mut write_failed).await {
            Ok(Some(frame)) => frame,
            Ok(None) => break None,
            Err(e) => break Some(e),
        };
        match frame {
            Frame::Response(data) if data.as_ref() == HEARTBEAT => {
                if let Err(e) = writer.send(Command::Nop).await {
                    // A failed write closed the writer: report why.
                    break Some(writer.failure().unwrap_or(e));
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

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpListener;
    use tokio::sync::mpsc;

    /// The bytes of one server frame.
    fn frame(kind: i32, data: &[u8]) -> Vec<u8> {
        let mut f = (4 + data.len() as i32).to_be_bytes().to_vec();
        f.extend_from_slice(&kind.to_be_bytes());
        f.extend_from_slice(data);
        f
    }

    /// `read_frame` over an in-memory stream that carries `bytes` and then ends.
    async fn frames_then_eof(bytes: &[u8]) -> (Vec<Frame>, Result<Option<Frame>>) {
        let (mut server, mut client) = tokio::io::duplex(64 * 1024);
        server.write_all(bytes).await.expect("write");
        drop(server);
        let (_failed, mut write_failed) = watch::channel(None);
        let (config, mut buf, mut frames) = (ConnConfig::default(), BytesMut::new(), Vec::new());
        loop {
            match read_frame("test", &mut client, &mut buf, &config, &mut write_failed).await {
                Ok(Some(frame)) => frames.push(frame),
                end => return (frames, end),
            }
        }
    }

    #[tokio::test]
    async fn an_end_between_frames_is_a_clean_close() {
        let mut wire = frame(0, b"OK");
        wire.extend_from_slice(&frame(1, b"E_FIN_FAILED FIN x failed"));
        let (frames, end) = frames_then_eof(&wire).await;
        assert_eq!(frames.len(), 2);
        assert_eq!(frames[0], Frame::Response(bytes::Bytes::from_static(b"OK")));
        assert!(matches!(end, Ok(None)), "{end:?}");
        let (frames, end) = frames_then_eof(b"").await;
        assert!(frames.is_empty());
        assert!(matches!(end, Ok(None)), "{end:?}");
    }

    #[tokio::test]
    async fn an_end_in_the_middle_of_a_frame_is_a_truncated_frame() {
        let whole = frame(0, b"_heartbeat_");
        for cut in 1..whole.len() {
            let mut wire = frame(0, b"OK");
            wire.extend_from_slice(&whole[..cut]);
            let (frames, end) = frames_then_eof(&wire).await;
            assert_eq!(frames.len(), 1, "the whole frame before the cut is read");
            let needed = if cut < 4 { 4 } else { whole.len() };
            match end {
                Err(Error::Codec {
                    source: CodecError::Truncated { needed: n, got, .. },
                    ..
                }) => assert_eq!((n, got), (needed, cut), "cut {cut}"),
                other => panic!("cut {cut}: {other:?}"),
            }
        }
    }

    /// A server that answers the magic and IDENTIFY with `OK`, then sends `tail` and closes.
    async fn server_sending(tail: Vec<u8>) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.expect("accept");
            // Magic, "IDENTIFY\n", size, JSON.
            let mut head = [0u8; 4 + 9 + 4];
            socket.read_exact(&mut head).await.expect("identify");
            let size = u32::from_be_bytes([head[13], head[14], head[15], head[16]]);
            let mut body = vec![0u8; size as usize];
            socket.read_exact(&mut body).await.expect("identify body");
            socket.write_all(&frame(0, b"OK")).await.expect("OK");
            socket.write_all(&tail).await.expect("tail");
        });
        addr
    }

    /// What the sink of a connection to a server sending `tail` hears as the connection ends.
    async fn closed_after(tail: Vec<u8>) -> Option<Error> {
        let addr = server_sending(tail).await;
        let (tx, mut rx) = mpsc::unbounded_channel();
        let conn = Conn::connect(
            &addr,
            &ConnConfig::default(),
            None,
            false,
            move |event, _| {
                let _ = tx.send(event);
            },
        )
        .await
        .expect("connect");
        loop {
            match rx.recv().await.expect("an event") {
                Event::Closed(end) => {
                    drop(conn);
                    return end;
                }
                Event::Response(data) => assert_eq!(data.as_ref(), b"late"),
                other => panic!("{other:?}"),
            }
        }
    }

    #[tokio::test]
    async fn the_sink_hears_a_truncated_frame_as_an_error_and_a_clean_end_as_none() {
        let whole = frame(0, b"late");
        assert!(closed_after(whole.clone()).await.is_none());
        let mut cut = whole.clone();
        cut.extend_from_slice(&whole[..6]);
        assert!(matches!(
            closed_after(cut).await,
            Some(Error::Codec {
                source: CodecError::Truncated { .. },
                ..
            })
        ));
    }
}
