//! Reading one page of a channel through a reader: a non-durable cursor, so browsing takes no
//! subscription and moves none (nothing is acknowledged, nothing is created).
//!
//! Readers only go forward. Oldest first opens one at the page's start and reads `limit`
//! messages. Newest first reads from the channel's first message up to the page's start,
//! keeping only the last `limit` messages seen: memory stays one page, but the time grows with
//! the messages before the start (the whole channel for its newest page).
//!
//! A time is found as the core's seek by time finds it ([`msgstream_facade::msgstream::mq::time`]:
//! a message's timestamp is its `end_ts`; the first message in channel order at or above the
//! time): through the backend's time index where it has one (`capabilities().seek_time`), else
//! by a forward scan from the channel's first message ([`scan_to_time`] from the earliest id),
//! which reads every message before the answer.

use std::collections::VecDeque;

use msgstream_facade::msgstream::mq::{
    scan_to_time, Client, Message, MessageId, Reader, ReaderOptions, TimePosition,
};
use msgstream_facade::msgstream::msg::{DecoderRegistry, MsgPosition, TsMsg};
use msgstream_facade::msgstream::Error as StreamError;
use serde_json::{json, Value};

use super::query::{Browse, Order, Problem, Refused, Start};
use crate::commands::{kinds, printed, short_id};

/// At most this many bytes of a message that does not decode are shown, in hex.
const HEX_BYTES: usize = 1024;

/// One page: its messages in the page's order, and the cursor of the next page when there
/// are more messages beyond it.
pub struct Page {
    /// The messages, as the channel's reader delivered them.
    pub messages: Vec<Message>,
    /// The id of the page's last message, when more follow it in the page's order.
    pub next: Option<MessageId>,
    /// How a `from_time` was found: `"time index"` or `"scan"`; `None` without one.
    pub time_found_by: Option<&'static str>,
}

/// Where a page starts, as ids: the first message of the page is at `At` (inclusive) or just
/// past `After`, in the page's order.
enum Bound {
    Edge,
    At(MessageId),
    After(MessageId),
}

/// Reads the page `browse` asks for from `client`, whose readers the caller has checked.
pub async fn read(client: &dyn Client, browse: &Browse) -> Result<Page, Refused> {
    let topic = browse.channel.as_str();
    let id = |bytes: &[u8]| {
        client.message_id_from_bytes(bytes).map_err(|e| {
            Refused::new(
                Problem::BadParameter,
                format!("not a {} message id: {e}", client.backend_name()),
            )
        })
    };
    let mut time_found_by = None;
    let bound = match (&browse.start, browse.order) {
        (Start::Edge, _) => Bound::Edge,
        (Start::At(bytes), _) => Bound::At(id(bytes)?),
        (Start::After(bytes), _) => Bound::After(id(bytes)?),
        (Start::Time(ts), Order::Oldest) => {
            let (found, by) = at_time(client, topic, *ts).await.map_err(backend)?;
            time_found_by = Some(by);
            if found.inclusive {
                Bound::At(found.id)
            } else {
                Bound::After(found.id)
            }
        }
        // Newest first ends before the first message above the time.
        (Start::Time(ts), Order::Newest) => match ts.checked_add(1) {
            None => Bound::Edge,
            Some(above) => {
                let (found, by) = at_time(client, topic, above).await.map_err(backend)?;
                time_found_by = Some(by);
                if found.inclusive {
                    Bound::After(found.id)
                } else {
                    Bound::At(found.id)
                }
            }
        },
    };
    let (first, inclusive) = match (&bound, browse.order) {
        (Bound::At(id), Order::Oldest) => (id.clone(), true),
        (Bound::After(id), Order::Oldest) => (id.clone(), false),
        _ => (client.earliest_message_id(), true),
    };
    let mut reader = client
        .create_reader(ReaderOptions {
            topic: topic.to_string(),
            start: first,
            inclusive,
        })
        .await
        .map_err(backend)?;
    let page = match browse.order {
        Order::Oldest => oldest(reader.as_mut(), browse.limit).await,
        Order::Newest => newest(reader.as_mut(), &bound, browse.limit).await,
    };
    reader.close().await;
    let (messages, next) = page.map_err(backend)?;
    if messages.is_empty() && !matches!(browse.start, Start::Edge) {
        return Err(Refused::new(
            Problem::PastEnd,
            format!(
                "channel {topic:?} has no message {}",
                describe(&browse.start, browse.order)
            ),
        ));
    }
    Ok(Page {
        messages,
        next,
        time_found_by,
    })
}

/// The first message of `topic` at or above `timestamp`, and how it was found.
async fn at_time(
    client: &dyn Client,
    topic: &str,
    timestamp: u64,
) -> Result<(TimePosition, &'static str), StreamError> {
    if client.capabilities().seek_time {
        let found = client.message_id_at_time(topic, timestamp).await?;
        return Ok((found, "time index"));
    }
    let found = scan_to_time(client, topic, client.earliest_message_id(), timestamp).await?;
    Ok((found, "scan"))
}

