//! nsqd's HTTP API: `/ping`, `/info`, `/pub`, `/mpub`, `/stats`, topic and channel
//! create/delete, with nsqd's error codes; with the extensions also the fork's
//! `/channel/setoffset` and `/message/get`.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::json;

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
        // A Youzan nsqd has no HTTP topic create, with or without the coordinator (Y1 29,
        // Y8 20): INTERNAL_CREATE_TOPIC or the lookupd create topics.
        if self.0.options.extensions.partitions() && req.path == "/topic/create" {
            return Response::error(404, "NOT_FOUND");
        }
        match (req.path.as_str(), post) {
            ("/ping", _) => Response::text("OK"),
            // The fork's /info is wrapped and says whether the coordinator runs (Y8 4).
            ("/info", _) if self.0.options.extensions.partitions() => crate::http::wrapped_ok(
                &req,
                json!({
                    "version": self.0.options.extensions.version(),
                    "broadcast_address": "127.0.0.1",
                    "hostname": "testd",
                    "http_port": self.0.http_addr.port(),
                    "tcp_port": self.0.tcp_addr.port(),
                    "start_time": self.0.start_time,
                    "ha_support": self.0.cluster.is_some(),
                }),
            ),
            ("/info", _) => Response::json(&json!({
                "version": self.0.options.extensions.version(),
                "broadcast_address": "127.0.0.1",
                "hostname": "testd",
                "http_port": self.0.http_addr.port(),
                "tcp_port": self.0.tcp_addr.port(),
                "start_time": self.0.start_time,
                // nsqd's limits for what a client may negotiate (durations in nanoseconds).
                "max_heartbeat_interval": 60_000_000_000u64,
                "max_output_buffer_size": 65536,
                "max_output_buffer_timeout": 30_000_000_000u64,
                "max_deflate_level": 6,
            })),
            ("/stats", _) if self.0.options.extensions.partitions() => {
                crate::stats_youzan::stats(&self.0, &req)
            }
            ("/stats", _) => Response::json(&crate::stats::stats(&self.0, &req)),
            ("/pub", true) => self.publish(&req, false),
            ("/mpub", true) => self.publish(&req, true),
            ("/topic/create", true) => self.topic(&req, Admin::Create),
            ("/topic/delete", true) => self.topic(&req, Admin::Delete),
            ("/channel/create", true) => self.channel(&req, Admin::Create),
            ("/channel/delete", true) => self.channel(&req, Admin::Delete),
            ("/channel/empty", true) => self.channel(&req, Admin::Empty),
            ("/topic/empty", true) => self.topic(&req, Admin::Empty),
            ("/topic/pause", true) => self.topic(&req, Admin::Pause(true)),
            ("/topic/unpause", true) => self.topic(&req, Admin::Pause(false)),
            ("/channel/pause", true) => self.channel(&req, Admin::Pause(true)),
            ("/channel/unpause", true) => self.channel(&req, Admin::Pause(false)),
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
    Pause(bool),
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
                return if self.0.options.extensions.partitions() {
                    crate::http::wrapped_error(req, 406, "MSG_EMPTY")
                } else {
                    Response::error(400, "MSG_EMPTY")
                };
            }
            vec![Bytes::copy_from_slice(&req.body)]
        } else if req.query.get("binary").is_some_and(|b| b == "true") {
            let opts = &self.0.options;
            match binary_mpub(&req.body, opts.max_msg_size, opts.max_body_size) {
                Ok(b) => b,
                Err(code) => return Response::error(413, code),
            }
        } else {
            // Text mode: one message per line, empty lines skipped; an empty body is a batch
            // of none, answered `OK` (U5 44-48).
            req.body
                .split(|b| *b == b'\n')
                .filter(|m| !m.is_empty())
                .map(Bytes::copy_from_slice)
                .collect()
        };
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
                // The fork's words, wrapped (Y8 16-18).
                None if self.0.options.extensions.partitions() => {
                    return crate::http::wrapped_error(req, 404, "E_TOPIC_NOT_EXIST")
                }
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
            Admin::Pause(paused) => {
                let Some(t) = store.topics.get_mut(&topic) else {
                    return Response::error(404, "TOPIC_NOT_FOUND");
                };
                t.paused = paused;
                store.pump(std::time::Instant::now());
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
    /// moves the channel (creating it) to `special:-1`, `virtual_queue:N` or `timestamp:S`;
    /// without the coordinator only to `special:-1` (500 otherwise, Y8 72-79).
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
        let offset = match offset_refusal(&token) {
            Some(refusal) => return refusal,
            None => crate::commands::parse_offset_token(&token),
        };
        let Some(offset) = offset else {
            return Response::error(400, &format!("invalid consume offset:{token}"));
        };
        let mut store = self.0.store();
        let Some(part) = store.partition(&topic, partition) else {
            return Response::error(404, "TOPIC_NOT_FOUND");
        };
        if self.0.cluster.is_none() && !offset.served_standalone() {
            return Response::error(500, crate::commands::NO_COORDINATOR);
        }
        // `special:-1` on an existing channel of a standalone nsqd delivers what is left
        // (notes §2.6.3) but forgets what is in flight, unrequeued (Y8 146: `golden_c`'s
        // unfinished message gone, `requeue_count` 0 after its consumer closed); with the
        // coordinator it moves the channel to the end.
        let keep = part.channels.contains_key(&channel)
            && matches!(offset, crate::commands::Offset::Latest)
            && !part.channels_start_at_end;
        let cursor = offset.index_in(part);
        let existed = part.channels.contains_key(&channel);
        part.channel(&channel);
        let crate::store::Partition { log, channels, .. } = part;
        let owners = match channels.get_mut(&channel) {
            Some(c) if existed && !keep => c.rewind(cursor, log, std::time::Instant::now()),
            Some(c) if !keep => c.reset(cursor),
            Some(c) => c.forget_in_flight(),
            _ => Vec::new(),
        };
        store.release_in_flight(owners);
        Response::text("")
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
            return Response::error(400, "INVALID_ARG_CHANNEL");
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
            Admin::Pause(paused) => {
                let mut found = false;
                for part in t.partitions.values_mut() {
                    if let Some(c) = part.channels.get_mut(&channel) {
                        c.paused = paused;
                        found = true;
                    }
                }
                if !found {
                    return Response::error(404, "CHANNEL_NOT_FOUND");
                }
                store.pump(std::time::Instant::now());
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

/// The fork's refusals of a setoffset body, in its words (Y6 319-323).
fn offset_refusal(token: &str) -> Option<Response> {
    let unknown = || Response::error(400, &format!("invalid consume offset:{token}"));
    let Some((kind, value)) = token.split_once(':') else {
        return Some(unknown());
    };
    if !matches!(kind, "virtual_queue" | "msgcount" | "timestamp" | "special") {
        return Some(unknown());
    }
    let Ok(number) = value.parse::<i64>() else {
        // The fork writes this message into its JSON unescaped: the quotes stay bare.
        return Some(Response {
            status: 400,
            json: true,
            body: format!(r#"{{"message":"strconv.ParseInt: parsing "{value}": invalid syntax"}}"#)
                .into_bytes(),
        });
    };
    (kind == "timestamp" && number < 0)
        .then(|| Response::error(500, &format!("Invalid timestamp {number}")))
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

/// A binary `/mpub` body, `[u32 count]([u32 size][msg])*`, read as nsqd's `readMPUB` reads it;
/// an error is the code nsqd answers with 413 (its TCP code without `E_`).
fn binary_mpub(body: &[u8], max_msg: usize, max_body: usize) -> Result<Vec<Bytes>, &'static str> {
    let word = |at: usize| {
        body.get(at..at + 4)
            .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    };
    let count = word(0).ok_or("BAD_BODY")?;
    if count <= 0 || count as usize > max_body.saturating_sub(4) / 5 {
        return Err("BAD_BODY");
    }
    let mut at = 4;
    let mut out = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let len = word(at).ok_or("BAD_MESSAGE")?;
        if len <= 0 || len as usize > max_msg {
            return Err("BAD_MESSAGE");
        }
        let msg = body
            .get(at + 4..at + 4 + len as usize)
            .ok_or("BAD_MESSAGE")?;
        out.push(Bytes::copy_from_slice(msg));
        at += 4 + len as usize;
    }
    Ok(out)
}
