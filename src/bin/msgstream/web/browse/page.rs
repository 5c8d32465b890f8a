//! One page of a channel: where it starts (an id, a cursor, a time) turned into ids, read
//! through readers ([`super::scan`]): non-durable cursors, so browsing takes no subscription
//! and moves none (nothing is acknowledged, nothing is created).
//!
//! A time is found as the core's seek by time finds it ([`msgstream_facade::msgstream::mq::time`]:
//! a message's timestamp is its `end_ts`; the first message in channel order at or above the
//! time): through the backend's time index where it has one (`capabilities().seek_time`), else
//! by a forward scan from the channel's first message ([`scan_to_time`] from the earliest id),
//! which reads every message before the answer.

use std::time::Duration;

use msgstream_facade::msgstream::mq::{scan_to_time, Client, Message, MessageId, TimePosition};
use msgstream_facade::msgstream::Error as StreamError;
use tokio::time::{timeout_at, Instant};

use super::query::{Browse, Order, Problem, Refused, Start};
use super::scan::{self, Bound};
use crate::commands::short_id;
use crate::web::checkpoints::Checkpoints;

/// One page: its messages in the page's order, and the cursor of the next page when there
/// are more messages beyond it.
pub struct Page {
    /// The messages, as the channel's reader delivered them.
    pub messages: Vec<Message>,
    /// The id of the page's last message, when more follow it in the page's order.
    pub next: Option<MessageId>,
    /// How many messages the readers read to build the page (a time search's scan aside).
    pub read: u64,
    /// How a `from_time` was found: `"time index"` or `"scan"`; `None` without one.
    pub time_found_by: Option<&'static str>,
}

/// Reads the page `browse` asks for from `client`, whose readers the caller has checked;
/// newest first starts at the watcher's `checkpoints` where it can.
pub async fn read(
    client: &dyn Client,
    checkpoints: &Checkpoints,
    browse: &Browse,
    budget: Duration,
) -> Result<Page, Refused> {
    let deadline = Instant::now() + budget;
    let out_of_time = || {
        Refused::new(
            Problem::OutOfTime,
            format!(
                "reading the page took over {} s (newest first reads up to the page; a start \
                 with from or from_time reads less)",
                budget.as_secs()
            ),
        )
    };
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
            let (found, by) = timeout_at(deadline, at_time(client, topic, *ts))
                .await
                .map_err(|_| out_of_time())?
                .map_err(backend)?;
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
                let (found, by) = timeout_at(deadline, at_time(client, topic, above))
                    .await
                    .map_err(|_| out_of_time())?
                    .map_err(backend)?;
                time_found_by = Some(by);
                if found.inclusive {
                    Bound::After(found.id)
                } else {
                    Bound::At(found.id)
                }
            }
        },
    };
    let limit = browse.limit;
    let scanned = match browse.order {
        Order::Oldest => scan::oldest(client, topic, &bound, limit, deadline).await,
        Order::Newest => scan::newest(client, checkpoints, topic, &bound, limit, deadline).await,
    }
    .map_err(backend)?;
    if scanned.out_of_time {
        return Err(out_of_time());
    }
    if scanned.messages.is_empty() && !matches!(browse.start, Start::Edge) {
        return Err(Refused::new(
            Problem::PastEnd,
            format!(
                "channel {topic:?} has no message {}",
                describe(&browse.start, browse.order)
            ),
        ));
    }
    Ok(Page {
        messages: scanned.messages,
        next: scanned.next,
        read: scanned.read,
        time_found_by,
    })
}

/// The first message of `topic` at or above `timestamp`, and how it was found: the backend's
/// time index, or where it has none (or cannot use it under this configuration) a scan.
async fn at_time(
    client: &dyn Client,
    topic: &str,
    timestamp: u64,
) -> Result<(TimePosition, &'static str), StreamError> {
    if client.capabilities().seek_time {
        match client.message_id_at_time(topic, timestamp).await {
            Ok(found) => return Ok((found, "time index")),
            // A backend whose index is its own clock cannot search opaque timestamps.
            Err(StreamError::Unsupported { .. }) => {}
            Err(e) => return Err(e),
        }
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
