//! `/stats?format=json` in the Youzan fork's shape (Y1 100, Y3 147-149, Y4 31/84/271, Y5 73,
//! Y6 428, Y7 13/42, Y8 146): wrapped in `status_code`/`data` unless the client asked for bare
//! JSON; one entry per partition, sorted by topic and partition, with `topic=`, `partition=`
//! and `channel=` narrowing what is listed; empty lists are `[]`; no `memory` or `producers`.
//!
//! Values follow from the server's state. Where the fork's meaning is not spelled out, the
//! rule is the one every recorded state agrees with:
//! * topic `depth` and `backend_depth`: the partition's end offset in bytes (Y1 100: 41 for
//!   one 11-byte message); `backend_start` 0 (nothing is ever truncated here).
//! * channel `depth` (and `backend_depth`): messages from the confirmed position (the first
//!   one not finished) to the end, including ones finished out of order after it; `depth_size`
//!   the same in bytes.
//! * channel `backlogs`: `depth` minus what the fork's channel reader already took off the
//!   log: the messages in flight or waiting to go out again, plus one it reads ahead and holds
//!   for the next consumer whenever something is unread, except on an ordered channel (Y4 271:
//!   `golden_c` 3 of 4 with nothing in flight, `golden_c3` 21 of 23 with one requeued message,
//!   the ordered `golden_c5` 4 of 4; Y8 146 likewise).
//! * `depth_ts_nano` (and `depth_ts`, Go's rendering of it): the timestamp of the newest
//!   message the channel confirmed, 0 if it confirmed none (Y4 271 `golden_c7`). The fork
//!   also shows a time for a channel that never delivered anything (Y4 271 `golden_c5`); the
//!   transcripts' README names `depth_ts*` as varying, so only its presence is compared.
//! * `pub_failed_cnt`: PUBs refused with `E_FAILED_ON_NOT_LEADER` for the partition on this
//!   node (Y1 100: 5 refused probes).
//! * `client_pub_stats`: the open TCP connections that published to the partition (HTTP
//!   publishers are not listed, Y3 147), `pub_count` in messages; `err_count` 0 (the fork
//!   counts failed storage writes, which an in-memory log does not have).
//! * `hourly_pubsize`, `hourly_subsize`: 0 (the fork fills them from an hourly scan; every
//!   recording shows 0); delayed-queue fields: empty (no delayed queue here).
//! * per client `limited_rdy` 50000 and `ext_filter` `{}`: what the fork reports for every
//!   client in the recordings; `output_buffer_timeout` and `msg_timeout` in nanoseconds.
//!
//! The histograms are described in [`crate::histogram`].

use std::collections::BTreeMap;
use std::time::Instant;

use serde_json::{json, Value};

use crate::cluster::{Access, TopicMeta};
use crate::connections::Connection;
use crate::http::{Request, Response};
use crate::store::{Channel, ClientState, Partition, Store};
use crate::Shared;

/// `delayed_queue_recent` of a channel without delayed messages: Go's zero Unix time.
const NO_TIME: &str = "1970-01-01 00:00:00 +0000 UTC";

/// What the fork reports as every client's `limited_rdy`.
const LIMITED_RDY: u32 = 50_000;

/// The `/stats` reply, wrapped as the fork wraps it.
pub(crate) fn stats(shared: &Shared, req: &Request) -> Response {
    let metas: BTreeMap<String, TopicMeta> = shared
        .cluster
        .as_ref()
        .map(crate::cluster::ClusterNode::metas)
        .unwrap_or_default();
    let only_topic = req.query.get("topic");
    let only_partition = req
        .query
        .get("partition")
        .and_then(|p| p.parse::<u32>().ok());
    let only_channel = req.query.get("channel");
    let store = shared.store();
    let now = Instant::now();
    let mut topics = Vec::new();
    for (name, topic) in &store.topics {
        if only_topic.is_some_and(|t| t != name) {
            continue;
        }
        let meta = metas.get(name);
        for (pid, part) in &topic.partitions {
            if only_partition.is_some_and(|p| p != *pid) {
                continue;
            }
            let channels: Vec<Value> = part
                .channels
                .iter()
                .filter(|(cname, _)| only_channel.is_none_or(|c| c == *cname))
                .map(|(cname, ch)| channel(&store, part, cname, ch, now))
                .collect();
            let is_leader = shared
                .cluster
                .as_ref()
                .is_none_or(|c| c.access(name, *pid) == Access::Leader);
            let publishers = publishers(&store, name, *pid);
            let ordered = meta.is_some_and(|m| m.ordered);
            topics.push(json!({
                "topic_name": name,
                "topic_full_name": format!("{name}-{pid}"),
                "topic_partition": pid.to_string(),
                "channels": channels,
                "channel_num": part.channels.len(),
                "depth": part.next_offset,
                "backend_depth": part.next_offset,
                "backend_start": 0,
                "message_count": part.log.len(),
                "is_leader": is_leader,
                "hourly_pubsize": 0,
                "client_num": publishers.len(),
                "client_pub_stats": publishers,
                "msg_size_stats": part.writes.sizes,
                "msg_write_latency_stats": part.writes.latencies,
                "is_multi_ordered": ordered,
                "is_multi_part": meta.is_some_and(|m| m.multi_part),
                "is_ext": meta.is_some_and(|m| m.ext),
                "is_channel_auto_create_disabled": false,
                "statsd_name": if ordered { format!("{name}.{pid}") } else { name.clone() },
                "pub_failed_cnt": store.pub_refused.get(&(name.clone(), *pid)).copied().unwrap_or(0),
                "e2e_processing_latency": no_e2e(),
            }));
        }
    }
    crate::http::wrapped_ok(
        req,
        json!({
            "version": shared.options.extensions.version(),
            "health": "OK",
            "start_time": shared.start_time,
            "topics": topics,
        }),
    )
}

