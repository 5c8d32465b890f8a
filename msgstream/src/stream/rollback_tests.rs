//! A seek whose backend call fails midway (after every target passed the checks) changes
//! nothing: the channels moved before the failure are put back, and both streams go on
//! delivering exactly what they would have delivered without the seek.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::mem::MemoryClient;
use crate::mq::{Client, InitialPosition};
use crate::msg::{MsgBody, MsgPack, MsgPosition, TsMsg};
use crate::stream::{MsgStream, StreamOptions};
use crate::testkit::faults::{Call, FaultyClient};
use crate::testkit::insert;
use crate::tt::TtMsgStream;
use crate::Error;

fn row(msg: &TsMsg) -> i64 {
    match msg.body() {
        MsgBody::Insert(m) => m.row_ids.first().copied().unwrap_or(-1),
        _ => -1,
    }
}

/// Channels `a` and `b` (seeks of `b` fail once armed); each holds `packs` packs of three
/// inserts (rows `100 c + 10 i + r` for channel c, pack i) at `10 i - 5 ..`, ticked at `10 i`.
async fn setup(packs: u64) -> (Arc<dyn Client>, Arc<AtomicBool>, [String; 2]) {
    let names = ["a".to_string(), "b".to_string()];
    let armed = Arc::new(AtomicBool::new(false));
    // Seeking `b` fails once armed: a broker lost between the checks and the move.
    let (failing, fault_armed) = (names[1].clone(), armed.clone());
    let client: Arc<dyn Client> = Arc::new(FaultyClient::new(
        Arc::new(MemoryClient::new()),
        move |call| {
            (call == Call::Seek(&failing) && fault_armed.load(Ordering::SeqCst))
                .then(|| Error::transient("test", "the broker went away mid-seek"))
        },
    ));
    for (c, name) in names.iter().enumerate() {
        let mut out = TtMsgStream::new(client.clone(), StreamOptions::default());
        out.as_producer(&[name.as_str()]).await.expect("producer");
        let mut msgs = Vec::new();
        for i in 1..=packs {
            for r in 0..3 {
                msgs.push(insert(
                    (100 * c as u64 + 10 * i + r) as i64,
                    10 * i - 5 + r,
                    0,
                ));
            }
            msgs.push(TsMsg::time_tick(10 * i).with_hash_keys(vec![0]));
        }
        out.produce(&MsgPack {
            msgs,
            ..MsgPack::default()
        })
        .await
        .expect("produce");
        out.close().await;
    }
    (client, armed, names)
}

#[tokio::test]
async fn plain_seek_failing_midway_puts_moved_channels_back() {
    let (client, armed, names) = setup(4).await;
    let channels = [names[0].as_str(), names[1].as_str()];
    // One message at a time per channel, so both channels are mid-way at the seek.
    let mut stream = MsgStream::new(client, StreamOptions::default().with_buffer(1));
    stream
        .as_consumer(&channels, "s", InitialPosition::Earliest)
        .await
        .expect("consumer");
    // Per channel: the rows handed over, and the first position (a seek target).
    let mut rows: [Vec<i64>; 2] = [Vec::new(), Vec::new()];
    let mut first: [Option<MsgPosition>; 2] = [None, None];
    while rows[0].len() < 2 || rows[1].len() < 2 {
        let pack = stream.next_pack().await.expect("open").expect("pack");
        let position = pack.end_positions[0].clone();
        let c = usize::from(position.channel_name == names[1]);
        if let Some(msg) = pack.msgs.iter().find(|m| !m.is_time_tick()) {
            rows[c].push(row(msg));
        }
        first[c].get_or_insert(position);
    }
    armed.store(true, Ordering::SeqCst);
    let targets: Vec<MsgPosition> = first.iter().flatten().cloned().collect();
    let refused = stream.seek_inclusive(&targets).await;
    assert!(
        matches!(
            refused,
            Err(Error::Backend {
                transient: true,
                ..
            })
        ),
        "the backend's failure is reported: {refused:?}"
    );
    assert!(
        rows[0].len() < 12 && rows[1].len() < 12,
        "both channels were mid-way: {rows:?}"
    );
    // Both channels go on after what was handed over: nothing again, nothing skipped.
    while rows[0].len() < 12 || rows[1].len() < 12 {
        let pack = stream.next_pack().await.expect("open").expect("pack");
        let c = usize::from(pack.end_positions[0].channel_name == names[1]);
        if let Some(msg) = pack.msgs.iter().find(|m| !m.is_time_tick()) {
            rows[c].push(row(msg));
        }
    }
    for (c, got) in rows.iter().enumerate() {
        let want: Vec<i64> = (1..=4)
            .flat_map(|i| (0..3).map(move |r| 100 * c as i64 + 10 * i + r))
            .collect();
        assert_eq!(got, &want, "channel {c}");
    }
    stream.close().await;
}

#[tokio::test]
async fn tt_seek_failing_midway_puts_moved_channels_back() {
    let (client, armed, names) = setup(6).await;
    let channels = [names[0].as_str(), names[1].as_str()];
    let mut stream = TtMsgStream::new(client, StreamOptions::default());
    stream
        .as_consumer(&channels, "t", InitialPosition::Earliest)
        .await
        .expect("consumer");
    let mut seen = Vec::new();
    let mut packs = Vec::new();
    for _ in 0..2 {
        let pack = stream.next_pack().await.expect("open").expect("pack");
        seen.push((pack.end_ts, pack.msgs.iter().map(row).collect::<Vec<_>>()));
        packs.push(pack);
    }
    armed.store(true, Ordering::SeqCst);
    let refused = stream.seek(&packs[0].end_positions).await;
    assert!(
        matches!(
            refused,
            Err(Error::Backend {
                transient: true,
                ..
            })
        ),
        "the backend's failure is reported: {refused:?}"
    );
    while seen.last().is_some_and(|(end, _)| *end < 60) {
        let pack = stream.next_pack().await.expect("open").expect("pack");
        seen.push((pack.end_ts, pack.msgs.iter().map(row).collect()));
    }
    let want: Vec<(u64, Vec<i64>)> = (1..=6)
        .map(|i| {
            let rows = (0..2)
                .flat_map(|c| (0..3).map(move |r| (100 * c + 10 * i + r) as i64))
                .collect();
            (10 * i, rows)
        })
        .collect();
    assert_eq!(seen, want, "the packs of a stream that never sought");
    stream.close().await;
}
