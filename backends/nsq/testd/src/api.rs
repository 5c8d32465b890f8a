//! nsqd's HTTP API: `/ping`, `/info`, `/pub`, `/mpub`, `/stats`, topic and channel
//! create/delete, with nsqd's error codes; with the extensions also the fork's
//! `/channel/setoffset` and `/message/get`.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::{json, Value};

use crate::http::{Handler, Request, Response};
use crate::store::Store;
use crate::{valid_name, Shared};

/// The HTTP face of one server.
pub(crate) struct Nsqd(pub Arc<Shared>);

impl Handler for Nsqd {
    fn max_body(&self) -> usize {
        self.0.options.max_body_size
    }

    fn handle(&self, req: Request) -> Response {
        if let Some(cluster) = &self.0.cluster {
            if let Some(answer) = crate::cluster::gate(&self.0, cluster, &req) {
                return answer;
            }
        }
        let post = req.method == "POST" || req.method == "PUT";
        match (req.path.as_str(), post) {
            ("/ping", _) => Response::text("OK"),
            ("/info", _) => Response::json(&json!({
                "version": self.0.options.extensions.version(),
                "broadcast_address": "127.0.0.1",
                "hostname": "testd",
                "tcp_port": self.0.tcp_addr.port(),
                "http_port": self.0.http_addr.port(),
            })),
            ("/stats", _) => Response::json(&stats(&self.0, &req)),
            ("/pub", true) => self.publish(&req, false),
            ("/mpub", true) => self.publish(&req, true),
            ("/topic/create", true) => self.topic(&req, Admin::Create),
            ("/topic/delete", true) => self.topic(&req, Admin::Delete),
            ("/channel/create", true) => self.channel(&req, Admin::Create),
            ("/channel/delete", true) => self.channel(&req, Admin::Delete),
            ("/channel/empty", true) => self.channel(&req, Admin::Empty),
            ("/topic/empty", true) => self.topic(&req, Admin::Empty),
            ("/channel/setoffset", true) if self.0.options.extensions.partitions() => {
                self.set_offset(&req)
            }
            ("/message/get", false) if self.0.options.extensions.partitions() => {
                self.message_get(&req)
            }
            ("/message/get", true) if self.0.options.extensions.partitions() => {
                Response::error(405, "METHOD_NOT_ALLOWED")
            }
            (
                "/pub" | "/mpub" | "/topic/create" | "/topic/delete" | "/channel/create"
                | "/channel/delete",
                false,
            ) => Response::error(405, "METHOD_NOT_ALLOWED"),
            _ => Response::error(404, "NOT_FOUND"),
        }
    }
}

#[derive(Clone, Copy)]
enum Admin {
    Create,
    Delete,
    Empty,
}

fn topic_arg(req: &Request) -> Result<String, Response> {
    let topic = req
        .query
        .get("topic")
        .ok_or_else(|| Response::error(400, "MISSING_ARG_TOPIC"))?;
    if !valid_name(topic) {
        return Err(Response::error(400, "INVALID_TOPIC"));
    }
    Ok(topic.clone())
}

fn partition_arg(req: &Request) -> Result<Option<u32>, Response> {
    req.query
        .get("partition")
        .map(|p| {
            p.parse()
                .map_err(|_| Response::error(400, "INVALID_PARTITION"))
        })
        .transpose()
}

