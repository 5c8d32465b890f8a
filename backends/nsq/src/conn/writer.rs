//! The writing half of a connection, shared by whoever sends commands on it.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::oneshot;

use super::requests::ReplyTo;
#[cfg(doc)]
use super::requests::Requests;
use super::write_state::WriteShared;
use super::write_task::write_loop;
use crate::codec::Command;
use crate::error::{Error, Result};

/// The writing half, shared by whoever sends commands on the connection.
///
/// Commands are encoded straight into one pending buffer (no allocation or channel node per
/// command) that a write task sends in one write, in queue order, each write bounded by the
/// write timeout. Only the first command after a write wakes the task, and the task yields
/// (again while yielding gathers more) before taking the buffer, so everything the tasks
/// ready at that moment queue (the publishers woken by one read of `OK`s, a burst of FINs)
/// joins one write: one wake-up and one syscall per burst instead of per command. A failed or
/// timed-out write closes the connection (its reader ends with the write's error, so nothing
/// waits on for a reply that cannot come); queuing on a closed connection is
/// [`Error::Closed`]. Dropping the last handle flushes what is queued and shuts the write
/// side.
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
    pub(super) shared: Arc<WriteShared>,
    /// The deadline of each write, for the error a timed-out one is reported with.
    timeout: Duration,
}

impl Writer {
    pub(super) fn spawn(addr: &str, half: OwnedWriteHalf, timeout: Duration) -> Arc<Writer> {
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
