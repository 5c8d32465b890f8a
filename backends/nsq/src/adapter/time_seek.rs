//! Seeking by time on a Youzan cluster (`Client::time_lower_bound`).
//!
//! The fork indexes each message by when nsqd stored it, in whole seconds: a channel set to
//! `timestamp:<secs>` continues at the first message stored at or after that second
//! (transcript Y6 136-153). The streams' timestamps are the stream's own logical ones, so they
//! map to that clock only when they are Milvus hybrid timestamps whose clock runs at most
//! `clock_slack_ms` ahead of the nsqds' ([`msgstream::mq::Timestamps::Hybrid`]): then
//! every message stored before `physical(ts) − slack` has a timestamp below `ts`, and so has
//! every message stored before the whole second at or below that time. Reading a throw-away
//! ephemeral channel started there gives the first such message: a lower bound, which the
//! core's forward scan turns into the exact first message with timestamp ≥ `ts`.

use std::sync::Arc;

use msgstream::mq::{MessageId, Reader};
use msgstream::{Error, Result};

use super::client::Shared;
use super::consumer::latest_message_id;
use super::reader::NsqReader;
use super::{Position, BACKEND};
use crate::codec::ConsumeOffset;

/// The second to start a time search of `timestamp` at, or `None` where the configuration
/// does not relate timestamps to the nsqds' clocks.
pub(super) fn search_second(shared: &Shared, timestamp: u64) -> Option<u64> {
    let ms = shared.config.timestamps.broker_search_ms(timestamp)?;
    Some(ms / 1000)
}

/// An id no message before which has a timestamp ≥ `timestamp`: the first message stored at or
/// after the search second; when none is, the newest message (everything stored is older), or
/// the earliest id of an empty partition.
pub(super) async fn time_lower_bound(
    shared: &Arc<Shared>,
    topic: &str,
    timestamp: u64,
) -> Result<MessageId> {
    let unsupported = || {
        Error::Unsupported {
        backend: BACKEND,
        what: "seeking by time (needs a Youzan cluster, nsqd_http or lookupd, and \
               [stream] timestamps = \"hybrid\": the streams' timestamps related to the nsqds' clocks)",
    }
    };
    if !shared.capabilities().seek_time {
        return Err(unsupported());
    }
    let second = search_second(shared, timestamp).ok_or_else(unsupported)?;
    let mut reader =
        NsqReader::open_at_offset(shared.clone(), topic, ConsumeOffset::Timestamp(second)).await?;
    let first: Result<Option<MessageId>> = async {
        if reader.has_next().await? {
            Ok(Some(reader.next().await?.id))
        } else {
            Ok(None)
        }
    }
    .await;
    reader.close().await;
    if let Some(id) = first? {
        return Ok(id);
    }
    Ok(latest_message_id(shared, topic).await?.unwrap_or_else(|| {
        Position {
            partition: shared.partition().unwrap_or(0),
            offset: 0,
            raw_size: 0,
        }
        .id()
    }))
}
