//! The write task: takes what the [`Writer`] handles queued and writes it, one write per
//! burst, each within the write timeout.

use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::AsyncWriteExt;

use super::write_state::{WriteFailed, WriteShared};
#[cfg(doc)]
use super::writer::Writer;

/// Most yields after the first while they keep gathering commands (see `write_loop`).
const MORE_YIELDS: usize = 8;

/// Yields in a row that gathered nothing after which the write task stops yielding (see
/// `write_loop`).
const SKIP_AFTER_MISSES: u32 = 4;

/// Runs until the connection is shut down or a write fails: waits to be woken, lets the
/// burst gather, writes it, and reports the bytes written (or why it failed) to the handles.
pub(super) async fn write_loop(addr: String, shared: Arc<WriteShared>, timeout: Duration) {
    // Two buffers taking turns: commands queue into one while the other is written.
    let mut batch = BytesMut::new();
    // Wake-ups in a row whose yield gathered nothing, and wake-ups counted for probing again.
    let (mut misses, mut wakeups) = (0u32, 0u32);
    let shutdown = loop {
        shared.wake.notified().await;
        wakeups = wakeups.wrapping_add(1);
        // Yielding lets the senders woken with this one queue first, so a burst joins one
        // write; it costs a lone command a trip through the scheduler, so after several
        // fruitless yields in a row only every 8th wake-up yields. One miss is not enough to
        // stop: a burst's last sender, running late on another worker, misses once per burst.
        if misses < SKIP_AFTER_MISSES || wakeups % 8 == 0 {
            let mut before = shared.queued_len();
            tokio::task::yield_now().await;
            let mut queued = shared.queued_len();
            misses = if queued > before {
                0
            } else {
                misses.saturating_add(1)
            };
            // Senders woken together run on several workers, so one yield can end before the
            // others have queued: keep yielding (bounded) while each yield still gathers.
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
