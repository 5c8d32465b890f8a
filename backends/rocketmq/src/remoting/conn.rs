//! One TCP connection to a name server or broker: requests multiplexed by `opaque`, oneway
//! requests, requests the server sends us, and the connection's liveness.
//!
//! A writer task owns the write half (so a cancelled caller never leaves half a frame on the
//! socket) and a reader task owns the read half, completing waiting callers by `opaque`. When
//! either side fails, every waiting caller gets `Error::Disconnected` at once instead of its
//! timeout, and the connection reports itself dead so the pool dials a new one.
//!
//! What keeps a dead peer from going unnoticed: frames wait in a bounded queue (a caller waits
//! for room, within its timeout, instead of memory growing behind a stalled socket); a write
//! that does not complete within the write timeout closes the connection; TCP keepalive is on;
//! and a monitor task runs the [`Liveness`] state machine: request timeouts make the connection
//! suspect, a probe (HEART_BEAT, also sent periodically to brokers) or the next request decides,
//! and a dead connection is closed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, watch, Notify};

use super::codec::{split_frame, Command, FLAG_ONEWAY};
use super::liveness::{Health, Liveness, Next};
use super::{RemotingOptions, ServerRequest};
use crate::error::{Error, Result};
use crate::protocol::codes;

type Pending = Arc<Mutex<HashMap<i32, oneshot::Sender<Command>>>>;

/// The HEART_BEAT body a connection sends as its probe; shared with its pool, which may
/// replace it (a consumer's subscriptions change).
pub type HeartbeatBody = Arc<Mutex<Bytes>>;

/// A live connection; cheap to share.
#[derive(Debug)]
pub struct Connection {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    addr: String,
    frames: mpsc::Sender<Bytes>,
    pending: Pending,
    next_opaque: AtomicI32,
    dead: AtomicBool,
    stop: watch::Sender<bool>,
    liveness: Mutex<Liveness>,
    /// Wakes the monitor when the liveness state changed.
    changed: Notify,
    write_timeout: Duration,
}

impl Connection {
    /// Dials `addr` and starts the reader, writer and monitor tasks. Server requests go to
    /// `notices`; `heartbeat` (brokers only) is probed with periodically and when suspect.
    pub async fn connect(
        addr: &str,
        options: &RemotingOptions,
        notices: Option<mpsc::UnboundedSender<ServerRequest>>,
        heartbeat: Option<HeartbeatBody>,
    ) -> Result<Connection> {
        let timeout = options.connect_timeout;
        let stream = match tokio::time::timeout(timeout, TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => stream,
            Ok(Err(source)) => {
                return Err(Error::Io {
                    addr: addr.into(),
                    source,
                })
            }
            Err(_) => {
                return Err(Error::Disconnected {
                    addr: addr.into(),
                    reason: format!("connect timed out after {timeout:?}"),
                })
            }
        };
        let _ = stream.set_nodelay(true);
        if let Some(idle) = options.keepalive {
            let keepalive = socket2::TcpKeepalive::new()
                .with_time(idle)
                .with_interval(idle.max(Duration::from_secs(1)));
            if let Err(e) = socket2::SockRef::from(&stream).set_tcp_keepalive(&keepalive) {
                tracing::debug!(%addr, error = %e, "rocketmq: TCP keepalive not set");
            }
        }
        let (read, write) = stream.into_split();
        let (frames, rx) = mpsc::channel(options.queued_frames.max(1));
        let (stop, stopped) = watch::channel(false);
        let probes = heartbeat.as_ref().map(|_| options.heartbeat_interval);
        let shared = Arc::new(Shared {
            addr: addr.to_owned(),
            frames,
            pending: Pending::default(),
            next_opaque: AtomicI32::new(1),
            dead: AtomicBool::new(false),
            stop,
            liveness: Mutex::new(Liveness::new(Instant::now(), probes)),
            changed: Notify::new(),
            write_timeout: options.write_timeout,
        });
        tokio::spawn(write_loop(shared.clone(), write, rx, stopped.clone()));
        tokio::spawn(read_loop(ReadLoop {
            shared: shared.clone(),
            read,
            max_frame: options.max_frame,
            notices,
            stopped: stopped.clone(),
        }));
        tokio::spawn(monitor(
            shared.clone(),
            heartbeat,
            options.probe_timeout,
            stopped,
        ));
        Ok(Connection { shared })
    }

