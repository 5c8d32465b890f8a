//! What a coordinator-mode nsqd's HTTP API answers before (or instead of) the standalone one:
//! no `/topic/create` (`404 NOT_FOUND`, Y1 29) and, as the lookupd owns topics, no
//! `/topic/delete` either (not recorded: an assumption, the client never asks it), and a
//! partition's publishes and channel calls served only by its elected leader. `/pub` and
//! `/mpub` wrap their refusals (`500 {"status_code":500,"status_txt":"E_TOPIC_NOT_EXIST"..}`,
//! or `404`/`400` bare with the NSQ Accept header); the V1 endpoints `/channel/delete` and
//! `/channel/setoffset` always answer `{"message":..}` with the real status (Y3, Y6, Y7).
//! `/channel/delete` is idempotent here; `/channel/setoffset` moves existing channels only
//! (`404 CHANNEL_NOT_FOUND`).

use super::{Access, ClusterNode};
use crate::api::close_subscribers;
use crate::http::{wrapped_error, Request, Response};
use crate::Shared;

/// The answer of a coordinator-mode nsqd to `req`, or `None` to let the standalone handler
/// answer it.
pub(crate) fn gate(shared: &Shared, cluster: &ClusterNode, req: &Request) -> Option<Response> {
    let path = req.path.as_str();
    if matches!(path, "/topic/create" | "/topic/delete") {
        return Some(Response::error(404, "NOT_FOUND"));
    }
    let wrapped = matches!(path, "/pub" | "/mpub" | "/pubtrace");
    let v1 = matches!(path, "/channel/delete" | "/channel/setoffset");
    if !wrapped && !v1 {
        return None;
    }
    let topic = req.query.get("topic")?;
    let partition = match req.query.get("partition") {
        Some(p) => p.parse::<u32>().ok()?,
        None => match cluster.own_partition(topic) {
            Some(p) => p,
            None => return Some(refusal(req, wrapped, 404, "E_TOPIC_NOT_EXIST")),
        },
    };
    match cluster.access(topic, partition) {
        Access::NotHere => Some(refusal(req, wrapped, 404, "E_TOPIC_NOT_EXIST")),
        Access::NotLeader => Some(refusal(req, wrapped, 400, "E_FAILED_ON_NOT_LEADER")),
        Access::Leader if path == "/channel/delete" => {
            Some(delete_channel(shared, req, topic, partition))
        }
        Access::Leader if path == "/channel/setoffset" => {
            set_offset_checks(shared, req, topic, partition)
        }
        Access::Leader if wrapped && req.body.is_empty() => {
            Some(wrapped_error(req, 406, "MSG_EMPTY"))
        }
        Access::Leader if path == "/pubtrace" => Some(pub_trace(shared, req, topic, partition)),
        Access::Leader => None,
    }
}

/// A coordinator-mode `/channel/setoffset` moves existing channels only.
fn set_offset_checks(
    shared: &Shared,
    req: &Request,
    topic: &str,
    partition: u32,
) -> Option<Response> {
    if req.body.is_empty() {
        return Some(Response::error(406, "MSG_EMPTY"));
    }
    let channel = req.query.get("channel")?;
    let mut store = shared.store();
    let exists = store
        .partition(topic, partition)
        .is_some_and(|p| p.channels.contains_key(channel));
    (!exists).then(|| Response::error(404, "CHANNEL_NOT_FOUND"))
}

/// `/pubtrace?topic=&partition=&trace_id=`: stores the body and answers where (Y3 129).
fn pub_trace(shared: &Shared, req: &Request, topic: &str, partition: u32) -> Response {
    let trace_id = req
        .query
        .get("trace_id")
        .and_then(|t| t.parse::<u64>().ok())
        .unwrap_or(0);
    let body = bytes::Bytes::copy_from_slice(&req.body);
    let (id, offset, raw_size) = shared.put(topic, partition, vec![body], None, trace_id);
    let mut number = [0u8; 8];
    number.copy_from_slice(&id[..8]);
    Response::json(&serde_json::json!({
        "status": "OK",
        "id": u64::from_be_bytes(number),
        "trace_id": trace_id.to_string(),
        "queue_offset": offset,
        "rawsize": raw_size,
    }))
}

fn refusal(req: &Request, wrapped: bool, status: u16, message: &str) -> Response {
    if wrapped {
        wrapped_error(req, status, message)
    } else {
        Response::error(status, message)
    }
}

/// Deletes one partition's channel; deleting one that is not there succeeds.
fn delete_channel(shared: &Shared, req: &Request, topic: &str, partition: u32) -> Response {
    let Some(channel) = req.query.get("channel") else {
        return Response::error(400, "MISSING_ARG_CHANNEL");
    };
    let mut store = shared.store();
    if let Some(part) = store.partition(topic, partition) {
        part.channels.remove(channel);
    }
    close_subscribers(&mut store, |sub| {
        sub.topic == topic && sub.partition == partition && sub.channel == *channel
    });
    Response::text("")
}
