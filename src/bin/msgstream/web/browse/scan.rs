//! The reader loops behind a page. Readers only go forward: oldest first opens one at the page's
//! start and reads a page; newest first reads up to the page's bound, keeping only the last
//! `limit` messages (one page in memory), from a watcher checkpoint two before the bound where
//! there is one, else from the channel's first message. Each loop stops at a deadline, so a
//! channel produced faster than it is read cannot hold a request forever.

use std::collections::VecDeque;

use msgstream_facade::msgstream::mq::{Client, Message, MessageId, Reader, ReaderOptions};
use msgstream_facade::msgstream::Error as StreamError;
use tokio::time::Instant;

use crate::web::checkpoints::Checkpoints;

/// Where a newest-first page ends, as ids: at `At` (inclusive), just before `After`, or at the
/// channel's end (`Edge`). For oldest first, where it starts.
pub enum Bound {
    /// The channel's first (oldest first) or last (newest first) message.
    Edge,
    /// This message, inclusive.
    At(MessageId),
    /// Just past this message, in the page's order.
    After(MessageId),
}

/// What a scan read: the page's messages in its order, and the next page's cursor.
pub struct Scanned {
    /// The page's messages.
    pub messages: Vec<Message>,
    /// The id of the page's last message, when more follow it in the page's order.
    pub next: Option<MessageId>,
    /// How many messages the readers read to build the page.
    pub read: u64,
    /// The deadline passed before the page was complete: it is not to be shown.
    pub out_of_time: bool,
}

async fn open(
    client: &dyn Client,
    topic: &str,
    start: MessageId,
    inclusive: bool,
) -> Result<Box<dyn Reader>, StreamError> {
    client
        .create_reader(ReaderOptions {
            topic: topic.to_string(),
            start,
            inclusive,
        })
        .await
}

/// Up to `limit` messages from `bound` on, in channel order.
pub async fn oldest(
    client: &dyn Client,
    topic: &str,
    bound: &Bound,
    limit: usize,
    deadline: Instant,
) -> Result<Scanned, StreamError> {
    let (start, inclusive) = match bound {
        Bound::Edge => (client.earliest_message_id(), true),
        Bound::At(id) => (id.clone(), true),
        Bound::After(id) => (id.clone(), false),
    };
    let mut reader = open(client, topic, start, inclusive).await?;
    let scanned = oldest_of(reader.as_mut(), limit, deadline).await;
    reader.close().await;
    scanned
}

async fn oldest_of(
    reader: &mut dyn Reader,
    limit: usize,
    deadline: Instant,
) -> Result<Scanned, StreamError> {
    let mut messages = Vec::with_capacity(limit);
    let mut out_of_time = false;
    while messages.len() < limit && reader.has_next().await? {
        if Instant::now() >= deadline {
            out_of_time = true;
            break;
        }
        messages.push(reader.next().await?);
    }
    let more = !messages.is_empty() && reader.has_next().await?;
    let next = more
        .then(|| messages.last().map(|m| m.id.clone()))
        .flatten();
    let read = messages.len() as u64;
    Ok(Scanned {
        messages,
        next,
        read,
        out_of_time,
    })
}

/// The last `limit` messages up to `bound`, newest first.
///
/// From a checkpoint, a page that comes out short (retention dropped what the checkpoint
/// counted on) or a checkpoint retention dropped is read again from the channel's first
/// message, so a checkpoint only ever shortens the reading, never changes the page.
pub async fn newest(
    client: &dyn Client,
    checkpoints: &Checkpoints,
    topic: &str,
    bound: &Bound,
    limit: usize,
    deadline: Instant,
) -> Result<Scanned, StreamError> {
    let upper = match bound {
        Bound::Edge => None,
        Bound::At(id) | Bound::After(id) => Some(id),
    };
    let mut read = 0;
    if let Some(start) = checkpoints.start_before(topic, upper) {
        match newest_from(client, topic, start, bound, (limit, deadline), true).await {
            Ok(scanned) if scanned.messages.len() == limit || scanned.out_of_time => {
                return Ok(scanned)
            }
            Ok(scanned) => read = scanned.read,
            Err(StreamError::BelowRetention { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    let earliest = client.earliest_message_id();
    let mut scanned = newest_from(client, topic, earliest, bound, (limit, deadline), false).await?;
    scanned.read += read;
    Ok(scanned)
}

/// [`newest`] read from `start` with a page's `(limit, deadline)`; `earlier` says whether
/// messages precede `start`.
async fn newest_from(
    client: &dyn Client,
    topic: &str,
    start: MessageId,
    bound: &Bound,
    page: (usize, Instant),
    earlier: bool,
) -> Result<Scanned, StreamError> {
    let mut reader = open(client, topic, start, true).await?;
    let scanned = newest_of(reader.as_mut(), bound, page, earlier).await;
    reader.close().await;
    scanned
}

async fn newest_of(
    reader: &mut dyn Reader,
    bound: &Bound,
    (limit, deadline): (usize, Instant),
    mut earlier: bool,
) -> Result<Scanned, StreamError> {
    let mut kept: VecDeque<Message> = VecDeque::with_capacity(limit + 1);
    let mut read = 0;
    let mut out_of_time = false;
    while reader.has_next().await? {
        if Instant::now() >= deadline {
            out_of_time = true;
            break;
        }
        let msg = reader.next().await?;
        read += 1;
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
    Ok(Scanned {
        messages: kept.into_iter().rev().collect(),
        next,
        read,
        out_of_time,
    })
}
