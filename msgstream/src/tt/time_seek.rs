//! Where a tt stream resumes for a time: per channel, the last timetick before it.
//!
//! A consumer positioned at a tick (its id, its timestamp as the position's watermark) reads
//! exactly the packs after that tick. For a time `ts` the tick wanted is the last one with a
//! timestamp below `ts` that comes before the channel's first tick at or above `ts`: the packs
//! from there are the first to hold any message at or after `ts`.
//!
//! Finding it reads forward only. Probe times `ts − 1, ts − 2, ts − 4, …`: the backend's
//! lower bound for a probe `p` ([`Client::time_lower_bound`]) is at or before every message
//! with timestamp ≥ `p`, so at or before the wanted tick once `p` is at or below its
//! timestamp. Each round reads from its bound up to where the round before started reading
//! (or to the first tick at or above `ts`); the first round that sees a tick below `ts` has
//! found the last one, since every later message was read in earlier rounds. A probe of 0
//! reads from the channel's start; finding nothing there means the channel has no tick
//! before `ts`, and the position is its start.

use crate::mq::{Client, MessageId, Reader, ReaderOptions};
use crate::msg::{MsgHeader, MsgPosition, MsgType, SharedStr};
use crate::Result;

/// The timestamp of a timetick payload; `None` for any other message.
fn tick_timestamp(payload: &[u8]) -> Option<u64> {
    let base = <MsgHeader as prost::Message>::decode(payload).ok()?.base?;
    (base.msg_type == MsgType::TimeTick as i32).then_some(base.timestamp)
}

/// What one round read.
#[derive(Default)]
struct Round {
    /// The last tick below the time (id, timestamp).
    tick: Option<(MessageId, u64)>,
    /// The first message read: where the next round stops.
    first: Option<MessageId>,
    /// A tick at or above the time, where every later round stops too.
    tick_after: Option<MessageId>,
}

/// Reads from the reader's start up to `end` (exclusive) or a tick at or above `timestamp`.
async fn read_round(
    reader: &mut dyn Reader,
    end: Option<&MessageId>,
    timestamp: u64,
) -> Result<Round> {
    let mut round = Round::default();
    while reader.has_next().await? {
        let message = reader.next().await?;
        if end.is_some_and(|end| message.id >= *end) {
            break;
        }
        round.first.get_or_insert_with(|| message.id.clone());
        match tick_timestamp(&message.payload) {
            Some(tick) if tick < timestamp => round.tick = Some((message.id, tick)),
            Some(_) => {
                round.tick_after = Some(message.id);
                break;
            }
            None => {}
        }
    }
    Ok(round)
}

/// The position a tt consumer of `channel` resumes from to read the packs of `timestamp` on
/// (see the module docs): its last tick below `timestamp`, or the channel's start (watermark 0)
/// when it has none.
pub(crate) async fn tick_before(
    client: &dyn Client,
    channel: &str,
    timestamp: u64,
) -> Result<MsgPosition> {
    let position = |msg_id: MessageId, timestamp: u64| MsgPosition {
        channel_name: SharedStr::from(channel),
        msg_id,
        timestamp,
        ..MsgPosition::default()
    };
    let mut end: Option<MessageId> = None;
    let mut previous_bound: Option<MessageId> = None;
    let mut back = 1u64;
    loop {
        let probe = timestamp.saturating_sub(back);
        let bound = if probe == 0 {
            client.earliest_message_id()
        } else {
            client.time_lower_bound(channel, probe).await?
        };
        if previous_bound.as_ref() != Some(&bound) {
            let options = ReaderOptions {
                topic: channel.to_string(),
                start: bound.clone(),
                inclusive: true,
            };
            let mut reader = client.create_reader(options).await?;
            let round = read_round(reader.as_mut(), end.as_ref(), timestamp).await;
            reader.close().await;
            let round = round?;
            if let Some((id, tick)) = round.tick {
                return Ok(position(id, tick));
            }
            end = round.first.or(round.tick_after).or(end);
            previous_bound = Some(bound);
        }
        if probe == 0 {
            return Ok(position(client.earliest_message_id(), 0));
        }
        back = back.saturating_mul(2);
    }
}
