//! What the admin page knows about the backend: the latest look at every channel, and a short
//! history of looks from which rates and the lag chart are computed.
//!
//! Everything a backend cannot tell is kept as a reason (`"not available from nsq"`), never as
//! a zero, so the page and the API can say so instead of showing a number that is not true.

use std::collections::{BTreeMap, VecDeque};

use serde::Serialize;

/// How many looks the history keeps (at one a second: five minutes).
pub const HISTORY: usize = 300;

/// One channel at the latest look.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Channel {
    /// Newest message id read (as `consume` prints ids), or why it is not known.
    pub newest_id: Known<String>,
    /// The backend's estimate of the bytes it stores for the channel, or why it is not known.
    pub size_bytes: Known<u64>,
    /// Messages read from the channel since the page started (its whole content at the first
    /// look); `None` when the backend has no readers.
    pub messages_read: Option<u64>,
    /// Last timetick read, `None` when none was read (or the backend has no readers).
    pub last_tick: Option<u64>,
    /// Subscriptions with their lag, or why they are not known.
    pub subscriptions: Known<Vec<Subscription>>,
}

/// One subscription of a channel.
#[derive(Debug, Clone, Serialize)]
pub struct Subscription {
    /// Its name.
    pub name: String,
    /// Messages after its acked position, or why it is not known.
    pub lag: Known<u64>,
}

/// A value, or the reason it is not available.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Known<T> {
    /// The value.
    Value(T),
    /// Why there is none (`not available from <backend>`, or an error).
    Unavailable(String),
}

impl<T> Default for Known<T> {
    fn default() -> Self {
        Known::Unavailable("not looked at yet".to_string())
    }
}

impl<T> Known<T> {
    /// The value, if known.
    pub fn value(&self) -> Option<&T> {
        match self {
            Known::Value(v) => Some(v),
            Known::Unavailable(_) => None,
        }
    }
}

/// One look at every channel, kept for rates and charts.
#[derive(Debug, Clone, Default)]
pub struct Sample {
    /// Milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// Per channel: messages read so far, last tick, lag per subscription.
    pub channels: BTreeMap<String, Channel>,
}

/// The shared state: the latest look, its history, and when it was taken.
#[derive(Debug, Default)]
pub struct State {
    /// The channels, or why they cannot be listed.
    pub channels: Known<BTreeMap<String, Channel>>,
    /// The latest looks, oldest first.
    pub history: VecDeque<Sample>,
}

impl State {
    /// Records a look: it becomes the latest, and joins the history.
    pub fn record(&mut self, at_ms: u64, channels: Known<BTreeMap<String, Channel>>) {
        if let Known::Value(map) = &channels {
            self.history.push_back(Sample {
                at_ms,
                channels: map.clone(),
            });
            while self.history.len() > HISTORY {
                self.history.pop_front();
            }
        }
        self.channels = channels;
    }

    /// The two looks a rate is computed over: the newest, and the oldest at most `window_ms`
    /// before it.
    fn window(&self, window_ms: u64) -> Option<(&Sample, &Sample)> {
        let newest = self.history.back()?;
        let oldest = self
            .history
            .iter()
            .find(|s| newest.at_ms.saturating_sub(s.at_ms) <= window_ms)?;
        (newest.at_ms > oldest.at_ms).then_some((oldest, newest))
    }

    /// Messages per second written to `channel` over the last `window_ms` (as read by the
    /// page's reader); `None` without readers or without two looks yet.
    pub fn produce_rate(&self, channel: &str, window_ms: u64) -> Option<f64> {
        let (old, new) = self.window(window_ms)?;
        let read = |s: &Sample| s.channels.get(channel)?.messages_read;
        let secs = (new.at_ms - old.at_ms) as f64 / 1000.0;
        Some(read(new)?.saturating_sub(read(old)?) as f64 / secs)
    }

    /// Messages per second a subscription acknowledged: what was written minus how much its
    /// lag grew. `None` when the lag or the writes are not known.
    pub fn consume_rate(&self, channel: &str, sub: &str, window_ms: u64) -> Option<f64> {
        let (old, new) = self.window(window_ms)?;
        let lag = |s: &Sample| -> Option<u64> {
            let subs = s.channels.get(channel)?.subscriptions.value()?;
            subs.iter().find(|x| x.name == sub)?.lag.value().copied()
        };
        let written = self.produce_rate(channel, window_ms)?;
        let secs = (new.at_ms - old.at_ms) as f64 / 1000.0;
        let grew = (lag(new)? as f64 - lag(old)? as f64) / secs;
        Some((written - grew).max(0.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn look(read: u64, lag: u64) -> Known<BTreeMap<String, Channel>> {
        let channel = Channel {
            newest_id: Known::Value(read.to_string()),
            size_bytes: Known::Value(0),
            messages_read: Some(read),
            last_tick: None,
            subscriptions: Known::Value(vec![Subscription {
                name: "g".into(),
                lag: Known::Value(lag),
            }]),
        };
        Known::Value([("c".to_string(), channel)].into())
    }

    #[test]
    fn rates_come_from_reads_and_lag_over_the_window() {
        let mut state = State::default();
        state.record(1_000, look(10, 10));
        assert_eq!(state.produce_rate("c", 5_000), None, "one look is no rate");
        state.record(3_000, look(30, 20));
        // 20 written in 2 s; the lag grew by 10, so 10 were acknowledged.
        assert_eq!(state.produce_rate("c", 5_000), Some(10.0));
        assert_eq!(state.consume_rate("c", "g", 5_000), Some(5.0));
        assert_eq!(state.consume_rate("c", "other", 5_000), None);
        state.record(9_000, Known::Unavailable("not available from x".into()));
        assert!(matches!(state.channels, Known::Unavailable(_)));
        assert_eq!(state.history.len(), 2, "a failed look is not history");
    }
}
