//! Checks of the timetick-aligned stream.

use std::sync::Arc;

use super::{insert, row_id, unique, within};
use crate::mq::{Client, InitialPosition, ProducerMessage};
use crate::msg::{MsgPack, MsgPosition, TsMsg};
use crate::stream::StreamOptions;
use crate::tt::TtMsgStream;
use crate::Error;

fn pack(msgs: Vec<TsMsg>) -> MsgPack {
    MsgPack {
        msgs,
        ..MsgPack::default()
    }
}

/// Writes `items` to `channel`: `Ok(ts)` an insert with row id ts, `Err(ts)` a tick.
async fn write(client: &Arc<dyn Client>, channel: &str, items: &[Result<u64, u64>]) {
    let mut out = TtMsgStream::new(client.clone(), StreamOptions::default());
    out.as_producer(&[channel]).await.expect("as_producer");
    let msgs = items
        .iter()
        .map(|item| match *item {
            Ok(ts) => insert(ts as i64, ts, 0),
            Err(ts) => TsMsg::time_tick(ts).with_hash_keys(vec![0]),
        })
        .collect();
    out.produce(&pack(msgs)).await.expect("produce");
}

async fn tt_consumer(client: &Arc<dyn Client>, channels: &[&str]) -> TtMsgStream {
    let mut stream = TtMsgStream::new(client.clone(), StreamOptions::default());
    stream
        .as_consumer(channels, "tt", InitialPosition::Earliest)
        .await
        .expect("as_consumer");
    stream
}

/// Reads packs until one ends at `last_end`.
async fn packs_until(stream: &mut TtMsgStream, last_end: u64) -> Vec<MsgPack> {
    let mut packs = Vec::new();
    loop {
        let pack = within("a tt pack", stream.next_pack())
            .await
            .expect("stream open")
            .expect("pack");
        let end = pack.end_ts;
        packs.push(pack);
        if end >= last_end {
            return packs;
        }
    }
}

fn summary(packs: &[MsgPack]) -> Vec<(u64, u64, Vec<i64>)> {
    packs
        .iter()
        .map(|p| (p.begin_ts, p.end_ts, p.msgs.iter().map(row_id).collect()))
        .collect()
}

async fn replay(
    client: &Arc<dyn Client>,
    channels: &[&str],
    from: &[MsgPosition],
    last_end: u64,
) -> Vec<MsgPack> {
    let mut stream = tt_consumer(client, channels).await;
    stream.seek(from).await.expect("seek");
    let packs = packs_until(&mut stream, last_end).await;
    stream.close().await;
    packs
}

/// On a backend without seek, a tt stream's seek is `Unsupported`, never a silent no-op (the
/// replay half of a check then has nothing else to assert).
async fn seek_is_unsupported(client: &Arc<dyn Client>, channels: &[&str], from: &[MsgPosition]) {
    let mut stream = tt_consumer(client, channels).await;
    let result = stream.seek(from).await;
    assert!(
        matches!(result, Err(Error::Unsupported { .. })),
        "seek without the capability: {result:?}"
    );
    stream.close().await;
}

/// The sequence of issue 2, and replays from the third pack's start and end positions.
pub async fn tt_issue_sequence_and_replays(client: Arc<dyn Client>) {
    let a = unique("tt-seq");
    let items = [
        Err(0),
        Ok(1),
        Ok(3),
        Ok(19),
        Err(5),
        Ok(14),
        Ok(9),
        Err(11),
        Ok(12),
        Ok(13),
        Err(15),
        Err(20),
    ];
    write(&client, &a, &items).await;
    let mut stream = tt_consumer(&client, &[a.as_str()]).await;
    let packs = packs_until(&mut stream, 20).await;
    stream.close().await;
    assert_eq!(
        summary(&packs),
        vec![
            (0, 5, vec![1, 3]),
            (5, 11, vec![9]),
            (11, 15, vec![14, 12, 13]),
            (15, 20, vec![19])
        ]
    );
    if !client.capabilities().seek {
        return seek_is_unsupported(&client, &[a.as_str()], &packs[2].start_positions).await;
    }
    let from_start = replay(&client, &[a.as_str()], &packs[2].start_positions, 20).await;
    assert_eq!(
        summary(&from_start),
        vec![(11, 15, vec![14, 12, 13]), (15, 20, vec![19])]
    );
    let from_end = replay(&client, &[a.as_str()], &packs[2].end_positions, 20).await;
    assert_eq!(summary(&from_end), vec![(15, 20, vec![19])]);
}

