//! Checks of seeking by time: the plain rule (first message at or after a time) through every
//! entry point, and the tt rule (exactly the packs after the last tick before a time).
//!
//! Timestamps are hybrid timestamps taken from the clock when each round is written, as a
//! Milvus TSO hands them out, so a backend that searches its own store time
//! ([`crate::mq::Timestamps::Hybrid`]) sees timestamps its clock can relate to. Within a round
//! the inserts are written out of timestamp order, which timeticks allow.

use std::sync::Arc;

use super::{insert, row_id, unique, within};
use crate::mq::time::hybrid_from_unix_ms;
use crate::mq::{Client, ConsumerOptions, InitialPosition, MessageId, TimePosition};
use crate::msg::{MsgPack, TsMsg};
use crate::stream::{MsgStream, StreamOptions};
use crate::tt::TtMsgStream;
use crate::Error;

/// Hybrid timestamps from the clock, strictly increasing.
struct Clock(u64);

impl Clock {
    fn new() -> Self {
        Clock(0)
    }

    fn next(&mut self) -> u64 {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        self.0 = hybrid_from_unix_ms(now).max(self.0 + 1);
        self.0
    }
}

/// One written message: its row id (an insert) or `None` (a tick), and its timestamp.
#[derive(Debug, Clone, Copy)]
struct Written {
    row: Option<i64>,
    ts: u64,
}

/// Round `r` of channel `channel`: three inserts with timestamps `a < b < c` written as
/// `c, a, b` (row ids `(r * 10 + k) * 10 + channel`); the caller adds the round's tick.
fn inserts(clock: &mut Clock, r: u64, channel: u64) -> Vec<Written> {
    let (a, b, c) = (clock.next(), clock.next(), clock.next());
    let row = |k: u64| Some(((r * 10 + k) * 10 + channel) as i64);
    vec![
        Written { row: row(3), ts: c },
        Written { row: row(1), ts: a },
        Written { row: row(2), ts: b },
    ]
}

fn tick(ts: u64) -> Written {
    Written { row: None, ts }
}

fn to_msgs(items: &[Written]) -> Vec<TsMsg> {
    items
        .iter()
        .map(|w| match w.row {
            Some(row) => insert(row, w.ts, 0),
            None => TsMsg::time_tick(w.ts).with_hash_keys(vec![0]),
        })
        .collect()
}

/// Writes `items` to `channel` through a stream (which hands each timestamp to the backend);
/// returns their ids.
async fn write(client: &Arc<dyn Client>, channel: &str, items: &[Written]) -> Vec<MessageId> {
    let mut out = MsgStream::new(client.clone(), StreamOptions::default());
    out.as_producer(&[channel]).await.expect("as_producer");
    let pack = MsgPack {
        msgs: to_msgs(items),
        ..MsgPack::default()
    };
    let mut ids = out.produce_mark(&pack).await.expect("produce");
    out.close().await;
    ids.remove(channel).unwrap_or_default()
}

/// Writes `rounds` rounds of [`round`] to one channel.
async fn write_rounds(
    client: &Arc<dyn Client>,
    channel: &str,
    rounds: u64,
) -> Vec<(Written, MessageId)> {
    let mut clock = Clock::new();
    let mut all = Vec::new();
    for r in 0..rounds {
        let mut items = inserts(&mut clock, r, 0);
        items.push(tick(clock.next()));
        let ids = write(client, channel, &items).await;
        all.extend(items.into_iter().zip(ids));
    }
    all
}

fn is_unsupported<T: std::fmt::Debug>(result: &crate::Result<T>) -> bool {
    matches!(result, Err(Error::Unsupported { .. }))
}

