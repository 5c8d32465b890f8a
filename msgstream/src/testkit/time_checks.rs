//! Checks of seeking by time, the plain rule (first message at or after a time) through every
//! entry point, and what both time checks write (the tt rule's checks: `time_tt_checks.rs`).
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
use crate::Error;

/// Hybrid timestamps from the clock, strictly increasing.
pub(super) struct Clock(u64);

impl Clock {
    pub(super) fn new() -> Self {
        Clock(0)
    }

    pub(super) fn next(&mut self) -> u64 {
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
pub(super) struct Written {
    pub(super) row: Option<i64>,
    pub(super) ts: u64,
}

/// Round `r` of channel `channel`: three inserts with timestamps `a < b < c` written as
/// `c, a, b` (row ids `(r * 10 + k) * 10 + channel`); the caller adds the round's tick.
pub(super) fn inserts(clock: &mut Clock, r: u64, channel: u64) -> Vec<Written> {
    let (a, b, c) = (clock.next(), clock.next(), clock.next());
    let row = |k: u64| Some(((r * 10 + k) * 10 + channel) as i64);
    vec![
        Written { row: row(3), ts: c },
        Written { row: row(1), ts: a },
        Written { row: row(2), ts: b },
    ]
}

pub(super) fn tick(ts: u64) -> Written {
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
pub(super) async fn write(
    client: &Arc<dyn Client>,
    channel: &str,
    items: &[Written],
) -> Vec<MessageId> {
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

pub(super) fn is_unsupported<T: std::fmt::Debug>(result: &crate::Result<T>) -> bool {
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
