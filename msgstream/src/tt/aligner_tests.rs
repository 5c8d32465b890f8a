//! Deterministic and property tests of the pure alignment state machine: each channel is a
//! `Vec<TsMsg>` log whose message id is the index, read the way the driver reads it.

use proptest::prelude::*;

use super::aligner::TimetickAligner;
use crate::consume::LatePolicy;
use crate::mq::MessageId;
use crate::msg::{
    DeleteRequest, Ids, InsertRequest, MsgBase, MsgBody, MsgPack, MsgPosition, MsgType, TsMsg,
};

fn insert(ts: u64, id: i64) -> TsMsg {
    TsMsg::new(MsgBody::Insert(InsertRequest {
        base: Some(MsgBase::new(MsgType::Insert as i32, id, ts)),
        timestamps: [ts].into(),
        row_ids: [id].into(),
        num_rows: 1,
        ..Default::default()
    }))
}

/// A log entry: `Some(ts)` an insert at ts (id = ts), `None`-less ticks are `Tick(ts)`.
#[derive(Debug, Clone, Copy)]
enum Entry {
    Msg(u64),
    Tick(u64),
}

fn to_log(channel: &str, entries: &[Entry]) -> Vec<TsMsg> {
    entries
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let mut msg = match *e {
                Entry::Msg(ts) => insert(ts, (i as i64) << 20 | ts as i64),
                Entry::Tick(ts) => TsMsg::time_tick(ts),
            };
            msg.position = Some(MsgPosition {
                channel_name: channel.into(),
                msg_id: MessageId::from_u64(i as u64),
                msg_group: "g".into(),
                timestamp: msg.end_ts(),
                ..MsgPosition::default()
            });
            msg
        })
        .collect()
}

/// Drives an aligner over logs from the given cursors until every log is exhausted.
fn drive(aligner: TimetickAligner, logs: &[Vec<TsMsg>], cursors: Vec<usize>) -> Vec<MsgPack> {
    drive_pushing(aligner, logs, cursors, |pushed| {
        pushed.expect("no late messages on a strict log")
    })
}

/// [`drive`], handing each push's outcome to `outcome`.
fn drive_pushing(
    aligner: TimetickAligner,
    logs: &[Vec<TsMsg>],
    mut cursors: Vec<usize>,
    outcome: impl Fn(crate::Result<()>),
) -> Vec<MsgPack> {
    drive_with(aligner, |aligner, c| {
        let Some(msg) = logs[c].get(cursors[c]) else {
            return false;
        };
        cursors[c] += 1;
        outcome(aligner.push(c, msg.clone()));
        true
    })
}

/// The driver's loop: cuts every pack it can, else feeds the channel the aligner asks for
/// through `feed`, until `feed` says that channel has nothing more.
fn drive_with(
    mut aligner: TimetickAligner,
    mut feed: impl FnMut(&mut TimetickAligner, usize) -> bool,
) -> Vec<MsgPack> {
    let mut packs = Vec::new();
    loop {
        if let Some(pack) = aligner.pop_pack() {
            packs.push(pack);
            continue;
        }
        let Some(c) = aligner.next_channel() else {
            continue;
        };
        if !feed(&mut aligner, c) {
            return packs;
        }
    }
}

fn replay_from(positions: &[MsgPosition], logs: &[Vec<TsMsg>]) -> Vec<MsgPack> {
    let aligner = TimetickAligner::resume(positions, LatePolicy::Error).expect("positions");
    let cursors = positions
        .iter()
        .map(|p| p.msg_id.clone().as_u64().expect("u64 id") as usize)
        .collect();
    drive(aligner, logs, cursors)
}

fn summary(packs: &[MsgPack]) -> Vec<(u64, u64, Vec<u64>)> {
    packs
        .iter()
        .map(|p| {
            (
                p.begin_ts,
                p.end_ts,
                p.msgs.iter().map(TsMsg::end_ts).collect(),
            )
        })
        .collect()
}

