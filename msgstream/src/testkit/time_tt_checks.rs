//! Checks of seeking by time on the timetick-aligned stream: exactly the packs after the last
//! tick before a time, against a consumer positioned at that tick and an uninterrupted run.

use std::sync::Arc;

use super::time_checks::{inserts, is_unsupported, tick, write, Clock};
use super::{row_id, unique, within};
use crate::mq::{Client, InitialPosition};
use crate::msg::MsgPack;
use crate::stream::StreamOptions;
use crate::tt::TtMsgStream;

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
