//! A connection's heartbeats: `_heartbeat_` every interval from IDENTIFY (or the connection's
//! start), numbered, so that when the connection closes for two silent intervals every
//! heartbeat due before that moment has gone out first, as on nsqd (U1 25-27: two heartbeats,
//! then the close). Without the numbering the sending task and the close, due within a
//! millisecond of each other, would race.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::store::frame;
use crate::tcp::RESPONSE;

/// The running heartbeats of one connection; dropping them stops them.
pub(crate) struct Heartbeats {
    start: Instant,
    interval: Duration,
    /// How many heartbeats went out (each one is sent by whoever claims its number first).
    sent: Arc<AtomicU64>,
    tx: mpsc::UnboundedSender<Bytes>,
    task: JoinHandle<()>,
}

fn beat(tx: &mpsc::UnboundedSender<Bytes>) {
    let _ = tx.send(frame(RESPONSE, b"_heartbeat_"));
}

impl Heartbeats {
    /// Starts sending every `interval` from now.
    pub fn start(tx: mpsc::UnboundedSender<Bytes>, interval: Duration) -> Heartbeats {
        let start = Instant::now();
        let sent = Arc::new(AtomicU64::new(0));
        let task = {
            let (tx, sent) = (tx.clone(), Arc::clone(&sent));
            tokio::spawn(async move {
                let mut ticker = tokio::time::interval_at(start + interval, interval);
                for n in 1u64.. {
                    ticker.tick().await;
                    if tx.is_closed() {
                        return;
                    }
                    if sent
                        .compare_exchange(n - 1, n, Ordering::SeqCst, Ordering::SeqCst)
                        .is_ok()
                    {
                        beat(&tx);
                    }
                }
            })
        };
        Heartbeats {
            start,
            interval,
            sent,
            tx,
            task,
        }
    }

    /// Sends the heartbeats due at or before `at` that have not gone out yet.
    pub fn catch_up(&self, at: Instant) {
        let due = (at.saturating_duration_since(self.start).as_nanos()
            / self.interval.as_nanos().max(1)) as u64;
        loop {
            let sent = self.sent.load(Ordering::SeqCst);
            if sent >= due {
                return;
            }
            if self
                .sent
                .compare_exchange(sent, sent + 1, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
            {
                beat(&self.tx);
            }
        }
    }
}

impl Drop for Heartbeats {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(rx: &mut mpsc::UnboundedReceiver<Bytes>) -> usize {
        std::iter::from_fn(|| rx.try_recv().ok()).count()
    }

    #[tokio::test(start_paused = true)]
    async fn heartbeats_due_before_a_close_go_out_once() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let interval = Duration::from_secs(1);
        let heartbeats = Heartbeats::start(tx, interval);
        let start = Instant::now();
        // The close comes at 2.5 s, before the task has run: both due heartbeats go out.
        heartbeats.catch_up(start + Duration::from_millis(2500));
        assert_eq!(count(&mut rx), 2);
        // The task's own ticks for them send nothing more.
        tokio::time::sleep_until(start + Duration::from_millis(2900)).await;
        assert_eq!(count(&mut rx), 0);
        tokio::time::sleep_until(start + Duration::from_millis(3100)).await;
        assert_eq!(count(&mut rx), 1);
        heartbeats.catch_up(start + Duration::from_millis(3500));
        assert_eq!(count(&mut rx), 0);
    }
}