#[test]
fn issue_sequence_and_its_replays() {
    use Entry::{Msg, Tick};
    let entries = [
        Tick(0),
        Msg(1),
        Msg(3),
        Msg(19),
        Tick(5),
        Msg(14),
        Msg(9),
        Tick(11),
        Msg(12),
        Msg(13),
        Tick(15),
        Tick(20),
    ];
    let logs = vec![to_log("ch0", &entries)];
    let packs = drive(
        TimetickAligner::new(vec!["ch0".into()], LatePolicy::Error),
        &logs,
        vec![0],
    );
    assert_eq!(
        summary(&packs),
        vec![
            (0, 5, vec![1, 3]),
            (5, 11, vec![9]),
            (11, 15, vec![14, 12, 13]),
            (15, 20, vec![19]),
        ]
    );
    assert_eq!(
        summary(&replay_from(&packs[2].start_positions, &logs)),
        vec![(11, 15, vec![14, 12, 13]), (15, 20, vec![19])]
    );
    assert_eq!(
        summary(&replay_from(&packs[2].end_positions, &logs)),
        vec![(15, 20, vec![19])]
    );
    assert_eq!(
        summary(&replay_from(&packs[0].start_positions, &logs)),
        summary(&packs)
    );
}

#[test]
fn channels_ticking_at_different_timestamps_progress() {
    use Entry::{Msg, Tick};
    let logs = vec![
        to_log("a", &[Msg(1), Tick(5), Msg(7), Tick(12)]),
        to_log("b", &[Msg(2), Tick(10), Msg(11), Tick(12)]),
    ];
    let packs = drive(
        TimetickAligner::new(vec!["a".into(), "b".into()], LatePolicy::Error),
        &logs,
        vec![0, 0],
    );
    assert_eq!(
        summary(&packs),
        vec![(0, 5, vec![1, 2]), (5, 10, vec![7]), (10, 12, vec![11])]
    );
}

#[test]
fn late_messages_follow_the_policy_and_are_counted() {
    let logs = to_log("a", &[Entry::Tick(10), Entry::Msg(4)]);
    for policy in [LatePolicy::Error, LatePolicy::Drop] {
        let mut aligner = TimetickAligner::new(vec!["a".into()], policy);
        aligner.push(0, logs[0].clone()).expect("tick");
        let pack = aligner.pop_pack().expect("pack 0..10");
        assert_eq!((pack.begin_ts, pack.end_ts), (0, 10));
        let result = aligner.push(0, logs[1].clone());
        assert_eq!(result.is_err(), policy == LatePolicy::Error);
        assert_eq!(aligner.late_messages(), 1);
        assert_eq!(aligner.buffered(), 0, "a late message is never kept");
    }
}

#[test]
fn duplicate_deliveries_inside_a_pack_are_dropped() {
    let log = to_log("a", &[Entry::Msg(3), Entry::Tick(5)]);
    let mut aligner = TimetickAligner::new(vec!["a".into()], LatePolicy::Error);
    aligner.push(0, log[0].clone()).expect("msg");
    aligner.push(0, log[0].clone()).expect("duplicate");
    aligner.push(0, log[1].clone()).expect("tick");
    assert_eq!(aligner.pop_pack().expect("pack").msgs.len(), 1);
}

#[test]
fn split_deletes_keyed_only_by_primary_keys_are_not_duplicates() {
    // Rows a repack split from one Milvus ≥ 2.2 delete: same id and timestamp, keys only in
    // `primary_keys`, differing in nothing else.
    for keys in [
        [
            Ids::strings(vec!["a".into()]),
            Ids::strings(vec!["b".into()]),
        ],
        [Ids::ints(vec![1]), Ids::ints(vec![2])],
    ] {
        let mut log: Vec<TsMsg> = keys
            .into_iter()
            .map(|key| {
                TsMsg::new(MsgBody::Delete(DeleteRequest {
                    base: Some(MsgBase::new(MsgType::Delete as i32, 9, 3)),
                    timestamps: vec![3],
                    primary_keys: Some(key),
                    num_rows: 1,
                    ..Default::default()
                }))
            })
            .collect();
        log.push(TsMsg::time_tick(5));
        for (i, msg) in log.iter_mut().enumerate() {
            msg.position = Some(MsgPosition {
                channel_name: "a".into(),
                msg_id: MessageId::from_u64(i as u64),
                ..MsgPosition::default()
            });
        }
        let mut aligner = TimetickAligner::new(vec!["a".into()], LatePolicy::Error);
        for msg in log {
            aligner.push(0, msg).expect("push");
        }
        assert_eq!(aligner.pop_pack().expect("pack").msgs.len(), 2);
    }
}