/// Channels ticking at different timestamps (5, 12 vs 10, 12) still progress.
pub async fn tt_different_tick_timestamps(client: Arc<dyn Client>) {
    let (a, b) = (unique("tt-a"), unique("tt-b"));
    write(&client, &a, &[Ok(1), Err(5), Ok(7), Err(12)]).await;
    write(&client, &b, &[Ok(2), Err(10), Ok(11), Err(12)]).await;
    let mut stream = tt_consumer(&client, &[a.as_str(), b.as_str()]).await;
    let packs = packs_until(&mut stream, 12).await;
    assert_eq!(
        summary(&packs),
        vec![(0, 5, vec![1, 2]), (5, 10, vec![7]), (10, 12, vec![11])]
    );
    let holder = stream.watermark_holder().expect("holder");
    assert_eq!(holder.lag, 0, "level after the common tick 12");
}

/// Three channels fed through one producer stream with broadcast ticks.
pub async fn tt_three_channels_aligned(client: Arc<dyn Client>) {
    let names: Vec<String> = (0..3).map(|i| unique(&format!("tt3-{i}"))).collect();
    let channels: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut out = TtMsgStream::new(client.clone(), StreamOptions::default());
    out.as_producer(&channels).await.expect("as_producer");
    for round in 1..=4u64 {
        let msgs = (0..6)
            .map(|k| insert((round * 10 + k) as i64, round * 10 + k, k as u32))
            .collect();
        out.produce(&pack(msgs)).await.expect("produce");
        out.broadcast(&pack(vec![TsMsg::time_tick(round * 10 + 9)]))
            .await
            .expect("tick");
    }
    let mut stream = tt_consumer(&client, &channels).await;
    let packs = packs_until(&mut stream, 49).await;
    assert_eq!(packs.len(), 4);
    for (round, pack) in (1..=4u64).zip(&packs) {
        assert_eq!(pack.end_ts, round * 10 + 9);
        // Channel order first (keys 0,3 | 1,4 | 2,5), arrival order inside a channel.
        let r = (round * 10) as i64;
        assert_eq!(
            pack.msgs.iter().map(row_id).collect::<Vec<_>>(),
            vec![r, r + 3, r + 1, r + 4, r + 2, r + 5]
        );
        assert_eq!(pack.end_positions.len(), 3);
        assert!(pack
            .end_positions
            .iter()
            .all(|p| p.timestamp == pack.end_ts));
    }
}

/// For a pseudo-random workload over 4 channels, reopening from the end positions of every
/// pack in turn reproduces the remaining packs exactly.
pub async fn tt_replay_determinism(client: Arc<dyn Client>) {
    replay_workload(client, "ttr", 0..5, Some(40)).await;
}

/// [`tt_replay_determinism`] with long runs between ticks (33 to 48 messages, more than a
/// consumer task's batch holds before a tick closes it), each in its own pack (out of order
/// within it): the stream moves such runs into its aligner as blocks, and they must cut the
/// same packs, and replay the same, as short runs taken one message at a time. (Runs stay
/// within the in-flight budget of the conformance harness's NSQ consumers, 64 unacked
/// messages, which a tt stream needs its ticks within.)
pub async fn tt_replay_determinism_long_runs(client: Arc<dyn Client>) {
    replay_workload(client, "ttl", 33..49, None).await;
}

