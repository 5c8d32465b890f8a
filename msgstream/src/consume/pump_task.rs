//! A pump's task: receive, decode ([`super::receive`]), hand over, until stopped.
//!
//! The task owns its channel's consumer while it runs and gives it back, with everything it
//! received but had not handed over, when stopped ([`Parked`]). It receives no more than its
//! queue has room for, so a batch that fits is handed over whole; a transient receive error is
//! retried with backoff, a permanent one ends the channel with that error. A task that panics
//! (a user decoder, say) ends its channel with an error instead of going silent.

use std::collections::VecDeque;
use std::time::Duration;

use futures::FutureExt;
use tokio::sync::oneshot;

use super::receive::PumpContext;
use super::{Parked, SlotState};
use crate::consume::batch::Batch;
use crate::consume::queue::Queue;
use crate::consume::runs::Runs;
use crate::Error;

/// First pause after a transient receive error; doubles up to [`MAX_BACKOFF`].
const ERROR_BACKOFF: Duration = Duration::from_millis(100);

/// Longest pause between retries of a failing receive.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Starts the task of `parked` (channel `name`), working with `ctx`: it runs until told to
/// stop, and then gives the consumer back; if it panics, the channel ends with an error.
pub(super) fn spawn<R: Runs>(parked: Parked<R>, ctx: PumpContext<R>, name: String) -> SlotState<R> {
    let (stop, stopped) = oneshot::channel();
    let (index, generation) = (ctx.channel, ctx.generation);
    let tx = ctx.tx.clone();
    let signal = ctx.signal.clone();
    let handle = tokio::spawn(async move {
        let mut stopped = stopped;
        let outcome = std::panic::AssertUnwindSafe(run(parked, ctx, &mut stopped))
            .catch_unwind()
            .await;
        match outcome {
            Ok(parked) => Some(parked),
            Err(panic) => {
                let error = panicked(&name, panic.as_ref());
                tracing::error!(channel = %name, %error, "consumer task panicked");
                signal.set_ended();
                let ending = Batch::failure(index, generation, error, None, true);
                hand_over_ending(&tx, ending, &mut stopped).await;
                None
            }
        }
    });
    SlotState::Running { stop, handle }
}

/// A pump that panicked: its channel ends with this error.
fn panicked(channel: &str, panic: &(dyn std::any::Any + Send)) -> Error {
    let what = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into());
    Error::backend(
        "msgstream",
        format!("the consumer task of channel {channel:?} panicked: {what}"),
    )
}

/// Queues the batch that ends a channel, as room comes (in parts if the queue is smaller than
/// it), until it is all queued, the reader is gone, or the pump is stopped: a stream that
/// closes or seeks stops reading, and must not wait for room it will never give.
async fn hand_over_ending<S: Default>(
    tx: &Queue<S>,
    ending: Batch<S>,
    stop: &mut oneshot::Receiver<()>,
) {
    let mut pending = VecDeque::from([ending]);
    while !pending.is_empty() {
        tokio::select! {
            biased;
            _ = &mut *stop => return,
            sent = tx.send(&mut pending) => if sent.is_err() { return },
        }
    }
}

/// Deliveries in `pending`, all runs together.
fn pending_len<S>(pending: &VecDeque<Batch<S>>) -> usize {
    pending.iter().map(Batch::len).sum()
}

async fn run<R: Runs>(
    mut parked: Parked<R>,
    ctx: PumpContext<R>,
    stop: &mut oneshot::Receiver<()>,
) -> Parked<R> {
    let mut backoff = ERROR_BACKOFF;
    loop {
        if parked.pending.is_empty() {
            // Receive no more than the queue has room for (but at least one, to wait on): a
            // batch that fits is handed over whole, not split into what fits and a rest.
            let want = ctx.batch.min(ctx.tx.room()).max(1);
            let received = tokio::select! {
                biased;
                _ = &mut *stop => return parked,
                received = parked.consumer.recv_batch(want) => received,
            };
            let backoff_from = ctx.receive(&mut parked, received);
            ctx.signal.set_pending(pending_len(&parked.pending));
            match backoff_from {
                None => backoff = ERROR_BACKOFF,
                Some(error) => {
                    tracing::warn!(channel = %parked.consumer.topic(), %error, ?backoff, "receive failed, retrying");
                    crate::metrics::get().retried("receive");
                    tokio::select! {
                        _ = &mut *stop => return parked,
                        _ = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
            continue;
        }
        let sent = tokio::select! {
            biased;
            _ = &mut *stop => return parked,
            sent = ctx.tx.send(&mut parked.pending) => sent,
        };
        let Ok(sent) = sent else { return parked };
        ctx.signal.set_pending(pending_len(&parked.pending));
        if sent.ticks > 0 {
            ctx.signal.add_ticks_queued(sent.ticks);
        }
        // A receive and a hand-over need not wait (a backlog is read from memory; the queue
        // has room), so without this a pump would go on until its queue is full or its
        // channel read, and the other pumps and the application's task on its worker would
        // wait for it: a stream over many channels would deliver its first pack only after
        // reading a queue's worth of every channel, and then cut packs alone while the pumps
        // idle. Taking turns after each hand-over keeps the channels level and the
        // application fed (about 5 % more throughput in the tt bench at 16 channels).
        tokio::task::yield_now().await;
        if sent.closed {
            let _ = (&mut *stop).await;
            return parked;
        }
    }
}