#[test]
fn holder_names_the_lagging_channel() {
    let a = to_log("a", &[Entry::Tick(5)]);
    let b = to_log("b", &[Entry::Tick(20)]);
    let mut aligner = TimetickAligner::new(vec!["a".into(), "b".into()], LatePolicy::Error);
    aligner.push(0, a[0].clone()).expect("tick");
    aligner.push(1, b[0].clone()).expect("tick");
    let holder = aligner.holder().expect("holder");
    assert_eq!((holder.name.as_str(), holder.lag), ("a", 15));
}

#[test]
fn bad_pushes_are_errors() {
    let mut aligner = TimetickAligner::new(vec!["a".into()], LatePolicy::Error);
    assert!(aligner.push(3, TsMsg::time_tick(1)).is_err());
    assert!(aligner.push(0, TsMsg::time_tick(1)).is_err(), "no position");
    assert!(TimetickAligner::resume(&[], LatePolicy::Error).is_err());
}

/// Random per-channel logs that keep the tick promise: after a tick T, messages are > T.
fn channel_log() -> impl Strategy<Value = Vec<Entry>> {
    prop::collection::vec((1u64..6, 0u64..8, prop::bool::ANY), 1..12).prop_map(|steps| {
        let mut entries = Vec::new();
        let mut tick = 0;
        for (advance, msgs, tick_now) in steps {
            for i in 0..msgs {
                entries.push(Entry::Msg(tick + 1 + (i * 7 + advance) % 15));
            }
            if tick_now {
                tick += advance;
                entries.push(Entry::Tick(tick));
            }
        }
        // A common last tick, so that every message ends up in some pack.
        entries.push(Entry::Tick(1_000));
        entries
    })
}

proptest! {
    #[test]
    fn every_message_once_in_the_first_pack_reaching_it_and_replays_match(
        raw in prop::collection::vec(channel_log(), 1..5)
    ) {
        let names: Vec<String> = (0..raw.len()).map(|i| format!("c{i}")).collect();
        let logs: Vec<Vec<TsMsg>> = raw.iter().zip(&names).map(|(e, n)| to_log(n, e)).collect();
        let packs = drive(TimetickAligner::new(names.clone(), LatePolicy::Error), &logs, vec![0; logs.len()]);

        // Every non-tick message exactly once, in the first pack whose end_ts reaches it.
        let total: usize = raw.iter().flatten().filter(|e| matches!(e, Entry::Msg(_))).count();
        let emitted: usize = packs.iter().map(|p| p.msgs.len()).sum();
        prop_assert_eq!(emitted, total);
        for pack in &packs {
            prop_assert!(pack.begin_ts < pack.end_ts);
            for m in &pack.msgs {
                prop_assert!(m.end_ts() > pack.begin_ts && m.end_ts() <= pack.end_ts);
            }
            // Per-channel arrival order kept, channels in subscription order.
            let keys: Vec<(usize, u64)> = pack.msgs.iter().map(|m| {
                let p = m.position.as_ref().expect("position");
                let c = names.iter().position(|n| *n == p.channel_name).expect("known channel");
                (c, p.msg_id.clone().as_u64().expect("id"))
            }).collect();
            prop_assert!(keys.windows(2).all(|w| w[0] < w[1]));
        }
        prop_assert!(packs.windows(2).all(|w| w[0].end_ts == w[1].begin_ts));

        // Replay from the end positions of every pack reproduces the rest exactly.
        for (k, pack) in packs.iter().enumerate() {
            let replay = replay_from(&pack.end_positions, &logs);
            prop_assert_eq!(&replay[..], &packs[k + 1..]);
        }
    }
}