/// `client_pub_stats`: the open connections that published to `partition` of `topic`.
fn publishers(store: &Store, topic: &str, partition: u32) -> Vec<Value> {
    let key = (topic.to_string(), partition);
    store
        .connections
        .values()
        .filter_map(|c| {
            let pubs = c.partition_pubs.get(&key)?;
            Some(json!({
                "remote_address": c.remote.to_string(),
                "user_agent": c.user_agent,
                "protocol": "tcp",
                "pub_count": pubs.count,
                "err_count": 0,
                "last_pub_ts": pubs.last,
            }))
        })
        .collect()
}

fn channel(store: &Store, part: &Partition, name: &str, ch: &Channel, now: Instant) -> Value {
    let clients: Vec<Value> = ch
        .clients
        .iter()
        .filter_map(|id| Some(client(store.connections.get(id)?, store.clients.get(id)?)))
        .collect();
    let confirmed = ch.confirmed_index();
    let depth = part.log.len().saturating_sub(confirmed);
    let read_ahead = usize::from(!ch.ordered && ch.unread(&part.log) > 0);
    let backlogs = depth.saturating_sub(ch.read_unfinished() + read_ahead);
    let confirmed_offset = ch.confirmed_offset(&part.log, part.next_offset);
    let depth_ts = confirmed
        .checked_sub(1)
        .filter(|last| *last >= ch.first)
        .and_then(|last| part.log.get(last))
        .map_or(0, |m| m.timestamp);
    let (_, deferred) = ch.depth(&part.log, now);
    json!({
        "channel_name": name,
        "backlogs": backlogs,
        "depth": depth,
        "depth_size": part.next_offset - confirmed_offset,
        "depth_ts": go_time(depth_ts),
        "depth_ts_nano": depth_ts,
        "backend_depth": depth,
        "hourly_subsize": 0,
        "in_flight_count": ch.in_flight.len(),
        "deferred_count": deferred,
        "deferred_from_delay_count": 0,
        "message_count": part.log.len(),
        "requeue_count": ch.requeue_count,
        "timeout_count": ch.timeout_count,
        "client_num": clients.len(),
        "clients": clients,
        "paused": ch.paused,
        "skipped": false,
        "zan_test_skipped": false,
        "delayed_queue_count": 0,
        "delayed_queue_recent": NO_TIME,
        "delayed_queue_recent_nano": 0,
        "e2e_processing_latency": no_e2e(),
        "msg_consume_latency_stats": ch.latencies.consume,
        "msg_delivery_latency_stats": ch.latencies.delivery,
    })
}

/// One subscribed client, as the fork's `ClientStats`.
fn client(connection: &Connection, state: &ClientState) -> Value {
    const SUBSCRIBED: u8 = 3;
    const CLOSING: u8 = 4;
    let (buffer_size, buffer_timeout_ms) = connection.output_buffer;
    json!({
        "name": connection.client_id,
        "client_id": connection.client_id,
        "hostname": connection.hostname,
        "version": "V2",
        "remote_address": connection.remote.to_string(),
        "state": if state.closing { CLOSING } else { SUBSCRIBED },
        "ready_count": state.rdy,
        "in_flight_count": state.in_flight,
        "message_count": state.message_count,
        "finish_count": state.finish_count,
        "requeue_count": state.requeue_count,
        "timeout_count": state.timeout_count,
        "deferred_count": 0,
        "connect_ts": connection.connect_ts,
        "sample_rate": 0,
        "deflate": false,
        "snappy": false,
        "user_agent": connection.user_agent,
        "desired_tag": "",
        "tls": false,
        "tls_cipher_suite": "",
        "tls_version": "",
        "tls_negotiated_protocol": "",
        "tls_negotiated_protocol_is_mutual": false,
        "output_buffer_size": buffer_size,
        "output_buffer_timeout": u64::from(buffer_timeout_ms) * 1_000_000,
        "msg_timeout": u64::try_from(state.msg_timeout.as_nanos()).unwrap_or(u64::MAX),
        "ext_filter": {},
        "limited_rdy": LIMITED_RDY,
    })
}

/// No end-to-end latency tracking (the fork's default).
fn no_e2e() -> Value {
    json!({ "count": 0, "percentiles": null })
}

/// Nanoseconds since the epoch as Go's `time.Time.String()` renders them in UTC:
/// `2026-12-04 23:59:59.123456789 +0000 UTC` (the fraction without trailing zeros, none when
/// zero).
fn go_time(nanos: i64) -> String {
    let secs = nanos.div_euclid(1_000_000_000);
    let frac = nanos.rem_euclid(1_000_000_000);
    let days = secs.div_euclid(86_400);
    let of_day = secs.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    let mut out = format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}",
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60
    );
    if frac != 0 {
        let digits = format!("{frac:09}");
        out.push('.');
        out.push_str(digits.trim_end_matches('0'));
    }
    out.push_str(" +0000 UTC");
    out
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (H. Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_renders_times_in_utc_without_trailing_zeros() {
        assert_eq!(go_time(0), NO_TIME);
        assert_eq!(
            go_time(1_764_892_799_123_400_000),
            "2025-12-04 23:59:59.1234 +0000 UTC"
        );
        assert_eq!(
            go_time(951_782_400_000_000_000),
            "2000-02-29 00:00:00 +0000 UTC"
        );
    }
}
