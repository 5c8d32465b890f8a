//! Bounded retries with exponential backoff for creating producers and consumers.
//!
//! Delays come from the `retry` crate's delay iterators; the waiting is `tokio::time::sleep`,
//! so a retry never blocks a runtime thread. Only transient failures ([`crate::Error::is_transient`])
//! are retried; anything else, and the last transient failure, is returned as is.

use std::future::Future;
use std::time::Duration;

use retry::delay::Exponential;

use crate::Result;

/// How often and how patiently to retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in total, the first included (at least 1).
    pub attempts: usize,
    /// Delay before the second attempt; doubles each time.
    pub initial_delay: Duration,
    /// Upper bound of one delay.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 5,
            initial_delay: Duration::from_millis(50),
            max_delay: Duration::from_secs(2),
        }
    }
}

impl RetryPolicy {
    /// Runs `op` until it succeeds, fails permanently, or the attempts are spent.
    pub async fn run<T, F, Fut>(&self, what: &str, mut op: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let initial_ms = u64::try_from(self.initial_delay.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        let mut delays = Exponential::from_millis_with_factor(initial_ms, 2.0)
            .map(|d| d.min(self.max_delay))
            .take(self.attempts.saturating_sub(1));
        let mut attempt = 1;
        loop {
            match op().await {
                Ok(value) => return Ok(value),
                Err(error) if error.is_transient() => match delays.next() {
                    Some(delay) => {
                        tracing::warn!(%error, attempt, ?delay, "{what} failed, retrying");
                        crate::metrics::get().retried(what);
                        tokio::time::sleep(delay).await;
                        attempt += 1;
                    }
                    None => return Err(error),
                },
                Err(error) => return Err(error),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test(start_paused = true)]
    async fn transient_errors_are_retried_a_bounded_number_of_times() {
        let calls = AtomicUsize::new(0);
        let policy = RetryPolicy::default();
        let result: Result<()> = policy
            .run("connect", || async {
                calls.fetch_add(1, Ordering::SeqCst);
                Err(Error::transient("test", "refused"))
            })
            .await;
        assert!(matches!(
            result,
            Err(Error::Backend {
                transient: true,
                ..
            })
        ));
        assert_eq!(calls.load(Ordering::SeqCst), policy.attempts);

        calls.store(0, Ordering::SeqCst);
        let result = policy
            .run("connect", || async {
                if calls.fetch_add(1, Ordering::SeqCst) < 2 {
                    Err(Error::transient("test", "refused"))
                } else {
                    Ok(7)
                }
            })
            .await;
        assert_eq!(result.expect("third attempt succeeds"), 7);

        calls.store(0, Ordering::SeqCst);
        let result: Result<()> = policy
            .run("connect", || async {
                calls.fetch_add(1, Ordering::SeqCst);
                Err(Error::InvalidArgument("bad".into()))
            })
            .await;
        assert!(matches!(result, Err(Error::InvalidArgument(_))));
        assert_eq!(
            calls.load(Ordering::SeqCst),
            1,
            "permanent errors are not retried"
        );
    }
}