impl Nsqd {
    fn publish(&self, req: &Request, batch: bool) -> Response {
        let topic = match topic_arg(req) {
            Ok(t) => t,
            Err(r) => return r,
        };
        let bodies: Vec<Bytes> = if !batch {
            if req.body.is_empty() {
                return Response::error(400, "MSG_EMPTY");
            }
            vec![Bytes::copy_from_slice(&req.body)]
        } else if req.query.get("binary").is_some_and(|b| b == "true") {
            match binary_mpub(&req.body) {
                Some(b) => b,
                None => return Response::error(400, "INVALID_BODY"),
            }
        } else {
            req.body
                .split(|b| *b == b'\n')
                .filter(|m| !m.is_empty())
                .map(Bytes::copy_from_slice)
                .collect()
        };
        if bodies.is_empty() {
            return Response::error(400, "MSG_EMPTY");
        }
        if bodies.iter().any(|b| b.len() > self.0.options.max_msg_size) {
            return Response::error(413, "MSG_TOO_BIG");
        }
        let defer = match req.query.get("defer").map(|d| d.parse::<u64>()) {
            None => None,
            Some(Ok(ms)) if ms <= self.0.options.max_req_timeout.as_millis() as u64 => Some(ms),
            Some(_) => return Response::error(400, "INVALID_DEFER"),
        };
        let partition = match partition_arg(req) {
            Ok(p) => p,
            Err(r) => return r,
        };
        let pid = {
            let mut store = self.0.store();
            match resolve(
                &mut store,
                &topic,
                partition,
                self.0.options.extensions.partitions(),
            ) {
                Some(p) => p,
                None => return Response::error(404, "TOPIC_NOT_FOUND"),
            }
        };
        let at = defer.map(|ms| std::time::Instant::now() + std::time::Duration::from_millis(ms));
        self.0.put(&topic, pid, bodies, at, 0);
        Response::text("OK")
    }

    fn topic(&self, req: &Request, action: Admin) -> Response {
        let topic = match topic_arg(req) {
            Ok(t) => t,
            Err(r) => return r,
        };
        let mut store = self.0.store();
        match action {
            Admin::Create => {
                let count = req
                    .query
                    .get("partition_num")
                    .and_then(|n| n.parse::<u32>().ok())
                    .unwrap_or(1);
                let entry = store.topics.entry(topic).or_default();
                for pid in 0..count.max(1) {
                    entry.partitions.entry(pid).or_default();
                }
            }
            Admin::Empty => {
                for part in store
                    .topics
                    .entry(topic)
                    .or_default()
                    .partitions
                    .values_mut()
                {
                    let end = part.log.len();
                    part.unclaimed_from = end;
                }
            }
            Admin::Delete => {
                if store.topics.remove(&topic).is_none() {
                    return Response::error(404, "TOPIC_NOT_FOUND");
                }
                close_subscribers(&mut store, |sub| sub.topic == topic);
            }
        }
        Response::text("")
    }

    /// Youzan's `/channel/setoffset?topic=&channel=&partition=` with the offset token as body:
    /// moves the channel (creating it) to `special:-1`, `virtual_queue:N` or `timestamp:S`.
    fn set_offset(&self, req: &Request) -> Response {
        let topic = match topic_arg(req) {
            Ok(t) => t,
            Err(r) => return r,
        };
        let Some(channel) = req.query.get("channel").cloned().filter(|c| valid_name(c)) else {
            return Response::error(400, "INVALID_CHANNEL");
        };
        let partition = match partition_arg(req) {
            Ok(p) => p.unwrap_or(0),
            Err(r) => return r,
        };
        let token = String::from_utf8_lossy(&req.body).trim().to_string();
        let Some(offset) = crate::commands::parse_offset_token(&token) else {
            return Response::error(400, "INVALID_OFFSET");
        };
        let mut store = self.0.store();
        let Some(part) = store.partition(&topic, partition) else {
            return Response::error(404, "TOPIC_NOT_FOUND");
        };
        let existed = part.channels.contains_key(&channel);
        let cursor = offset.index_in(part);
        if !(existed && matches!(offset, crate::commands::Offset::Latest)) {
            let owners = part.channel(&channel).reset(cursor);
            store.release_in_flight(owners);
        } else {
            part.channel(&channel);
        }
        Response::text("OK")
    }