    /// Whether the socket failed or closed, or the connection was judged dead.
    pub fn is_dead(&self) -> bool {
        self.shared.is_dead()
    }

    /// The liveness judgement on the connection now.
    pub fn health(&self) -> Health {
        if self.is_dead() {
            return Health::Dead;
        }
        lock(&self.shared.liveness).health()
    }

    /// Sends `command` and waits up to `timeout` for its response (waiting for room in the
    /// frame queue counts against the timeout). A timeout makes the connection suspect.
    pub async fn invoke(&self, command: Command, timeout: Duration) -> Result<Command> {
        self.shared.invoke(command, timeout).await
    }

    /// Sends `command` without waiting for (or getting) an answer; waits up to the write
    /// timeout for room in the frame queue.
    pub async fn oneway(&self, mut command: Command) -> Result<()> {
        let s = &self.shared;
        command.flag |= FLAG_ONEWAY;
        command.opaque = s.next_opaque.fetch_add(1, Ordering::Relaxed) & i32::MAX;
        let frame = encode(&command)?;
        match tokio::time::timeout(s.write_timeout, s.frames.send(frame)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(s.lost()),
            Err(_) => Err(Error::Disconnected {
                addr: s.addr.clone(),
                reason: format!("frame queue full for {:?}", s.write_timeout),
            }),
        }
    }

    /// Closes the connection; waiting callers get `Error::Disconnected`.
    pub fn close(&self) {
        self.shared.close("closed by the client");
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.close();
    }
}

impl Shared {
    fn is_dead(&self) -> bool {
        self.dead.load(Ordering::Acquire) || self.frames.is_closed()
    }

    fn lost(&self) -> Error {
        Error::Disconnected {
            addr: self.addr.clone(),
            reason: "connection closed".into(),
        }
    }

    /// Marks the connection dead, stops its tasks and wakes every waiting caller.
    fn close(&self, reason: &str) {
        if !self.dead.swap(true, Ordering::AcqRel) {
            tracing::debug!(addr = %self.addr, %reason, "rocketmq connection ended");
        }
        lock(&self.liveness).failed();
        let _ = self.stop.send(true);
        // Dropping the senders wakes every waiting caller with `Disconnected`.
        lock(&self.pending).clear();
        self.changed.notify_one();
    }

    async fn invoke(&self, mut command: Command, timeout: Duration) -> Result<Command> {
        let opaque = self.next_opaque.fetch_add(1, Ordering::Relaxed) & i32::MAX;
        command.opaque = opaque;
        let frame = encode(&command)?;
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).insert(opaque, tx);
        let code = command.code;
        // Removes the entry however this future ends (answered, timed out or dropped).
        let _guard = PendingGuard(&self.pending, opaque);
        if self.is_dead() {
            return Err(self.lost());
        }
        let sent_at = Instant::now();
        let exchange = async {
            self.frames.send(frame).await.map_err(|_| self.lost())?;
            rx.await.map_err(|_| self.lost())
        };
        match tokio::time::timeout(timeout, exchange).await {
            Ok(result) => result,
            Err(_) => {
                let health = lock(&self.liveness).timed_out(sent_at, Instant::now());
                self.changed.notify_one();
                if health == Health::Dead {
                    self.close("a request timed out while the connection was suspect");
                }
                Err(Error::Timeout {
                    code,
                    addr: self.addr.clone(),
                    timeout,
                })
            }
        }
    }
}

fn encode(command: &Command) -> Result<Bytes> {
    let mut buf = BytesMut::new();
    command.encode(&mut buf)?;
    Ok(buf.freeze())
}

struct PendingGuard<'a>(&'a Pending, i32);

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        lock(self.0).remove(&self.1);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

