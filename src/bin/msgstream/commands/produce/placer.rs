//! Turning input records into messages: which channel each goes to, which timestamp it gets,
//! and when a timetick may be written.
//!
//! A timetick at T promises that no later message on the channel has a timestamp at or below
//! T, so a record that would break the promise of a tick already written is refused (naming
//! its line) rather than written where a tt consumer would count it as late.

use msgstream_facade::msgstream::msg::TsMsg;

use super::input::{Record, Route};
use crate::commands::kinds;

/// Routing and timestamps of one `produce --input` run.
pub struct Placer {
    channels: Vec<String>,
    /// The timestamp a record without one gets.
    next_ts: u64,
    /// The newest timetick written, which every later timestamp must pass.
    last_tick: Option<u64>,
    /// Records placed, also the producer-assigned message id.
    placed: u64,
}

impl Placer {
    /// A placer over `channels` (as given to `--channels`) whose first generated timestamp is
    /// `start_ts`.
    pub fn new(channels: Vec<String>, start_ts: u64) -> Self {
        Placer {
            channels,
            next_ts: start_ts,
            last_tick: None,
            placed: 0,
        }
    }

    /// The message for `record`, or what is wrong with it.
    pub fn place(&mut self, record: Record) -> Result<TsMsg, String> {
        let key = match record.route {
            Route::Channel(name) => {
                let index = self
                    .channels
                    .iter()
                    .position(|c| *c == name)
                    .ok_or_else(|| {
                        format!(
                            "channel {name:?} is not one of --channels {}",
                            self.channels.join(",")
                        )
                    })?;
                u32::try_from(index).map_err(|_| "too many channels".to_string())?
            }
            Route::Key(key) => key,
            // Modulo the channel count first, so a long run does not wrap the u32 key.
            Route::Spread => (self.placed % self.channels.len().max(1) as u64) as u32,
        };
        let ts = record.timestamp.unwrap_or(self.next_ts);
        check_timestamp(ts)?;
        if let Some(tick) = self.last_tick.filter(|&tick| ts <= tick) {
            return Err(format!(
                "timestamp {ts} is not after the timetick {tick} already written; timestamps \
                 must pass each tick (--tick-every)"
            ));
        }
        let mut msg = kinds::build(record.kind, self.placed as i64, ts, key, record.payload)?;
        msg.properties = record.properties;
        self.next_ts = self.next_ts.max(ts.saturating_add(1));
        self.placed += 1;
        Ok(msg)
    }

    /// The timestamp of a timetick written now (one past every timestamp so far). A tick at
    /// `u64::MAX` closes the channels for good, so asking again after it gives it again: no
    /// message can follow it (every record's timestamp is below it).
    pub fn tick(&mut self) -> u64 {
        let tick = self.next_ts;
        self.last_tick = Some(tick);
        self.next_ts = tick.saturating_add(1);
        tick
    }

    /// Records placed so far.
    pub fn placed(&self) -> u64 {
        self.placed
    }
}

/// Refuses a timestamp no timetick-aligned pack can hold: 0 is at or below the `end_ts` (0)
/// a tt consumer starts from, so it would be late in every run, and `u64::MAX` leaves no
/// timestamp for the timetick that must follow it.
fn check_timestamp(ts: u64) -> Result<(), String> {
    if ts == 0 || ts == u64::MAX {
        return Err(format!(
            "timestamp {ts} cannot be delivered to a tt consumer: a message's timestamp must be \
             from 1 to {} (a pack starts after 0, and a timetick must follow it)",
            u64::MAX - 1
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::kinds::Kind;

    fn record(route: Route, timestamp: Option<u64>) -> Record {
        Record {
            line: 1,
            route,
            timestamp,
            kind: Kind::Insert,
            payload: b"p".to_vec(),
            properties: [("k".to_string(), "v".to_string())].into(),
        }
    }

    #[test]
    fn routes_by_channel_key_or_in_turn() {
        let mut placer = Placer::new(vec!["a".into(), "b".into(), "c".into()], 1);
        let keys: Vec<u32> = [
            Route::Channel("c".into()),
            Route::Key(7),
            Route::Spread,
            Route::Spread,
        ]
        .into_iter()
        .map(|route| placer.place(record(route, None)).expect("placed").hash_keys[0])
        .collect();
        assert_eq!(keys, vec![2, 7, 2, 0]);
        let error = placer
            .place(record(Route::Channel("x".into()), None))
            .expect_err("not a channel");
        assert!(
            error.contains("\"x\" is not one of --channels a,b,c"),
            "{error}"
        );
    }

    #[test]
    fn timestamps_count_up_and_must_pass_every_tick() {
        let mut placer = Placer::new(vec!["a".into()], 10);
        let ts = |p: &mut Placer, t| p.place(record(Route::Spread, t)).map(|m| m.end_ts());
        assert_eq!(ts(&mut placer, None), Ok(10));
        assert_eq!(ts(&mut placer, Some(20)), Ok(20));
        assert_eq!(
            ts(&mut placer, Some(15)),
            Ok(15),
            "may go back before a tick"
        );
        assert_eq!(ts(&mut placer, None), Ok(21));
        assert_eq!(placer.tick(), 22);
        let error = ts(&mut placer, Some(22)).expect_err("at the tick");
        assert!(error.contains("not after the timetick 22"), "{error}");
        assert_eq!(ts(&mut placer, None), Ok(23));
        assert_eq!(placer.placed(), 5);
    }

    #[test]
    fn timestamps_no_pack_can_hold_are_refused() {
        let mut placer = Placer::new(vec!["a".into()], 1);
        for refused in [0, u64::MAX] {
            let error = placer
                .place(record(Route::Spread, Some(refused)))
                .expect_err("no pack holds it");
            assert!(
                error.contains(&format!("timestamp {refused} cannot")),
                "{error}"
            );
        }
        assert_eq!(placer.placed(), 0);
        let mut zero = Placer::new(vec!["a".into()], 0);
        assert!(
            zero.place(record(Route::Spread, None)).is_err(),
            "--start-ts 0"
        );
        let last = u64::MAX - 1;
        let ts = placer
            .place(record(Route::Spread, Some(last)))
            .map(|m| m.end_ts());
        assert_eq!(ts, Ok(last));
        assert_eq!(placer.tick(), u64::MAX);
        assert_eq!(
            placer.tick(),
            u64::MAX,
            "nothing can follow a tick at the top"
        );
        assert!(placer.place(record(Route::Spread, None)).is_err());
    }

    #[test]
    fn properties_travel_with_the_message() {
        let mut placer = Placer::new(vec!["a".into()], 1);
        let msg = placer.place(record(Route::Spread, None)).expect("placed");
        assert_eq!(msg.properties.get("k").map(String::as_str), Some("v"));
    }
}
