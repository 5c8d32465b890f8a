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
use msgstream::sync::lock;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, watch, Notify};

use super::codec::{Command, FLAG_ONEWAY};
use super::liveness::{Health, Liveness};
use super::{RemotingOptions, ServerRequest};
use crate::error::{Error, Result};

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
        tokio::spawn(tasks::write_loop(
            shared.clone(),
            write,
            rx,
            stopped.clone(),
        ));
        tokio::spawn(tasks::read_loop(tasks::ReadLoop {
            shared: shared.clone(),
            read,
            max_frame: options.max_frame,
            notices,
            stopped: stopped.clone(),
        }));
        tokio::spawn(tasks::monitor(
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

#[path = "conn_tasks.rs"]
mod tasks;

#[cfg(test)]
#[path = "conn_tests.rs"]
mod tests;
