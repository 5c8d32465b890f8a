//! Reconnect delays (exponential, capped, with jitter) and failure streaks that decide how loudly
//! a background failure is logged. Pure: the random draw is passed in.

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

/// Consecutive failures logged at debug before they are logged at warn.
pub const QUIET_FAILURES: u32 = 3;

/// The delay before the next dial after `failures` consecutive failed ones (at least 1): `min`
/// doubled per failure, capped at `max`, of which the upper half is scaled by `jitter` (in
/// `0.0..=1.0`), so clients that lost a broker together do not redial it together.
pub fn delay(failures: u32, min: Duration, max: Duration, jitter: f64) -> Duration {
    let shift = failures.clamp(1, 17) - 1;
    let base = min.saturating_mul(1 << shift).min(max.max(min));
    let half = base / 2;
    half + half.mul_f64(jitter.clamp(0.0, 1.0))
}

/// A draw in `0.0..1.0` from the standard library's per-process random hash keys (no random
/// number crate needed for jitter).
pub fn jitter() -> f64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(0);
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// Consecutive failures of one background activity (a dial, a heartbeat, an offset persist).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Streak(u32);

/// How loudly to log a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loudness {
    /// One of the first few in a row: expected during restarts and failovers.
    Debug,
    /// A few in a row or more: something is wrong for longer than a hiccup.
    Warn,
}

impl Streak {
    /// Counts a failure; returns how loudly to log it and how many are in the streak.
    pub fn failed(&mut self) -> (Loudness, u32) {
        self.0 = self.0.saturating_add(1);
        let loudness = if self.0 >= QUIET_FAILURES {
            Loudness::Warn
        } else {
            Loudness::Debug
        };
        (loudness, self.0)
    }

    /// Failures in the streak so far.
    pub fn count(&self) -> u32 {
        self.0
    }

    /// Ends the streak; returns how long it was.
    pub fn succeeded(&mut self) -> u32 {
        std::mem::take(&mut self.0)
    }
}

/// Logs a background failure of `what` at the loudness its [`Streak`] calls for, with the
/// given tracing fields.
macro_rules! log_failure {
    ($streak:expr, $what:expr, $($field:tt)*) => {{
        let (loudness, failures) = $streak.failed();
        match loudness {
            $crate::remoting::backoff::Loudness::Debug => {
                tracing::debug!(failures, $($field)*, "{} failed", $what)
            }
            $crate::remoting::backoff::Loudness::Warn => {
                tracing::warn!(failures, $($field)*, "{} failed", $what)
            }
        }
    }};
}
pub(crate) use log_failure;

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Duration = Duration::from_millis(100);
    const MAX: Duration = Duration::from_secs(5);

    #[test]
    fn delays_double_up_to_the_cap_with_the_upper_half_jittered() {
        assert_eq!(delay(1, MIN, MAX, 0.0), Duration::from_millis(50));
        assert_eq!(delay(1, MIN, MAX, 1.0), Duration::from_millis(100));
        assert_eq!(delay(2, MIN, MAX, 1.0), Duration::from_millis(200));
        assert_eq!(delay(4, MIN, MAX, 0.5), Duration::from_millis(600));
        assert_eq!(delay(7, MIN, MAX, 1.0), MAX);
        assert_eq!(delay(u32::MAX, MIN, MAX, 0.0), MAX / 2);
        assert_eq!(
            delay(0, MIN, MAX, 1.0),
            MIN,
            "0 counts as the first failure"
        );
    }

    #[test]
    fn jitter_is_in_range_and_varies() {
        let draws: Vec<f64> = (0..64).map(|_| jitter()).collect();
        assert!(draws.iter().all(|j| (0.0..1.0).contains(j)), "{draws:?}");
        assert!(draws.iter().any(|j| *j != draws[0]), "{draws:?}");
    }

    #[test]
    fn streaks_turn_loud_after_a_few_failures_in_a_row() {
        let mut s = Streak::default();
        assert_eq!(s.failed(), (Loudness::Debug, 1));
        assert_eq!(s.failed(), (Loudness::Debug, 2));
        assert_eq!(s.failed(), (Loudness::Warn, 3));
        assert_eq!(s.failed(), (Loudness::Warn, 4));
        assert_eq!(s.succeeded(), 4);
        assert_eq!(s.failed(), (Loudness::Debug, 1));
    }
}