/// Where the page looked, for the error saying it found nothing there.
fn describe(start: &Start, order: Order) -> String {
    let (at, past) = match order {
        Order::Oldest => ("at or after", "after"),
        Order::Newest => ("at or before", "before"),
    };
    match start {
        Start::Edge => "at all".to_string(),
        Start::At(id) => format!("{at} id {}", short_id(id)),
        Start::After(id) => format!("{past} id {}", short_id(id)),
        Start::Time(ts) => match order {
            Order::Oldest => format!("with a timestamp at or above {ts}"),
            Order::Newest => format!("before the first with a timestamp above {ts}"),
        },
    }
}

/// A reader's failure: an id past the newest or below retention is the request's, anything
/// else the backend's.
fn backend(e: StreamError) -> Refused {
    let problem = match e {
        StreamError::PastEnd { .. } => Problem::PastEnd,
        StreamError::BelowRetention { .. } => Problem::Retained,
        StreamError::InvalidArgument(_) => Problem::BadParameter,
        _ => Problem::Backend,
    };
    let message = match problem {
        Problem::Backend => format!("reading the channel failed: {e}"),
        _ => e.to_string(),
    };
    Refused::new(problem, message)
}

/// A page's messages and the cursor of the next page, if any.
type Read = (Vec<Message>, Option<MessageId>);

/// Up to `limit` messages from the reader's start on.
async fn oldest(reader: &mut dyn Reader, limit: usize) -> Result<Read, StreamError> {
    let mut messages = Vec::with_capacity(limit);
    while messages.len() < limit && reader.has_next().await? {
        messages.push(reader.next().await?);
    }
    let more = !messages.is_empty() && reader.has_next().await?;
    let next = more
        .then(|| messages.last().map(|m| m.id.clone()))
        .flatten();
    Ok((messages, next))
}

/// The last `limit` messages up to `bound`, newest first.
async fn newest(reader: &mut dyn Reader, bound: &Bound, limit: usize) -> Result<Read, StreamError> {
    let mut kept: VecDeque<Message> = VecDeque::with_capacity(limit + 1);
    let mut earlier = false;
    while reader.has_next().await? {
        let msg = reader.next().await?;
        let passed = match bound {
            Bound::Edge => false,
            Bound::At(id) => msg.id > *id,
            Bound::After(id) => msg.id >= *id,
        };
        if passed {
            break;
        }
        kept.push_back(msg);
        if kept.len() > limit {
            kept.pop_front();
            earlier = true;
        }
    }
    let next = earlier
        .then(|| kept.front().map(|m| m.id.clone()))
        .flatten();
    Ok((kept.into_iter().rev().collect(), next))
}

/// One message of a page: the object `consume --format json` prints for it, with `line` (the
/// line `consume` prints) and `preview` (the payload as that line shows it). A message that
/// does not decode is shown as `kind: "undecodable"` with the error and its first bytes in hex.
pub fn entry(registry: &DecoderRegistry, msg: &Message) -> Value {
    match registry.decode(&msg.payload) {
        Ok(body) => {
            let mut consumed = TsMsg::new(body);
            consumed.position = Some(MsgPosition {
                channel_name: msg.topic.clone(),
                msg_id: msg.id.clone(),
                // As a consumer stamps it.
                timestamp: consumed.begin_ts(),
                ..MsgPosition::default()
            });
            consumed.properties = msg.properties.clone();
            let mut value = printed::json(&consumed);
            if let Value::Object(map) = &mut value {
                let preview = kinds::preview(&kinds::describe(&consumed).payload);
                map.insert("preview".into(), Value::String(preview));
                map.insert("line".into(), Value::String(printed::line(&consumed)));
            }
            value
        }
        Err(e) => {
            let shown = &msg.payload[..msg.payload.len().min(HEX_BYTES)];
            json!({
                "channel": msg.topic.as_str(),
                "id": short_id(msg.id.as_bytes()),
                "kind": "undecodable",
                "error": e.to_string(),
                "properties": msg.properties,
                "size": msg.payload.len(),
                "payload_hex": shown.iter().map(|b| format!("{b:02x}")).collect::<String>(),
                "preview": kinds::preview(&msg.payload),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_start_outside_the_channel_is_the_requests_problem_not_the_backends() {
        let id = MessageId::from_u64(7);
        let cases = [
            (
                StreamError::PastEnd {
                    channel: "c".into(),
                    id: id.clone(),
                    latest: None,
                },
                Problem::PastEnd,
            ),
            (
                StreamError::BelowRetention {
                    channel: "c".into(),
                    id,
                    oldest: None,
                },
                Problem::Retained,
            ),
            (
                StreamError::InvalidArgument("no".into()),
                Problem::BadParameter,
            ),
            (StreamError::Closed("reader"), Problem::Backend),
        ];
        for (error, problem) in cases {
            assert_eq!(backend(error).problem, problem);
        }
    }
}
