//! Consumer-wide backoff (go-nsq's state machine), pure: signals in, actions out.
//!
//! A failed message (REQ with backoff) raises the counter and sends every connection to RDY 0
//! for `multiplier × 2^counter` (or a uniformly random part of it, full jitter), capped at
//! `max`. When that timer fires, one connection gets RDY 1 to "test the waters": its success
//! (FIN) lowers the counter, and at zero every connection gets its full RDY back; a failure
//! backs off again. Signals that arrive while the timer runs are ignored.

use std::time::Duration;

/// How backoff durations grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Strategy {
    /// `multiplier × 2^counter`.
    #[default]
    Exponential,
    /// Uniform in `[0, multiplier × 2^counter)`.
    FullJitter,
}

/// Backoff settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackoffConfig {
    /// Growth.
    pub strategy: Strategy,
    /// Base duration.
    pub multiplier: Duration,
    /// Longest backoff.
    pub max: Duration,
}

impl Default for BackoffConfig {
    fn default() -> Self {
        BackoffConfig {
            strategy: Strategy::Exponential,
            multiplier: Duration::from_secs(1),
            max: Duration::from_secs(120),
        }
    }
}

/// What a finished message says about the downstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// Success (FIN).
    Resume,
    /// Failure (REQ with backoff).
    Backoff,
    /// Neither (REQ without backoff, TOUCH).
    Continue,
}

/// What the consumer must do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Nothing changes.
    None,
    /// RDY 0 everywhere, then call [`Backoff::timer_fired`] after this long.
    Pause(Duration),
    /// Backoff is over: every connection back to its full RDY.
    Recover,
}

/// The state machine.
#[derive(Debug, Clone)]
pub struct Backoff {
    config: BackoffConfig,
    counter: u32,
    timer_running: bool,
    seed: u64,
}

impl Backoff {
    /// Not backing off. `seed` drives full jitter.
    pub fn new(config: BackoffConfig, seed: u64) -> Backoff {
        Backoff {
            config,
            counter: 0,
            timer_running: false,
            seed: seed | 1,
        }
    }

    /// Whether the consumer is backing off (RDY must stay 0 except the test connection).
    pub fn active(&self) -> bool {
        self.counter > 0
    }

    /// Whether a pause is running (every connection at RDY 0).
    pub fn paused(&self) -> bool {
        self.timer_running
    }

    /// The backoff level.
    pub fn counter(&self) -> u32 {
        self.counter
    }

    /// Feeds one message outcome.
    pub fn signal(&mut self, signal: Signal) -> Action {
        if self.timer_running {
            return Action::None;
        }
        let updated = match signal {
            Signal::Resume if self.counter > 0 => {
                self.counter -= 1;
                true
            }
            Signal::Backoff if self.ceiling(self.counter + 1) <= self.config.max => {
                self.counter += 1;
                true
            }
            _ => false,
        };
        if updated && self.counter == 0 {
            return Action::Recover;
        }
        if self.counter > 0 {
            self.timer_running = true;
            return Action::Pause(self.duration());
        }
        Action::None
    }

    /// The pause ended: the caller gives one connection RDY 1.
    pub fn timer_fired(&mut self) {
        self.timer_running = false;
    }

    fn ceiling(&self, counter: u32) -> Duration {
        let factor = 1u32.checked_shl(counter.min(31)).unwrap_or(u32::MAX);
        self.config.multiplier.saturating_mul(factor)
    }

    fn duration(&mut self) -> Duration {
        let ceiling = self.ceiling(self.counter).min(self.config.max);
        match self.config.strategy {
            Strategy::Exponential => ceiling,
            Strategy::FullJitter => {
                self.seed ^= self.seed << 13;
                self.seed ^= self.seed >> 7;
                self.seed ^= self.seed << 17;
                let nanos = ceiling.as_nanos().max(1) as u64;
                Duration::from_nanos(self.seed % nanos)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(strategy: Strategy) -> BackoffConfig {
        BackoffConfig {
            strategy,
            multiplier: Duration::from_millis(10),
            max: Duration::from_millis(100),
        }
    }

    #[test]
    fn enter_test_the_waters_and_recover() {
        let mut b = Backoff::new(config(Strategy::Exponential), 1);
        assert_eq!(b.signal(Signal::Resume), Action::None);
        assert_eq!(
            b.signal(Signal::Backoff),
            Action::Pause(Duration::from_millis(20))
        );
        assert_eq!(
            b.signal(Signal::Backoff),
            Action::None,
            "ignored while paused"
        );
        b.timer_fired();
        assert_eq!(
            b.signal(Signal::Backoff),
            Action::Pause(Duration::from_millis(40))
        );
        b.timer_fired();
        assert_eq!(
            b.signal(Signal::Resume),
            Action::Pause(Duration::from_millis(20))
        );
        b.timer_fired();
        assert_eq!(
            b.signal(Signal::Continue),
            Action::Pause(Duration::from_millis(20))
        );
        b.timer_fired();
        assert_eq!(b.signal(Signal::Resume), Action::Recover);
        assert!(!b.active());
    }

    #[test]
    fn counter_stops_at_the_cap_and_jitter_stays_below_it() {
        let mut b = Backoff::new(config(Strategy::Exponential), 1);
        for _ in 0..10 {
            b.signal(Signal::Backoff);
            b.timer_fired();
        }
        assert_eq!(b.counter(), 3, "10 × 2^4 would pass the 100 ms cap");
        let mut j = Backoff::new(config(Strategy::FullJitter), 42);
        for _ in 0..50 {
            if let Action::Pause(d) = j.signal(Signal::Backoff) {
                assert!(d < Duration::from_millis(100));
            }
            j.timer_fired();
        }
    }
}
