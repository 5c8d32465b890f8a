//! What a connection writes, and when: nsqd 1.3.0's output buffer.
//!
//! nsqd writes deliveries into a per-connection buffer (16 KiB by default) and flushes it when
//! the client has no RDY left, when it fills, when any other frame (a response, an error, a
//! heartbeat) is written, or on a ticker of the connection's `output_buffer_timeout` (250 ms by
//! default, `25..=30000` ms asked in IDENTIFY). So a lone message to a consumer with RDY to
//! spare arrives up to that long after its publish. `output_buffer_size: -1` turns buffering
//! off; `output_buffer_timeout: -1` stops the ticker (buffered deliveries then wait for one of
//! the other flushes). The Youzan mode writes every frame at once (its buffering is not
//! modelled).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::mpsc;

/// nsqd's default output buffer size.
pub(crate) const DEFAULT_SIZE: usize = 16 * 1024;
/// nsqd's default flush interval.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_millis(250);
/// The shortest and longest `output_buffer_timeout` nsqd accepts by default, in ms.
const TIMEOUT_RANGE_MS: std::ops::RangeInclusive<i64> = 25..=30_000;
/// The largest `output_buffer_size` nsqd accepts by default.
const MAX_SIZE: i64 = 64 * 1024;

/// Frame type of a delivery.
const MESSAGE: [u8; 4] = 2i32.to_be_bytes();

/// A connection's buffering: `size` 1 is none (every frame written at once); `flush_every`
/// `None` is no ticker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Buffering {
    pub size: usize,
    pub flush_every: Option<Duration>,
}

impl Buffering {
    /// nsqd's defaults.
    pub(crate) fn nsqd() -> Buffering {
        Buffering {
            size: DEFAULT_SIZE,
            flush_every: Some(DEFAULT_TIMEOUT),
        }
    }

    /// No buffering (the Youzan mode).
    pub(crate) fn none() -> Buffering {
        Buffering {
            size: 1,
            flush_every: None,
        }
    }

    /// What IDENTIFY's `output_buffer_size` and `output_buffer_timeout` make of `self`, as
    /// nsqd's `SetOutputBuffer` does (0 keeps a setting; the timeout first), or nsqd's text
    /// for the refusal.
    pub(crate) fn identify(self, size: i64, timeout: i64) -> Result<Buffering, String> {
        let mut next = self;
        match timeout {
            -1 => next.flush_every = None,
            0 => {}
            ms if TIMEOUT_RANGE_MS.contains(&ms) => {
                next.flush_every = Some(Duration::from_millis(ms as u64));
            }
            ms => return Err(format!("output buffer timeout ({ms}) is invalid")),
        }
        match size {
            -1 => {
                next.size = 1;
                next.flush_every = None;
            }
            0 => {}
            n if (64..=MAX_SIZE).contains(&n) => next.size = n as usize,
            n => return Err(format!("output buffer size ({n}) is invalid")),
        }
        Ok(next)
    }

    /// The IDENTIFY answer's `(output_buffer_size, output_buffer_timeout)` in ms.
    pub(crate) fn answer(self) -> (u32, u32) {
        let timeout = self.flush_every.map_or(0, |t| t.as_millis() as u32);
        (self.size as u32, timeout)
    }
}

/// A connection's buffering, set by IDENTIFY and read by its writer.
pub(crate) type SharedBuffering = Arc<Mutex<Buffering>>;

/// The frame that makes the writer flush what it buffered: sent when a delivery used up the
/// client's RDY, or RDY went down to what is in flight (nsqd's "not ready" flush).
pub(crate) fn flush_marker() -> Bytes {
    Bytes::new()
}

fn is_message(frame: &[u8]) -> bool {
    frame.get(4..8) == Some(&MESSAGE[..])
}

/// Writes what the connection sends, buffering deliveries as `buffering` says, until the
/// sending side is gone or a write fails; then shuts the socket down.
pub(crate) async fn write_frames(
    mut wr: OwnedWriteHalf,
    mut rx: mpsc::UnboundedReceiver<Bytes>,
    buffering: SharedBuffering,
) {
    let mut pending: Vec<u8> = Vec::new();
    let mut ticker: Option<(Duration, tokio::time::Interval)> = None;
    loop {
        let now = *buffering.lock().unwrap_or_else(|p| p.into_inner());
        if ticker.as_ref().map(|(every, _)| *every) != now.flush_every {
            ticker = now.flush_every.map(|every| {
                let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
                (every, tick)
            });
        }
        let flush_due = async {
            match ticker.as_mut() {
                Some((_, tick)) => {
                    tick.tick().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        let mut flush = false;
        tokio::select! {
            frame = rx.recv() => {
                let Some(frame) = frame else { break };
                flush |= take(&frame, &mut pending, now);
                while let Ok(more) = rx.try_recv() {
                    flush |= take(&more, &mut pending, now);
                }
            }
            () = flush_due => flush = true,
        }
        if (flush || pending.len() >= now.size) && !pending.is_empty() {
            if wr.write_all(&pending).await.is_err() {
                return;
            }
            pending.clear();
        }
    }
    if !pending.is_empty() && wr.write_all(&pending).await.is_err() {
        return;
    }
    let _ = wr.shutdown().await;
}

/// Adds `frame` to what is pending; whether it must go out now (anything but a buffered
/// delivery, and the flush marker).
fn take(frame: &Bytes, pending: &mut Vec<u8>, buffering: Buffering) -> bool {
    pending.extend_from_slice(frame);
    frame.is_empty() || !is_message(frame) || buffering.size <= 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identify_follows_nsqds_rules() {
        let nsqd = Buffering::nsqd();
        assert_eq!(nsqd.identify(0, 0), Ok(nsqd));
        assert_eq!(nsqd.answer(), (16384, 250));
        assert_eq!(nsqd.identify(-1, -1).map(Buffering::answer), Ok((1, 0)));
        assert_eq!(nsqd.identify(-1, 100).map(Buffering::answer), Ok((1, 0)));
        assert_eq!(nsqd.identify(0, -1).map(Buffering::answer), Ok((16384, 0)));
        assert_eq!(nsqd.identify(64, 25).map(Buffering::answer), Ok((64, 25)));
        assert_eq!(
            nsqd.identify(0, 10),
            Err("output buffer timeout (10) is invalid".into())
        );
        assert_eq!(
            nsqd.identify(63, 0),
            Err("output buffer size (63) is invalid".into())
        );
        // The timeout is checked first.
        assert_eq!(
            nsqd.identify(1, 1),
            Err("output buffer timeout (1) is invalid".into())
        );
    }
}
