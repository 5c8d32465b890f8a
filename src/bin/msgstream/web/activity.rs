//! When a connection last did something: bytes read or written, or a request being answered.
//! The admin server closes a connection once this has stood still for its idle timeout.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;

/// One connection's activity, shared by its socket and its request handler.
#[derive(Clone)]
pub struct Activity(Arc<Inner>);

struct Inner {
    since: Instant,
    /// Milliseconds after `since` of the last byte moved.
    last: AtomicU64,
    /// Requests being answered.
    busy: AtomicUsize,
}

/// Marks a request as being answered until dropped.
pub struct Busy(Arc<Inner>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.busy.fetch_sub(1, Ordering::SeqCst);
        touch(&self.0);
    }
}

fn touch(inner: &Inner) {
    let now = u64::try_from(inner.since.elapsed().as_millis()).unwrap_or(u64::MAX);
    inner.last.store(now, Ordering::SeqCst);
}

impl Activity {
    /// Activity of a connection opened now.
    pub fn new() -> Activity {
        Activity(Arc::new(Inner {
            since: Instant::now(),
            last: AtomicU64::new(0),
            busy: AtomicUsize::new(0),
        }))
    }

    /// Marks a request as being answered: the connection is not idle meanwhile, however long
    /// the backend takes.
    pub fn busy(&self) -> Busy {
        self.0.busy.fetch_add(1, Ordering::SeqCst);
        Busy(self.0.clone())
    }

    /// Completes once nothing has happened for `limit`.
    pub async fn idle_for(&self, limit: Duration) {
        loop {
            let last = Duration::from_millis(self.0.last.load(Ordering::SeqCst));
            let deadline = self.0.since + last + limit;
            if self.0.busy.load(Ordering::SeqCst) == 0 && Instant::now() >= deadline {
                return;
            }
            // While a request is answered, look again a whole period later.
            tokio::time::sleep_until(deadline.max(Instant::now() + limit / 4)).await;
        }
    }
}

/// A socket that records its activity. It holds the connection's slot, released before the
/// socket closes (at shutdown, or first when dropped: fields drop in order), so a client that
/// sees the close can connect again at once.
pub struct Watched<T> {
    slot: Option<OwnedSemaphorePermit>,
    inner: T,
    activity: Activity,
}

impl<T> Watched<T> {
    /// `inner`, recording into `activity`, holding `slot` while open.
    pub fn new(inner: T, activity: Activity, slot: OwnedSemaphorePermit) -> Self {
        Watched {
            slot: Some(slot),
            inner,
            activity,
        }
    }
}

/// Records progress: a poll that moved bytes.
fn moved<R>(activity: &Activity, poll: &Poll<io::Result<R>>, moved: bool) {
    if matches!(poll, Poll::Ready(Ok(_))) && moved {
        touch(&activity.0);
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Watched<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let poll = Pin::new(&mut this.inner).poll_read(cx, buf);
        moved(&this.activity, &poll, buf.filled().len() > before);
        poll
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Watched<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.inner).poll_write(cx, buf);
        let wrote = matches!(poll, Poll::Ready(Ok(n)) if n > 0);
        moved(&this.activity, &poll, wrote);
        poll
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.slot = None;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn idle_counts_from_the_last_activity_and_not_while_busy() {
        let activity = Activity::new();
        let limit = Duration::from_secs(10);
        let started = Instant::now();
        activity.idle_for(limit).await;
        assert_eq!(started.elapsed(), limit);

        let busy = activity.busy();
        let waiting = tokio::spawn({
            let activity = activity.clone();
            async move { activity.idle_for(limit).await }
        });
        tokio::time::sleep(limit * 3).await;
        assert!(!waiting.is_finished(), "idle while a request is answered");
        let answered = Instant::now();
        drop(busy);
        waiting.await.expect("idle task");
        assert!(answered.elapsed() >= limit, "{:?}", answered.elapsed());
    }
}