/// One message of [`packs_drop_exactly_the_duplicates`]: kind (insert, delete by primary key,
/// delete by legacy key, timetick-less DDL), header id, timestamp, first row or key.
fn dedup_candidate((kind, id, ts, row): (u8, i64, u64, i64)) -> TsMsg {
    let base = |t: MsgType| Some(MsgBase::new(t as i32, id, ts));
    TsMsg::new(match kind {
        0 => MsgBody::Insert(InsertRequest {
            base: base(MsgType::Insert),
            timestamps: [ts].into(),
            row_ids: [row].into(),
            num_rows: 1,
            ..Default::default()
        }),
        1 => MsgBody::Delete(DeleteRequest {
            base: base(MsgType::Delete),
            timestamps: vec![ts],
            primary_keys: Some(if row % 2 == 0 {
                Ids::ints(vec![row])
            } else {
                Ids::strings(vec![format!("k{row}")])
            }),
            num_rows: 1,
            ..Default::default()
        }),
        2 => MsgBody::Delete(DeleteRequest {
            base: base(MsgType::Delete),
            timestamps: vec![ts],
            int64_primary_keys: vec![row],
            num_rows: 1,
            ..Default::default()
        }),
        _ => MsgBody::DropPartition(crate::msg::DropPartitionRequest {
            base: base(MsgType::DropPartition),
            ..Default::default()
        }),
    })
}

/// The documented de-duplication, written plainly: per pack, the messages at or below its
/// end, in arrival order, each Insert/Delete dropped when one with the same identity (kind,
/// id, timestamps, first row or key) was taken into that pack before.
fn reference_packs(msgs: &[TsMsg], ends: &[u64]) -> Vec<Vec<TsMsg>> {
    let identity = |m: &TsMsg| -> Option<String> {
        let first = match m.body() {
            MsgBody::Insert(r) => format!("{:?}", r.row_ids.first()),
            MsgBody::Delete(r) => format!(
                "{:?}/{:?}",
                r.int64_primary_keys.first(),
                r.primary_keys.as_ref().and_then(|ids| ids.row(0))
            ),
            _ => return None,
        };
        Some(format!(
            "{}/{}/{}/{}/{first}",
            m.msg_type(),
            m.id(),
            m.begin_ts(),
            m.end_ts()
        ))
    };
    let mut left: Vec<TsMsg> = msgs.to_vec();
    let mut packs = Vec::new();
    let mut begin = 0;
    for &end in ends {
        let mut seen = std::collections::HashSet::new();
        let (taken, rest): (Vec<TsMsg>, Vec<TsMsg>) =
            left.into_iter().partition(|m| m.end_ts() <= end);
        packs.push(
            taken
                .into_iter()
                .filter(|m| m.end_ts() > begin)
                .filter(|m| identity(m).is_none_or(|key| seen.insert(key)))
                .collect(),
        );
        left = rest;
        begin = end;
    }
    packs
}

proptest! {
    #[test]
    fn packs_drop_exactly_the_duplicates(
        mut raw in prop::collection::vec((0u8..4, 0i64..3, 1u64..9, 0i64..3), 0..24),
        cut in 1u64..9,
        sorted in prop::bool::ANY,
    ) {
        if sorted {
            // Mostly rising keys with repeats side by side: the shape of real channels.
            raw.sort_by_key(|&(kind, id, ts, row)| (ts, kind, id, row));
        }
        let mut msgs: Vec<TsMsg> = raw.into_iter().map(dedup_candidate).collect();
        for (i, msg) in msgs.iter_mut().enumerate() {
            msg.position = Some(MsgPosition {
                channel_name: "a".into(),
                msg_id: MessageId::from_u64(i as u64),
                ..MsgPosition::default()
            });
        }
        let tick = |ts: u64, id: u64| {
            let mut t = TsMsg::time_tick(ts);
            t.position = Some(MsgPosition {
                channel_name: "a".into(),
                msg_id: MessageId::from_u64(1_000 + id),
                ..MsgPosition::default()
            });
            t
        };
        let mut aligner = TimetickAligner::new(vec!["a".into()], LatePolicy::Error);
        for msg in &msgs {
            aligner.push(0, msg.clone()).expect("nothing is late before the first pack");
        }
        aligner.push(0, tick(cut, 0)).expect("tick");
        let first = aligner.pop_pack().expect("first pack");
        aligner.push(0, tick(10, 1)).expect("tick");
        let second = aligner.pop_pack().expect("second pack");
        let want = reference_packs(&msgs, &[cut, 10]);
        prop_assert_eq!(&first.msgs, &want[0]);
        prop_assert_eq!(&second.msgs, &want[1]);
    }
}

