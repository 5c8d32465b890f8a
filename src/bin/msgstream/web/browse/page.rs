//! Reading one page of a channel through a reader: a non-durable cursor, so browsing takes no
//! subscription and moves none (nothing is acknowledged, nothing is created).
//!
//! Readers only go forward. Oldest first opens one at the page's start and reads `limit`
//! messages. Newest first reads from the channel's first message up to the page's start,
//! keeping only the last `limit` messages seen: memory stays one page, but the time grows with
//! the messages before the start (the whole channel for its newest page). `from_time` is a
//! forward scan from the channel's first message too: the page starts at the first message
//! whose timestamp is at or above the time (oldest first), or ends before the first one above
//! it (newest first).

use std::collections::VecDeque;

use msgstream_facade::msgstream::mq::{Client, Message, MessageId, Reader, ReaderOptions};
use msgstream_facade::msgstream::msg::{DecoderRegistry, MsgHeader, MsgPosition, TsMsg};
use msgstream_facade::msgstream::Error as StreamError;
use prost::Message as _;
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
}

/// Reads the page `browse` asks for from `client`, whose readers the caller has checked.
pub async fn read(client: &dyn Client, browse: &Browse) -> Result<Page, Refused> {
    let start = resolve(client, &browse.start)?;
    let (first, inclusive) = match (&start, browse.order) {
        (From::At(id), Order::Oldest) => (id.clone(), true),
        (From::After(id), Order::Oldest) => (id.clone(), false),
        _ => (client.earliest_message_id(), true),
    };
    let mut reader = client
        .create_reader(ReaderOptions {
            topic: browse.channel.clone(),
            start: first,
            inclusive,
        })
        .await
        .map_err(backend)?;
    let page = match browse.order {
        Order::Oldest => oldest(reader.as_mut(), &start, browse.limit).await,
        Order::Newest => newest(reader.as_mut(), &start, browse.limit).await,
    };
    reader.close().await;
    let page = page.map_err(backend)?;
    if page.messages.is_empty() && !matches!(start, From::Edge) {
        return Err(Refused::new(
            Problem::PastEnd,
            format!(
                "channel {:?} has no message {}",
                browse.channel,
                start.describe(browse.order)
            ),
        ));
    }
    Ok(page)
}

/// [`Start`] with the ids checked by the backend.
enum From {
    Edge,
    At(MessageId),
    After(MessageId),
    Time(u64),
}

impl From {
    /// Where the page looked, for the error saying it found nothing there.
    fn describe(&self, order: Order) -> String {
        let (at, past) = match order {
            Order::Oldest => ("at or after", "after"),
            Order::Newest => ("at or before", "before"),
        };
        match self {
            From::Edge => "at all".to_string(),
            From::At(id) => format!("{at} id {}", short_id(id.as_bytes())),
            From::After(id) => format!("{past} id {}", short_id(id.as_bytes())),
            From::Time(ts) => match order {
                Order::Oldest => format!("with a timestamp at or above {ts}"),
                Order::Newest => format!("before the first with a timestamp above {ts}"),
            },
        }
    }
}

fn resolve(client: &dyn Client, start: &Start) -> Result<From, Refused> {
    let id = |bytes: &[u8]| {
        client.message_id_from_bytes(bytes).map_err(|e| {
            Refused::new(
                Problem::BadParameter,
                format!("not a {} message id: {e}", client.backend_name()),
            )
        })
    };
    Ok(match start {
        Start::Edge => From::Edge,
        Start::At(bytes) => From::At(id(bytes)?),
        Start::After(bytes) => From::After(id(bytes)?),
        Start::Time(ts) => From::Time(*ts),
    })
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

/// The timestamp of a message's header; `None` when it has none (it does not decode).
fn timestamp(msg: &Message) -> Option<u64> {
    MsgHeader::decode(msg.payload.as_ref())
        .ok()?
        .base
        .map(|b| b.timestamp)
}

/// Up to `limit` messages from the reader's start on (past those below the time, for a time).
async fn oldest(reader: &mut dyn Reader, start: &From, limit: usize) -> Result<Page, StreamError> {
    let mut messages = Vec::with_capacity(limit);
    while messages.len() < limit && reader.has_next().await? {
        let msg = reader.next().await?;
        if let From::Time(ts) = start {
            if messages.is_empty() && timestamp(&msg).is_none_or(|t| t < *ts) {
                continue;
            }
        }
        messages.push(msg);
    }
    let more = !messages.is_empty() && reader.has_next().await?;
    let next = more
        .then(|| messages.last().map(|m| m.id.clone()))
        .flatten();
    Ok(Page { messages, next })
}

/// The last `limit` messages before the page's start is passed, newest first.
async fn newest(reader: &mut dyn Reader, start: &From, limit: usize) -> Result<Page, StreamError> {
    let mut kept: VecDeque<Message> = VecDeque::with_capacity(limit + 1);
    let mut earlier = false;
    while reader.has_next().await? {
        let msg = reader.next().await?;
        let passed = match start {
            From::Edge => false,
            From::At(id) => msg.id > *id,
            From::After(id) => msg.id >= *id,
            From::Time(ts) => timestamp(&msg).is_some_and(|t| t > *ts),
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
    Ok(Page {
        messages: kept.into_iter().rev().collect(),
        next,
    })
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
