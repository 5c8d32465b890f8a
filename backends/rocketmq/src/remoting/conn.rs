//! One TCP connection to a name server or broker: requests multiplexed by `opaque`, oneway
//! requests, and requests the server sends us.
//!
//! A writer task owns the write half (so a cancelled caller never leaves half a frame on the
//! socket) and a reader task owns the read half, completing waiting callers by `opaque`. When
//! either side fails, every waiting caller gets `Error::Disconnected` at once instead of its
//! timeout, and the connection reports itself dead so the pool dials a new one.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, watch};

use super::codec::{split_frame, Command, FLAG_ONEWAY};
use super::ServerRequest;
use crate::error::{Error, Result};
use crate::protocol::codes;

type Pending = Arc<Mutex<HashMap<i32, oneshot::Sender<Command>>>>;

/// A live connection; cheap to share.
#[derive(Debug)]
pub struct Connection {
    addr: String,
    frames: mpsc::UnboundedSender<Bytes>,
    pending: Pending,
    next_opaque: AtomicI32,
    dead: Arc<AtomicBool>,
    stop: watch::Sender<bool>,
}

impl Connection {
    /// Dials `addr` and starts the reader and writer tasks. Server requests go to `notices`.
    pub async fn connect(
        addr: &str,
        timeout: Duration,
        max_frame: usize,
        notices: Option<mpsc::UnboundedSender<ServerRequest>>,
    ) -> Result<Connection> {
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
        let (read, write) = stream.into_split();
        let (frames, rx) = mpsc::unbounded_channel();
        let pending: Pending = Arc::default();
        let dead = Arc::new(AtomicBool::new(false));
        let (stop, stopped) = watch::channel(false);
        tokio::spawn(write_loop(write, rx, dead.clone()));
        tokio::spawn(read_loop(ReadLoop {
            addr: addr.to_owned(),
            read,
            max_frame,
            pending: pending.clone(),
            dead: dead.clone(),
            frames: frames.clone(),
            notices,
            stopped,
        }));
        Ok(Connection {
            addr: addr.to_owned(),
            frames,
            pending,
            next_opaque: AtomicI32::new(1),
            dead,
            stop,
        })
    }

    /// Whether the socket failed or closed.
    pub fn is_dead(&self) -> bool {
        self.dead.load(Ordering::Acquire) || self.frames.is_closed()
    }

    fn send_frame(&self, command: &Command) -> Result<()> {
        let mut buf = BytesMut::new();
        command.encode(&mut buf)?;
        self.frames.send(buf.freeze()).map_err(|_| self.lost())
    }

    fn lost(&self) -> Error {
        Error::Disconnected {
            addr: self.addr.clone(),
            reason: "connection closed".into(),
        }
    }

    /// Sends `command` and waits up to `timeout` for its response.
    pub async fn invoke(&self, mut command: Command, timeout: Duration) -> Result<Command> {
        let opaque = self.next_opaque.fetch_add(1, Ordering::Relaxed) & i32::MAX;
        command.opaque = opaque;
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).insert(opaque, tx);
        let code = command.code;
        // Removes the entry however this future ends (answered, timed out or dropped).
        let _guard = PendingGuard(&self.pending, opaque);
        if self.is_dead() {
            return Err(self.lost());
        }
        self.send_frame(&command)?;
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(response)) => Ok(response),
            Ok(Err(_)) => Err(self.lost()),
            Err(_) => Err(Error::Timeout {
                code,
                addr: self.addr.clone(),
                timeout,
            }),
        }
    }

    /// Sends `command` without waiting for (or getting) an answer.
    pub fn oneway(&self, mut command: Command) -> Result<()> {
        command.flag |= FLAG_ONEWAY;
        command.opaque = self.next_opaque.fetch_add(1, Ordering::Relaxed) & i32::MAX;
        self.send_frame(&command)
    }

    /// Closes the connection; waiting callers get `Error::Disconnected`.
    pub fn close(&self) {
        self.dead.store(true, Ordering::Release);
        let _ = self.stop.send(true);
        lock(&self.pending).clear();
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.close();
    }
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
    mut write: OwnedWriteHalf,
    mut rx: mpsc::UnboundedReceiver<Bytes>,
    dead: Arc<AtomicBool>,
) {
    while let Some(frame) = rx.recv().await {
        if dead.load(Ordering::Acquire) || write.write_all(&frame).await.is_err() {
            break;
        }
    }
    dead.store(true, Ordering::Release);
    let _ = write.shutdown().await;
}

struct ReadLoop {
    addr: String,
    read: OwnedReadHalf,
    max_frame: usize,
    pending: Pending,
    dead: Arc<AtomicBool>,
    frames: mpsc::UnboundedSender<Bytes>,
    notices: Option<mpsc::UnboundedSender<ServerRequest>>,
    stopped: watch::Receiver<bool>,
}

async fn read_loop(mut r: ReadLoop) {
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let reason = loop {
        if r.dead.load(Ordering::Acquire) {
            break "closed".to_owned();
        }
        match split_frame(&mut buf, r.max_frame) {
            Ok(Some(frame)) => match Command::decode(frame) {
                Ok(command) => r.dispatch(command),
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
    tracing::debug!(addr = %r.addr, %reason, "rocketmq connection ended");
    r.dead.store(true, Ordering::Release);
    // Dropping the senders wakes every waiting caller with `Disconnected`.
    lock(&r.pending).clear();
}

impl ReadLoop {
    fn dispatch(&self, command: Command) {
        if command.is_response() {
            if let Some(tx) = lock(&self.pending).remove(&command.opaque) {
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
            let mut buf = BytesMut::new();
            if answer.encode(&mut buf).is_ok() {
                let _ = self.frames.send(buf.freeze());
            }
        }
    }
}

#[cfg(test)]
#[path = "conn_tests.rs"]
mod tests;