/// Writes 12 runs per channel on 4 channels (each run `run_len` inserts, then a tick), reads
/// every pack, and replays from the end positions of each pack. An insert's timestamp is up
/// to `spread` above the tick before it (so it may fall in a later pack), or with `None`
/// at most the tick after it.
async fn replay_workload(
    client: Arc<dyn Client>,
    prefix: &str,
    run_len: std::ops::Range<u64>,
    spread: Option<u64>,
) {
    let names: Vec<String> = (0..4).map(|i| unique(&format!("{prefix}-{i}"))).collect();
    let channels: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let last_end = 1_000;
    let mut written = Vec::new();
    for channel in &channels {
        let mut items = Vec::new();
        let mut tick = 0;
        for _ in 0..12 {
            let next_tick = tick + 1 + next(12);
            let spread = spread.unwrap_or(next_tick - tick);
            for _ in 0..run_len.start + next(run_len.end - run_len.start) {
                items.push(Ok(tick + 1 + next(spread)));
            }
            tick = next_tick;
            items.push(Err(tick));
        }
        items.push(Err(last_end));
        write(&client, channel, &items).await;
        written.push(items);
    }
    let mut stream = tt_consumer(&client, &channels).await;
    let packs = packs_until(&mut stream, last_end).await;
    stream.close().await;
    let total: usize = packs.iter().map(|p| p.msgs.len()).sum();
    assert!(
        packs.len() > 5 && total > 20,
        "a real workload: {} packs, {total} msgs",
        packs.len()
    );
    if spread.is_none() {
        // Each run in its own pack: every insert arrives once, but for the repeats of a
        // timestamp within a run (one channel's duplicates inside a pack are dropped).
        for (channel, items) in channels.iter().zip(&written) {
            let expected: std::collections::BTreeSet<i64> = items
                .iter()
                .filter_map(|item| item.ok())
                .map(|ts| ts as i64)
                .collect();
            let mut delivered: Vec<i64> = packs
                .iter()
                .flat_map(|p| &p.msgs)
                .filter(|m| {
                    m.position
                        .as_ref()
                        .is_some_and(|p| p.channel_name == **channel)
                })
                .map(row_id)
                .collect();
            delivered.sort_unstable();
            assert_eq!(
                delivered,
                expected.into_iter().collect::<Vec<_>>(),
                "every insert of {channel} once"
            );
        }
    }
    if !client.capabilities().seek {
        return seek_is_unsupported(&client, &channels, &packs[0].end_positions).await;
    }
    for (k, pack) in packs.iter().enumerate().take(packs.len() - 1) {
        let again = replay(&client, &channels, &pack.end_positions, last_end).await;
        assert_eq!(
            summary(&again),
            summary(&packs[k + 1..]),
            "replay from the end of pack {k}"
        );
        assert_eq!(again, packs[k + 1..], "same positions too");
    }
}

/// Each undecodable payload is an error item; the stream continues with the same packs.
pub async fn tt_reports_garbage(client: Arc<dyn Client>) {
    let a = unique("tt-garbage");
    write(&client, &a, &[Ok(1)]).await;
    let raw = client.create_producer(&a).await.expect("producer");
    raw.send(ProducerMessage::new(&b"\x0a\x03\x08"[..]))
        .await
        .expect("garbage");
    raw.send(ProducerMessage::new(&b"not protobuf at all \xff"[..]))
        .await
        .expect("garbage");
    write(&client, &a, &[Ok(2), Err(3)]).await;
    let mut stream = tt_consumer(&client, &[a.as_str()]).await;
    let mut errors = 0;
    let pack = loop {
        match within("a tt pack or error", stream.next_pack())
            .await
            .expect("stream open")
        {
            Ok(pack) => break pack,
            Err(Error::Decode(_)) => errors += 1,
            Err(other) => panic!("unexpected error {other}"),
        }
    };
    assert_eq!(errors, 2, "one error per undecodable message");
    assert_eq!(summary(&[pack]), vec![(0, 3, vec![1, 2])]);
}