async fn write_loop(
    shared: Arc<Shared>,
    mut write: OwnedWriteHalf,
    mut rx: mpsc::Receiver<Bytes>,
    mut stopped: watch::Receiver<bool>,
) {
    let reason = loop {
        let frame = tokio::select! {
            frame = rx.recv() => frame,
            _ = stopped.changed() => None,
        };
        let Some(frame) = frame else {
            break "closed".to_owned();
        };
        if shared.dead.load(Ordering::Acquire) {
            break "closed".to_owned();
        }
        match tokio::time::timeout(shared.write_timeout, write.write_all(&frame)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => break format!("write failed: {e}"),
            Err(_) => break format!("a write stalled for {:?}", shared.write_timeout),
        }
    };
    shared.close(&reason);
    let _ = write.shutdown().await;
}

/// Probes when the state machine says so and closes the connection when it is judged dead.
async fn monitor(
    shared: Arc<Shared>,
    heartbeat: Option<HeartbeatBody>,
    probe_timeout: Duration,
    mut stopped: watch::Receiver<bool>,
) {
    loop {
        let next = lock(&shared.liveness).next(Instant::now());
        let wait = match next {
            Next::Close => {
                shared.close("judged dead");
                return;
            }
            Next::Probe => {
                let body = heartbeat
                    .as_ref()
                    .map(|b| lock(b).clone())
                    .unwrap_or_default();
                let probe = Command::request(codes::HEART_BEAT, []).with_body(body);
                if let Err(e) = shared.invoke(probe, probe_timeout).await {
                    tracing::debug!(addr = %shared.addr, error = %e, "rocketmq heartbeat failed");
                }
                lock(&shared.liveness).probe_done();
                continue;
            }
            Next::WaitUntil(at) => at,
        };
        let sleep = async {
            match wait {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = sleep => {}
            () = shared.changed.notified() => {}
            _ = stopped.changed() => return,
        }
    }
}

struct ReadLoop {
    shared: Arc<Shared>,
    read: OwnedReadHalf,
    max_frame: usize,
    notices: Option<mpsc::UnboundedSender<ServerRequest>>,
    stopped: watch::Receiver<bool>,
}

async fn read_loop(mut r: ReadLoop) {
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let reason = loop {
        if r.shared.dead.load(Ordering::Acquire) {
            break "closed".to_owned();
        }
        match split_frame(&mut buf, r.max_frame) {
            Ok(Some(frame)) => match Command::decode(frame) {
                Ok(command) => {
                    lock(&r.shared.liveness).heard();
                    r.dispatch(command);
                }
                Err(e) => break e.to_string(),
            },
            Ok(None) => {
                let read = tokio::select! {
                    read = r.read.read_buf(&mut buf) => read,
                    _ = r.stopped.changed() => break "closed".to_owned(),
                };
                match read {
                    Ok(0) => break "closed by peer".to_owned(),
                    Ok(_) => {}
                    Err(e) => break e.to_string(),
                }
            }
            Err(e) => break e.to_string(),
        }
    };
    r.shared.close(&reason);
}

impl ReadLoop {
    fn dispatch(&self, command: Command) {
        if command.is_response() {
            if let Some(tx) = lock(&self.shared.pending).remove(&command.opaque) {
                let _ = tx.send(command);
            }
            return;
        }
        let (code, opaque, oneway) = (command.code, command.opaque, command.is_oneway());
        if code == codes::NOTIFY_CONSUMER_IDS_CHANGED {
            if let Some(notices) = &self.notices {
                let group = command.field("consumerGroup").unwrap_or("").to_owned();
                let _ = notices.send(ServerRequest::ConsumerIdsChanged { group });
            }
        } else if !oneway {
            let answer = Command::response(
                codes::REQUEST_CODE_NOT_SUPPORTED,
                opaque,
                format!("request code {code} is not supported by this client"),
            );
            // The reader never waits for the writer: with the queue full the answer is
            // dropped and the server's request times out on its side.
            if let Ok(frame) = encode(&answer) {
                let _ = self.shared.frames.try_send(frame);
            }
        }
    }
}

#[cfg(test)]
#[path = "conn_tests.rs"]
mod tests;