    /// The fork's `GET /message/get?topic=&partition=&search_mode=&search_pos=`
    /// (nsqdserver/http.go `doMessageGet`): one stored message found by `count` (its absolute
    /// count index, as `/stats` `message_count` counts), `virtual_offset` (the message whose
    /// bytes cover that offset) or `id` (the message id, the partition being taken from the
    /// id's bits 50..60 and `partition` ignored). Checked in the server's order: `search_pos`
    /// must parse (400), then `partition` unless searching by id (400), then the mode (400);
    /// nothing there is 404.
    fn message_get(&self, req: &Request) -> Response {
        let pos_text = req.query.get("search_pos").map_or("", String::as_str);
        let Ok(pos) = pos_text.parse::<i64>() else {
            return Response::error(
                400,
                &format!("strconv.ParseInt: parsing {pos_text:?}: invalid syntax"),
            );
        };
        let mode = req.query.get("search_mode").map_or("", String::as_str);
        let partition = if mode == "id" {
            // consistence.GetPartitionFromMsgID: the partition sits above bit 50.
            ((pos as u64) >> 50 & 1023) as u32
        } else {
            let text = req.query.get("partition").map_or("", String::as_str);
            match text.parse::<u32>() {
                Ok(p) => p,
                Err(_) => {
                    return Response::error(
                        400,
                        &format!("strconv.Atoi: parsing {text:?}: invalid syntax"),
                    )
                }
            }
        };
        if !matches!(mode, "count" | "id" | "virtual_offset") {
            return Response::error(400, "search mode should be one of id/count/virtual_offset");
        }
        let topic = req.query.get("topic").cloned().unwrap_or_default();
        let mut store = self.0.store();
        let Some(part) = store.partition(&topic, partition) else {
            return Response::error(404, "topic not found");
        };
        let index = match mode {
            "count" => usize::try_from(pos).ok().filter(|i| *i < part.log.len()),
            "virtual_offset" => u64::try_from(pos).ok().and_then(|offset| {
                let i = part
                    .log
                    .partition_point(|m| m.offset + u64::from(m.raw_size) <= offset);
                (i < part.log.len()).then_some(i)
            }),
            _ => part
                .log
                .iter()
                .position(|m| m.id[..8] == (pos as u64).to_be_bytes()),
        };
        let Some(index) = index else {
            return Response::error(404, &format!("search {mode}:{pos}: not found in the log"));
        };
        let stored = &part.log[index];
        let mut id = [0u8; 8];
        id.copy_from_slice(&stored.id[..8]);
        let mut trace = [0u8; 8];
        trace.copy_from_slice(&stored.id[8..]);
        Response::json(&json!({
            "id": u64::from_be_bytes(id),
            "trace_id": u64::from_be_bytes(trace),
            "body": String::from_utf8_lossy(&stored.body),
            "timestamp": stored.timestamp,
            "attempts": 0,
            "offset": stored.offset,
            "queue_cnt_index": index,
            "ext": "",
        }))
    }

    fn channel(&self, req: &Request, action: Admin) -> Response {
        let topic = match topic_arg(req) {
            Ok(t) => t,
            Err(r) => return r,
        };
        let Some(channel) = req.query.get("channel").cloned() else {
            return Response::error(400, "MISSING_ARG_CHANNEL");
        };
        if !valid_name(&channel) {
            return Response::error(400, "INVALID_CHANNEL");
        }
        let mut store = self.0.store();
        let Some(t) = store.topics.get_mut(&topic) else {
            return Response::error(404, "TOPIC_NOT_FOUND");
        };
        match action {
            Admin::Create => {
                for part in t.partitions.values_mut() {
                    part.channel(&channel);
                }
            }
            Admin::Empty => {
                let mut found = false;
                let mut owners = Vec::new();
                for part in t.partitions.values_mut() {
                    let end = part.log.len();
                    if let Some(c) = part.channels.get_mut(&channel) {
                        owners.extend(c.reset(end));
                        found = true;
                    }
                }
                if !found {
                    return Response::error(404, "CHANNEL_NOT_FOUND");
                }
                store.release_in_flight(owners);
            }
            Admin::Delete => {
                let mut found = false;
                for part in t.partitions.values_mut() {
                    found |= part.channels.remove(&channel).is_some();
                    if part.channels.is_empty() {
                        part.unclaimed_from = part.log.len();
                    }
                }
                if !found {
                    return Response::error(404, "CHANNEL_NOT_FOUND");
                }
                close_subscribers(&mut store, |sub| {
                    sub.topic == topic && sub.channel == channel
                });
            }
        }
        Response::text("")
    }
}

