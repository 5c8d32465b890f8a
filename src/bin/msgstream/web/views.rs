//! The JSON the page is built on, computed from the [`State`]: the channel table (with rates)
//! and the timetick view. Pure functions, so what the page shows is tested without a server.

use serde_json::{json, Value};

use super::state::{Known, State};

/// Rates are averaged over this window.
const RATE_WINDOW_MS: u64 = 5_000;

fn known<T: serde::Serialize>(value: &Known<T>) -> Value {
    match value {
        Known::Value(v) => json!({ "value": v }),
        Known::Unavailable(why) => json!({ "unavailable": why }),
    }
}

fn rate(rate: Option<f64>, why: &str) -> Value {
    match rate {
        Some(r) => json!({ "value": (r * 10.0).round() / 10.0 }),
        None => json!({ "unavailable": why }),
    }
}

/// `/api/channels`: every channel with its newest id, produce rate, last tick, and its
/// subscriptions with lag and consume rate.
pub fn channels(state: &State, backend: &str) -> Value {
    let map = match &state.channels {
        Known::Value(map) => map,
        Known::Unavailable(why) => return json!({ "unavailable": why, "channels": [] }),
    };
    let no_rate = |what: &str| {
        if state.history.len() < 2 {
            "measuring…".to_string()
        } else {
            format!("{what} not available from {backend}")
        }
    };
    let channels: Vec<Value> = map
        .iter()
        .map(|(name, channel)| {
            let subs = match &channel.subscriptions {
                Known::Value(subs) => Value::Array(
                    subs.iter()
                        .map(|s| {
                            json!({
                                "name": s.name,
                                "lag": known(&s.lag),
                                "consume_rate": rate(
                                    state.consume_rate(name, &s.name, RATE_WINDOW_MS),
                                    &no_rate("lag"),
                                ),
                            })
                        })
                        .collect(),
                ),
                Known::Unavailable(why) => json!({ "unavailable": why }),
            };
            json!({
                "name": name,
                "newest_id": known(&channel.newest_id),
                "size": known(&channel.size_bytes),
                "produce_rate": rate(state.produce_rate(name, RATE_WINDOW_MS), &no_rate("reading")),
                "last_tick": channel.last_tick,
                "subscriptions": subs,
            })
        })
        .collect();
    json!({ "channels": channels })
}

/// `/api/timetick`: for the `chosen` channels (default: every channel that has ticked), each
/// one's last tick, the watermark (the lowest), the channel holding it, how far it lags the
/// highest, and that lag over the kept history.
pub fn timetick(state: &State, chosen: &[String], readers: bool, backend: &str) -> Value {
    if !readers {
        return json!({ "unavailable": format!("timeticks not available from {backend} (no readers)") });
    }
    let Known::Value(map) = &state.channels else {
        return json!({ "unavailable": "no channels listed" });
    };
    let names: Vec<String> = if chosen.is_empty() {
        map.iter()
            .filter(|(_, c)| c.last_tick.is_some())
            .map(|(n, _)| n.clone())
            .collect()
    } else {
        chosen.to_vec()
    };
    let ticks: Vec<Option<u64>> = names
        .iter()
        .map(|n| map.get(n).and_then(|c| c.last_tick))
        .collect();
    let level = |ticks: &[Option<u64>]| -> Option<(usize, u64, u64)> {
        let all: Option<Vec<u64>> = ticks.iter().copied().collect();
        let all = all.filter(|a| !a.is_empty())?;
        let high = *all.iter().max()?;
        let (holder, low) = all.iter().copied().enumerate().min_by_key(|&(_, t)| t)?;
        Some((holder, low, high - low))
    };
    let history: Vec<Value> = state
        .history
        .iter()
        .filter_map(|sample| {
            let ticks: Vec<Option<u64>> = names
                .iter()
                .map(|n| sample.channels.get(n).and_then(|c| c.last_tick))
                .collect();
            level(&ticks).map(|(_, _, lag)| json!({ "at_ms": sample.at_ms, "lag": lag }))
        })
        .collect();
    let channels: Vec<Value> = names
        .iter()
        .zip(&ticks)
        .map(|(name, tick)| json!({ "name": name, "last_tick": tick }))
        .collect();
    match level(&ticks) {
        Some((holder, watermark, lag)) => json!({
            "channels": channels,
            "watermark": watermark,
            "holder": names[holder],
            "lag": lag,
            "history": history,
        }),
        None => json!({
            "channels": channels,
            "unavailable": "no watermark yet: a chosen channel has no timetick",
            "history": history,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::super::state::{Channel, Subscription};
    use super::*;
    use std::collections::BTreeMap;

    fn channel(tick: Option<u64>, lag: Option<u64>) -> Channel {
        Channel {
            newest_id: Known::Value("7".into()),
            size_bytes: Known::Value(4096),
            messages_read: Some(7),
            last_tick: tick,
            subscriptions: Known::Value(vec![Subscription {
                name: "g".into(),
                lag: lag.map_or(
                    Known::Unavailable("not available from nsq".into()),
                    Known::Value,
                ),
            }]),
        }
    }

    fn state(a: Option<u64>, b: Option<u64>) -> State {
        let mut state = State::default();
        let map: BTreeMap<String, Channel> = [
            ("a".to_string(), channel(a, Some(3))),
            ("b".to_string(), channel(b, None)),
        ]
        .into();
        state.record(1_000, Known::Value(map));
        state
    }

    #[test]
    fn the_holder_is_the_channel_with_the_lowest_tick() {
        let view = timetick(&state(Some(45), Some(30)), &[], true, "rocksmq");
        assert_eq!(
            (view["watermark"].as_u64(), view["lag"].as_u64()),
            (Some(30), Some(15))
        );
        assert_eq!(view["holder"], "b");
        assert_eq!(view["history"][0]["lag"], 15);
        let view = timetick(
            &state(Some(45), None),
            &["a".into(), "b".into()],
            true,
            "rocksmq",
        );
        assert!(
            view["unavailable"]
                .as_str()
                .is_some_and(|s| s.contains("no timetick")),
            "{view}"
        );
        let view = timetick(&state(Some(45), None), &[], false, "nsq");
        assert_eq!(
            view["unavailable"],
            "timeticks not available from nsq (no readers)"
        );
    }

    #[test]
    fn the_size_column_shows_the_backends_estimate() {
        let view = channels(&state(None, None), "rocksmq");
        assert_eq!(view["channels"][0]["size"]["value"], 4096);
    }

    #[test]
    fn unknown_lag_is_said_not_zeroed() {
        let view = channels(&state(None, None), "nsq");
        assert_eq!(view["channels"][0]["subscriptions"][0]["lag"]["value"], 3);
        assert_eq!(
            view["channels"][1]["subscriptions"][0]["lag"]["unavailable"],
            "not available from nsq"
        );
        assert_eq!(
            view["channels"][0]["produce_rate"]["unavailable"],
            "measuring…"
        );
    }
}