/// The first message with timestamp ≥ `ts` through `message_id_at_time`, a reader at the
/// time, a new subscription at the time, and a plain stream's `seek_to_time`: before the first
/// message, exactly on a tick, just after it, between two inserts written out of order (the
/// first in channel order wins, not the smallest timestamp), and after the last message (then
/// the next message produced is the one read). The backend's lower bound is never past the
/// answer. Without the capability, each entry point is `Unsupported`.
pub async fn seek_time_plain(client: Arc<dyn Client>) {
    let topic = unique("time");
    let written = write_rounds(&client, &topic, 6).await;
    if !client.capabilities().seek_time {
        return plain_time_is_unsupported(&client, &topic, written[5].0.ts).await;
    }
    let ts = |i: usize| written[i].0.ts;
    let tick2 = ts(11);
    let cases = [
        ("before the first message", ts(1).saturating_sub(1), Some(0)),
        ("exactly on a tick", tick2, Some(11)),
        ("just after a tick", tick2 + 1, Some(12)),
        ("between out-of-order inserts", ts(14), Some(12)),
        ("on the last message", ts(23), Some(23)),
        ("after the last message", ts(23) + 1, None),
    ];
    for (what, time, expected) in cases {
        let expected_first = expected.map(|i| written[i].1.clone());
        let at = client.message_id_at_time(&topic, time).await.expect(what);
        let bound = client.time_lower_bound(&topic, time).await.expect(what);
        match &expected_first {
            Some(id) => {
                assert_eq!(
                    at,
                    TimePosition {
                        id: id.clone(),
                        inclusive: true
                    },
                    "{what}"
                );
                assert!(
                    bound <= *id,
                    "{what}: lower bound {bound:?} past the answer {id:?}"
                );
            }
            None => {
                let last = &written[23].1;
                assert!(
                    (at.inclusive && at.id > *last) || (!at.inclusive && at.id == *last),
                    "{what}: {at:?} must read from just after the newest message {last:?}"
                );
            }
        }
        let mut reader = client
            .create_reader_at_time(&topic, time)
            .await
            .expect(what);
        match &expected_first {
            Some(id) => {
                let first = within("reader at time", reader.next()).await.expect(what);
                assert_eq!(&first.id, id, "{what}: reader");
            }
            None => assert!(
                !reader.has_next().await.expect("has_next"),
                "{what}: reader"
            ),
        }
        reader.close().await;
        if let Some(id) = &expected_first {
            let sub = format!("at-{}", time);
            let options = ConsumerOptions::new(&topic, &sub)
                .with_initial_position(InitialPosition::Timestamp(time));
            let mut consumer = client.subscribe(options).await.expect(what);
            let first = super::recv(&mut consumer).await;
            assert_eq!(&first.id, id, "{what}: subscription at the time");
            consumer.close().await;
        }
    }
    let mut stream = MsgStream::new(client.clone(), StreamOptions::default());
    stream
        .as_consumer(&[topic.as_str()], "plain-time", InitialPosition::Earliest)
        .await
        .expect("as_consumer");
    let first = within("pack", stream.next_pack())
        .await
        .expect("open")
        .expect("pack");
    assert_eq!(first.msgs.iter().map(row_id).collect::<Vec<_>>(), [30]);
    stream.seek_to_time(ts(14)).await.expect("seek_to_time");
    let pack = within("pack", stream.next_pack())
        .await
        .expect("open")
        .expect("pack");
    assert_eq!(
        pack.msgs.iter().map(row_id).collect::<Vec<_>>(),
        [written[12].0.row.unwrap_or(-1)]
    );
    stream
        .seek_to_time(ts(23) + 1)
        .await
        .expect("seek_to_time past the end");
    let later = write(
        &client,
        &topic,
        &[Written {
            row: Some(999),
            ts: ts(23) + 2,
        }],
    )
    .await;
    let pack = within("pack", stream.next_pack())
        .await
        .expect("open")
        .expect("pack");
    assert_eq!(pack.msgs.iter().map(row_id).collect::<Vec<_>>(), [999]);
    assert_eq!(pack.end_positions[0].msg_id, later[0]);
    stream.close().await;
}

async fn plain_time_is_unsupported(client: &Arc<dyn Client>, topic: &str, time: u64) {
    assert!(is_unsupported(&client.time_lower_bound(topic, time).await));
    assert!(is_unsupported(
        &client.message_id_at_time(topic, time).await
    ));
    assert!(is_unsupported(
        &client.create_reader_at_time(topic, time).await.map(drop)
    ));
    let options = ConsumerOptions::new(topic, "at-time")
        .with_initial_position(InitialPosition::Timestamp(time));
    assert!(is_unsupported(&client.subscribe(options).await.map(drop)));
    let mut stream = MsgStream::new(client.clone(), StreamOptions::default());
    stream
        .as_consumer(&[topic], "plain-time", InitialPosition::Earliest)
        .await
        .expect("as_consumer");
    assert!(is_unsupported(&stream.seek_to_time(time).await));
    stream.close().await;
}

/// Summary of packs: (begin_ts, end_ts, row ids).
fn summary(packs: &[MsgPack]) -> Vec<(u64, u64, Vec<i64>)> {
    packs
        .iter()
        .map(|p| (p.begin_ts, p.end_ts, p.msgs.iter().map(row_id).collect()))
        .collect()
}

