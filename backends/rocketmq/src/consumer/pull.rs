//! One PULL_MESSAGE request and its outcome.

use std::time::Duration;

use crate::admin::Admin;
use crate::error::{Error, Result};
use crate::protocol::codes;
use crate::protocol::route::MessageQueue;
use crate::protocol::stored::{self, StoredMessage};
use crate::remoting::Command;

/// Pull flag: the broker may hold the request until a message arrives.
const SUSPEND: u32 = 0x2;
/// Pull flag: the subscription expression travels in the request.
const SUBSCRIPTION: u32 = 0x4;

/// What one pull returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullOutcome {
    /// Messages found (empty when there was nothing new or the tag filter skipped everything).
    pub messages: Vec<StoredMessage>,
    /// Where the next pull of this queue starts.
    pub next_offset: i64,
    /// Whether the requested offset was out of range (the broker moved it to `next_offset`).
    pub offset_moved: bool,
}

/// One pull request.
pub struct PullRequest<'a> {
    /// Consumer group (broker-side name).
    pub group: &'a str,
    /// Queue.
    pub queue: &'a MessageQueue,
    /// First offset wanted.
    pub offset: i64,
    /// At most this many messages.
    pub max: u32,
    /// Tag expression.
    pub expression: &'a str,
    /// How long the broker may wait for a message (zero: answer at once).
    pub suspend: Duration,
    /// Largest body accepted after decompression.
    pub max_body: usize,
}

/// Sends `request` to the queue's broker and decodes the answer. A record that cannot be
/// decoded is [`Error::CorruptRecord`] (permanent: the broker answers the same bytes again).
pub async fn pull(admin: &Admin, request: &PullRequest<'_>) -> Result<PullOutcome> {
    let addr = admin.broker_of(request.queue).await?;
    let mut flag = SUBSCRIPTION;
    if !request.suspend.is_zero() {
        flag |= SUSPEND;
    }
    let command = Command::request(
        codes::PULL_MESSAGE,
        [
            ("consumerGroup", request.group.to_owned()),
            ("topic", request.queue.topic.clone()),
            ("queueId", request.queue.queue_id.to_string()),
            ("queueOffset", request.offset.to_string()),
            ("maxMsgNums", request.max.to_string()),
            ("sysFlag", flag.to_string()),
            ("commitOffset", "0".to_owned()),
            (
                "suspendTimeoutMillis",
                request.suspend.as_millis().to_string(),
            ),
            ("subscription", request.expression.to_owned()),
            ("subVersion", "0".to_owned()),
            ("expressionType", "TAG".to_owned()),
        ],
    );
    let timeout = admin.timeout + request.suspend;
    let response = match admin.remoting.invoke(&addr, command, timeout).await {
        Ok(response) => response,
        Err(e) => {
            admin.namesrv.invalidate(&request.queue.topic);
            return Err(e);
        }
    };
    let next = |r: &Command| r.num::<i64>("nextBeginOffset");
    match response.code {
        codes::SUCCESS => {
            let next_offset = next(&response)?;
            let (messages, bad) = stored::decode_prefix(response.body, request.max_body);
            match bad {
                None => Ok(PullOutcome {
                    messages,
                    next_offset,
                    offset_moved: false,
                }),
                // The records before the bad one first; the next pull starts at it.
                Some(bad) if !messages.is_empty() => Ok(PullOutcome {
                    next_offset: bad.queue_offset.unwrap_or_else(|| {
                        messages
                            .last()
                            .map_or(request.offset, |m| m.queue_offset + 1)
                    }),
                    messages,
                    offset_moved: false,
                }),
                Some(bad) => Err(Error::CorruptRecord {
                    topic: request.queue.topic.clone(),
                    queue_id: request.queue.queue_id,
                    offset: bad.queue_offset.unwrap_or(request.offset),
                    detail: bad.detail,
                }),
            }
        }
        codes::PULL_NOT_FOUND | codes::PULL_RETRY_IMMEDIATELY => Ok(PullOutcome {
            messages: Vec::new(),
            next_offset: next(&response).unwrap_or(request.offset),
            offset_moved: false,
        }),
        codes::PULL_OFFSET_MOVED => Ok(PullOutcome {
            messages: Vec::new(),
            next_offset: next(&response)?,
            offset_moved: true,
        }),
        codes::TOPIC_NOT_EXIST => Err(Error::TopicNotFound(request.queue.topic.clone())),
        code => Err(Error::Response {
            request: codes::PULL_MESSAGE,
            code,
            remark: response.remark.unwrap_or_default(),
        }),
    }
}
