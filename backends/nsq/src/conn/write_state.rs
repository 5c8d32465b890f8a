//! What the [`Writer`] handles share with the write task: the pending buffer, the socket
//! while the task is not writing, and what the task reports (bytes written, why it failed).

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use bytes::BytesMut;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::{oneshot, watch, Notify};

use super::requests::{ReplyTo, Requests};
#[cfg(doc)]
use super::writer::Writer;
use crate::error::Error;

#[derive(Debug)]
pub(super) struct WriteShared {
    pub(super) pending: Mutex<Pending>,
    /// Commands the server answers, queued per thread (see `Requests`).
    pub(super) requests: Requests,
    pub(super) wake: Notify,
    /// Bytes handed to the socket so far, and whether the write task has ended: what
    /// [`Writer::flush`] waits on.
    pub(super) written: watch::Sender<Written>,
    /// Why the write task gave up, set before it ends: the reader ends the connection with it
    /// (see `read_frame`). Apart from `written`, which changes with every write, so the reader
    /// waiting on it wakes only for a failure.
    pub(super) failed: watch::Sender<Option<WriteFailed>>,
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
pub(super) struct Written {
    pub(super) bytes: u64,
    pub(super) ended: bool,
}

/// How a write failed (a copyable summary: `std::io::Error` is not `Clone`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum WriteFailed {
    /// It did not complete within the write timeout.
    TimedOut,
    /// The socket refused it.
    Io(std::io::ErrorKind),
}

impl WriteFailed {
    pub(super) fn error(self, addr: &str, timeout: Duration) -> Error {
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
pub(super) struct Pending {
    pub(super) buf: BytesMut,
    /// Bytes ever queued (the end of `buf` in the connection's byte stream).
    pub(super) queued: u64,
    /// The socket, here while the task is not writing; the task takes it along with `buf`,
    /// so a direct write can never overtake (or interleave with) one of the task's.
    pub(super) half: Option<OwnedWriteHalf>,
    /// The task was woken and has not taken `buf` yet: later commands need not wake it.
    pub(super) scheduled: bool,
    /// No more commands accepted (shut down, or a write failed).
    pub(super) closed: bool,
    /// The write task has returned.
    pub(super) ended: bool,
    /// Told once what was queued before a shutdown is written and the write side shut.
    pub(super) shutdown: Option<oneshot::Sender<()>>,
    /// Where the replies to the requests written so far go, in wire order (the reader takes
    /// them as replies come).
    pub(super) replies: VecDeque<ReplyTo>,
    /// Requests written ever.
    pub(super) requests: u64,
}

impl WriteShared {
    /// No more commands of either kind.
    pub(super) fn close(&self, pending: &mut Pending) {
        pending.closed = true;
        self.requests.close();
    }

    /// Bytes queued and not yet taken by the write task.
    pub(super) fn queued_len(&self) -> usize {
        self.lock().buf.len() + self.requests.len()
    }

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        msgstream::sync::lock(&self.pending)
    }
}