/// nsqd closes the connections of a deleted topic's or channel's clients.
pub(crate) fn close_subscribers(
    store: &mut Store,
    matches: impl Fn(&crate::store::SubKey) -> bool,
) {
    let doomed: Vec<u64> = store
        .clients
        .iter()
        .filter(|(_, c)| c.sub.as_ref().is_some_and(&matches))
        .map(|(id, _)| *id)
        .collect();
    for id in doomed {
        if let Some(client) = store.clients.remove(&id) {
            client.closer.notify_one();
        }
    }
}

/// The partition to publish to: upstream always 0 (created on demand); Youzan needs it to exist.
fn resolve(
    store: &mut Store,
    topic: &str,
    partition: Option<u32>,
    extensions: bool,
) -> Option<u32> {
    if !extensions {
        store
            .topics
            .entry(topic.to_string())
            .or_default()
            .partitions
            .entry(0)
            .or_default();
        return Some(0);
    }
    let t = store.topics.get(topic)?;
    match partition {
        Some(p) => t.partitions.contains_key(&p).then_some(p),
        None => t.partitions.keys().next().copied(),
    }
}

fn binary_mpub(body: &[u8]) -> Option<Vec<Bytes>> {
    let count = u32::from_be_bytes(body.get(..4)?.try_into().ok()?);
    let mut rest = &body[4..];
    let mut out = Vec::new();
    for _ in 0..count {
        let len = u32::from_be_bytes(rest.get(..4)?.try_into().ok()?) as usize;
        let msg = rest.get(4..4 + len)?;
        if msg.is_empty() {
            return None;
        }
        out.push(Bytes::copy_from_slice(msg));
        rest = &rest[4 + len..];
    }
    rest.is_empty().then_some(out)
}

/// `/stats?format=json` in nsqd's shape (one entry per partition, with `topic_partition`, in
/// partitions mode).
fn stats(shared: &Shared, req: &Request) -> Value {
    let store = shared.store();
    let only = req.query.get("topic");
    let mut topics = Vec::new();
    for (name, topic) in &store.topics {
        if only.is_some_and(|t| t != name) {
            continue;
        }
        for (pid, part) in &topic.partitions {
            let channels: Vec<Value> = part
                .channels
                .iter()
                .map(|(cname, ch)| {
                    let clients: Vec<Value> = ch
                        .clients
                        .iter()
                        .filter_map(|id| store.clients.get(id))
                        .map(|c| {
                            json!({
                                "ready_count": c.rdy,
                                "in_flight_count": c.in_flight,
                                "message_count": c.message_count,
                                "finish_count": c.finish_count,
                                "requeue_count": c.requeue_count,
                                "user_agent": c.user_agent,
                            })
                        })
                        .collect();
                    let mut entry = json!({
                        "channel_name": cname,
                        "depth": ch.depth(part.log.len()),
                        "backend_depth": 0,
                        "in_flight_count": ch.in_flight.len(),
                        "deferred_count": 0,
                        "message_count": ch.message_count,
                        "requeue_count": ch.requeue_count,
                        "timeout_count": ch.timeout_count,
                        "client_count": ch.clients.len(),
                        "clients": clients,
                        "paused": false,
                    });
                    if shared.options.extensions.partitions() {
                        let confirmed = ch.confirmed_offset(&part.log, part.next_offset);
                        entry["depth_size"] = json!(part.next_offset - confirmed);
                    }
                    entry
                })
                .collect();
            let depth = if part.channels.is_empty() {
                part.log.len().saturating_sub(part.unclaimed_from)
            } else {
                0
            };
            let mut entry = json!({
                "topic_name": name,
                "channels": channels,
                "depth": depth,
                "backend_depth": 0,
                // Every message ever written to the partition: the next count index of
                // `/message/get?search_mode=count`.
                "message_count": part.log.len(),
                "paused": false,
            });
            if shared.options.extensions.partitions() {
                // The fork reports the partition's end offset here (`TotalDataSize`), and a
                // channel's `depth_size` as that end minus its confirmed offset.
                entry["backend_depth"] = json!(part.next_offset);
                entry["topic_partition"] = json!(pid.to_string());
                entry["topic_full_name"] = json!(format!("{name}-{pid}"));
            }
            topics.push(entry);
        }
    }
    json!({
        "version": shared.options.extensions.version(),
        "health": "OK",
        "start_time": 0,
        "topics": topics,
        "producers": [],
    })
}
