//! `/stats?format=json` in nsqd 1.3.0's shape (U2, U3, U5): topics with their channels and
//! clients, and the producers (connections that published). With `topic=` (and `channel=`)
//! only that topic (channel) and the producers that published to it are listed; an empty
//! list is `null`, as Go encodes a nil slice. (The Youzan modes answer in the fork's shape,
//! `stats_youzan`.)

use std::time::Instant;

use serde_json::{json, Value};

use crate::http::Request;
use crate::store::{Channel, Partition, Store};
use crate::Shared;

/// The `/stats` reply.
pub(crate) fn stats(shared: &Shared, req: &Request) -> Value {
    let store = shared.store();
    let now = Instant::now();
    let only_topic = req.query.get("topic");
    let only_channel = req.query.get("channel");
    let mut topics = Vec::new();
    for (name, topic) in &store.topics {
        if only_topic.is_some_and(|t| t != name) {
            continue;
        }
        for part in topic.partitions.values() {
            let channels: Vec<Value> = part
                .channels
                .iter()
                .filter(|(cname, _)| only_channel.is_none_or(|c| c == *cname))
                .map(|(cname, ch)| channel(&store, part, cname, ch, now))
                .collect();
            let depth = if part.channels.is_empty() {
                part.log.len().saturating_sub(part.unclaimed_from)
            } else {
                0
            };
            topics.push(json!({
                "topic_name": name,
                "channels": channels,
                "depth": depth,
                "backend_depth": 0,
                // Every message ever written to the partition: the next count index of
                // `/message/get?search_mode=count`.
                "message_count": part.log.len(),
                "message_bytes": part.log.iter().map(|m| m.body.len()).sum::<usize>(),
                "paused": topic.paused,
                "e2e_processing_latency": latency(),
            }));
        }
    }
    let producers: Vec<Value> = store
        .connections
        .iter()
        .filter(|(_, c)| match only_topic {
            Some(t) => c.pub_counts.contains_key(t),
            None => !c.pub_counts.is_empty(),
        })
        .map(|(_, c)| c.stats(None))
        .collect();
    json!({
        "version": shared.options.extensions.version(),
        "health": "OK",
        "start_time": shared.start_time,
        "topics": nil_if_empty(topics),
        "memory": memory(),
        "producers": nil_if_empty(producers),
    })
}

fn channel(store: &Store, part: &Partition, name: &str, ch: &Channel, now: Instant) -> Value {
    let clients: Vec<Value> = ch
        .clients
        .iter()
        .filter_map(|id| {
            let connection = store.connections.get(id)?;
            Some(connection.stats(store.clients.get(id)))
        })
        .collect();
    let (depth, deferred) = ch.depth(&part.log, now);
    json!({
        "channel_name": name,
        "depth": depth,
        "backend_depth": 0,
        "in_flight_count": ch.in_flight.len(),
        "deferred_count": deferred,
        "message_count": part.log.len().saturating_sub(ch.first),
        "requeue_count": ch.requeue_count,
        "timeout_count": ch.timeout_count,
        "client_count": ch.clients.len(),
        "clients": clients,
        "paused": ch.paused,
        "e2e_processing_latency": latency(),
    })
}

/// No end-to-end latency tracking (nsqd's default, `--e2e-processing-latency-percentile` unset).
fn latency() -> Value {
    json!({ "count": 0, "percentiles": null })
}

/// nsqd's Go heap figures; a test server has none worth reporting, so all zero.
fn memory() -> Value {
    json!({
        "heap_objects": 0,
        "heap_idle_bytes": 0,
        "heap_in_use_bytes": 0,
        "heap_released_bytes": 0,
        "gc_pause_usec_100": 0,
        "gc_pause_usec_99": 0,
        "gc_pause_usec_95": 0,
        "next_gc_bytes": 0,
        "gc_total_runs": 0,
    })
}

fn nil_if_empty(items: Vec<Value>) -> Value {
    if items.is_empty() {
        Value::Null
    } else {
        Value::Array(items)
    }
}