async fn tt_consumer(client: &Arc<dyn Client>, channels: &[&str], sub: &str) -> TtMsgStream {
    let mut stream = TtMsgStream::new(client.clone(), StreamOptions::default());
    stream
        .as_consumer(channels, sub, InitialPosition::Earliest)
        .await
        .expect("as_consumer");
    stream
}

/// Packs until one ends at `last_end`.
async fn packs_until(stream: &mut TtMsgStream, last_end: u64) -> Vec<MsgPack> {
    let mut packs = Vec::new();
    while packs.last().is_none_or(|p: &MsgPack| p.end_ts < last_end) {
        let pack = within("a tt pack", stream.next_pack())
            .await
            .expect("stream open")
            .expect("pack");
        packs.push(pack);
    }
    packs
}

/// Two channels ticking together, six rounds. For a time before every message, on a tick,
/// just after one, inside a round and after the last tick, a tt stream's `seek_to_time` gives
/// exactly the packs a consumer positioned (by `seek`) at the last tick before that time
/// gives, which are the packs of an uninterrupted run whose `end_ts` is at or after the time;
/// past the last tick, the next pack is the next round. Without the capability it is
/// `Unsupported`.
pub async fn seek_time_tt(client: Arc<dyn Client>) {
    let names = [unique("tt-time-a"), unique("tt-time-b")];
    let channels = [names[0].as_str(), names[1].as_str()];
    let mut clock = Clock::new();
    let mut ticks = Vec::new();
    let mut inside = 0;
    let write_round = |clock: &mut Clock, r: u64| {
        let a = inserts(clock, r, 0);
        let b = inserts(clock, r, 1);
        let t = clock.next();
        (a, b, t)
    };
    for r in 0..6 {
        let (mut a, mut b, t) = write_round(&mut clock, r);
        a.push(tick(t));
        b.push(tick(t));
        if r == 3 {
            inside = a[2].ts;
        }
        write(&client, channels[0], &a).await;
        write(&client, channels[1], &b).await;
        ticks.push(t);
    }
    let last = ticks[5];
    if !client.capabilities().seek_time {
        let mut stream = tt_consumer(&client, &channels, "tt-time").await;
        assert!(is_unsupported(&stream.seek_to_time(ticks[2]).await));
        stream.close().await;
        return;
    }
    let mut whole = tt_consumer(&client, &channels, "tt-whole").await;
    let all = packs_until(&mut whole, last).await;
    whole.close().await;
    assert_eq!(all.iter().map(|p| p.end_ts).collect::<Vec<_>>(), ticks);
    let cases = [
        ("before every message", 1, None),
        ("exactly on a tick", ticks[2], Some(1)),
        ("just after a tick", ticks[2] + 1, Some(2)),
        ("inside a round", inside, Some(2)),
        ("on the last tick", last, Some(4)),
    ];
    for (what, time, previous_tick) in cases {
        let mut by_time = tt_consumer(&client, &channels, "tt-time").await;
        let positions = by_time.seek_to_time(time).await.expect(what);
        let expected_ts = previous_tick.map_or(0, |i: usize| ticks[i]);
        assert!(
            positions.iter().all(|p| p.timestamp == expected_ts),
            "{what}: {positions:?}"
        );
        let got = packs_until(&mut by_time, last).await;
        by_time.close().await;
        let expected: Vec<MsgPack> = all.iter().filter(|p| p.end_ts >= time).cloned().collect();
        assert_eq!(
            summary(&got),
            summary(&expected),
            "{what}: against the whole run"
        );
        if let Some(i) = previous_tick {
            let mut by_tick = tt_consumer(&client, &channels, "tt-tick").await;
            by_tick.seek(&all[i].end_positions).await.expect(what);
            let from_tick = packs_until(&mut by_tick, last).await;
            by_tick.close().await;
            assert_eq!(
                summary(&got),
                summary(&from_tick),
                "{what}: against the tick"
            );
        }
    }
    let mut after = tt_consumer(&client, &channels, "tt-after").await;
    let positions = after
        .seek_to_time(last + 1)
        .await
        .expect("after the last tick");
    assert!(
        positions.iter().all(|p| p.timestamp == last),
        "{positions:?}"
    );
    let (mut a, mut b, t) = write_round(&mut clock, 6);
    a.push(tick(t));
    b.push(tick(t));
    write(&client, channels[0], &a).await;
    write(&client, channels[1], &b).await;
    let next = packs_until(&mut after, t).await;
    after.close().await;
    let rows: Vec<i64> = a.iter().chain(&b).filter_map(|w| w.row).collect();
    assert_eq!(summary(&next), vec![(last, t, rows)]);
}