/// [`drive`], feeding each channel in runs the way the tt stream does: from the cursor
/// up to and including the next tick, at most `cut` messages at a time.
fn drive_runs(
    aligner: TimetickAligner,
    logs: &[Vec<TsMsg>],
    mut cursors: Vec<usize>,
    cut: usize,
) -> Vec<MsgPack> {
    drive_with(aligner, |aligner, c| {
        let rest = &logs[c][cursors[c]..];
        if rest.is_empty() {
            return false;
        }
        let len = rest
            .iter()
            .position(TsMsg::is_time_tick)
            .map_or(rest.len(), |tick| tick + 1)
            .min(cut);
        let mut msgs = rest[..len].to_vec();
        let mut ends: Vec<u64> = msgs.iter().map(TsMsg::end_ts).collect();
        cursors[c] += len;
        // A late message (possible only from mixed positions) is reported; the rest follows,
        // as the tt stream pushes it on its next call.
        while aligner.push_run(c, &mut msgs, &mut ends, None).is_err() {}
        assert!(msgs.is_empty() && ends.is_empty(), "a whole run is taken");
        true
    })
}

proptest! {
    #[test]
    fn runs_pushed_as_blocks_cut_the_same_packs(
        raw in prop::collection::vec(channel_log(), 1..5),
        cut in 1usize..6,
    ) {
        let names: Vec<String> = (0..raw.len()).map(|i| format!("c{i}")).collect();
        let logs: Vec<Vec<TsMsg>> = raw.iter().zip(&names).map(|(e, n)| to_log(n, e)).collect();
        let fresh = || TimetickAligner::new(names.clone(), LatePolicy::Error);
        let packs = drive(fresh(), &logs, vec![0; logs.len()]);
        prop_assert_eq!(&drive_runs(fresh(), &logs, vec![0; logs.len()], cut), &packs);
        prop_assume!(!packs.is_empty());
        // From stored positions, where each channel drops what is at or below its floor:
        // each pack's end positions, and positions of different packs per channel (floors
        // above the resumed watermark).
        for k in 0..packs.len() {
            let positions: Vec<MsgPosition> = (0..logs.len())
                .map(|c| packs[(k + c) % packs.len()].end_positions[c].clone())
                .collect();
            for positions in [&packs[k].end_positions, &positions] {
                let resumed = TimetickAligner::resume(positions, LatePolicy::Error)
                    .expect("positions");
                let cursors: Vec<usize> = positions
                    .iter()
                    .map(|p| p.msg_id.clone().as_u64().expect("u64 id") as usize)
                    .collect();
                let reference = TimetickAligner::resume(positions, LatePolicy::Error)
                    .expect("positions");
                // A message below a channel's floor may come after a late one: those are
                // left out of the packs (and the late ones counted), not failures.
                let expected = drive_pushing(reference, &logs, cursors.clone(), drop);
                prop_assert_eq!(drive_runs(resumed, &logs, cursors, cut), expected);
            }
        }
    }
}

#[test]
fn a_late_message_in_a_run_stops_it_there_and_the_rest_can_follow() {
    use Entry::{Msg, Tick};
    let log = to_log("a", &[Tick(10), Msg(12), Msg(4), Msg(13), Tick(20)]);
    for policy in [LatePolicy::Error, LatePolicy::Drop] {
        let mut aligner = TimetickAligner::new(vec!["a".into()], policy);
        aligner.push(0, log[0].clone()).expect("tick");
        assert!(aligner.pop_pack().is_some());
        let mut msgs = log[1..].to_vec();
        let mut ends: Vec<u64> = msgs.iter().map(TsMsg::end_ts).collect();
        let pushed = aligner.push_run(0, &mut msgs, &mut ends, None);
        if policy == LatePolicy::Error {
            assert!(pushed.is_err(), "the late message is reported");
            assert_eq!(ends, vec![13, 20], "what follows it is left to push");
            aligner
                .push_run(0, &mut msgs, &mut ends, None)
                .expect("the rest");
        } else {
            pushed.expect("a late message is dropped");
        }
        assert!(msgs.is_empty() && ends.is_empty());
        assert_eq!(aligner.late_messages(), 1);
        let pack = aligner.pop_pack().expect("pack 10..20");
        assert_eq!(
            pack.msgs.iter().map(TsMsg::end_ts).collect::<Vec<_>>(),
            vec![12, 13]
        );
    }
}
