//! The admin page's eyes: a task that looks at the backend once a second through the mq traits
//! only (list channels, list subscriptions with lag, non-durable readers), so every backend
//! shows up without page changes and the page never creates a group or moves one.
//!
//! Each channel gets a reader from its earliest message; what it reads gives the newest id, a
//! count for the produce rate, and the last timetick for the timetick view. A backend without
//! readers gets none of these, and the state says so.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use msgstream_facade::msgstream::mq::{Client, Reader, ReaderOptions};
use msgstream_facade::msgstream::msg::{MsgHeader, MsgType};
use msgstream_facade::msgstream::Error as StreamError;
use opentelemetry::metrics::Gauge;
use opentelemetry::KeyValue;
use prost::Message as _;

use super::checkpoints::{Checkpoints, EVERY};
use super::state::{Channel, Known, State, Subscription};
use crate::commands::short_id;

/// At most this many messages are read from one channel per look, so a huge backlog is caught
/// up over several looks instead of stalling the page.
const READ_PER_LOOK: u64 = 20_000;

/// One channel's reader and what it has read.
struct Cursor {
    reader: Box<dyn Reader>,
    read: u64,
    newest: Option<String>,
    last_tick: Option<u64>,
}

/// The looking task's state: the backend, the readers, and where looks are recorded.
pub struct Watcher {
    client: Arc<dyn Client>,
    cursors: HashMap<String, Cursor>,
    state: Arc<RwLock<State>>,
    checkpoints: Arc<Checkpoints>,
    gauges: Gauges,
}

/// What the page sees, also exported on `/metrics`, so a Prometheus scraping the admin server
/// gets the backend's lag and ticks, not only the admin process's own instruments.
struct Gauges {
    lag: Gauge<u64>,
    last_tick: Gauge<u64>,
    read: Gauge<u64>,
}

impl Gauges {
    fn new() -> Self {
        let meter = opentelemetry::global::meter("msgstream-admin");
        Gauges {
            lag: meter
                .u64_gauge("msgstream.admin.subscription_lag")
                .with_description("Messages after a subscription's acked position")
                .build(),
            last_tick: meter
                .u64_gauge("msgstream.admin.last_tick")
                .with_description("Last timetick read from a channel")
                .build(),
            read: meter
                .u64_gauge("msgstream.admin.messages_read")
                .with_description("Messages the admin page read from a channel")
                .build(),
        }
    }

    /// Records every value known; what is unavailable is left out, not set to zero.
    fn record(&self, channels: &Known<BTreeMap<String, Channel>>) {
        let Known::Value(channels) = channels else {
            return;
        };
        for (name, channel) in channels {
            let attrs = [KeyValue::new("channel", name.clone())];
            if let Some(tick) = channel.last_tick {
                self.last_tick.record(tick, &attrs);
            }
            if let Some(read) = channel.messages_read {
                self.read.record(read, &attrs);
            }
            for sub in channel.subscriptions.value().into_iter().flatten() {
                if let Some(lag) = sub.lag.value() {
                    let attrs = [
                        attrs[0].clone(),
                        KeyValue::new("subscription", sub.name.clone()),
                    ];
                    self.lag.record(*lag, &attrs);
                }
            }
        }
    }
}

impl Watcher {
    /// A watcher recording into `state`, noting the ids its readers pass in `checkpoints`.
    pub fn new(
        client: Arc<dyn Client>,
        state: Arc<RwLock<State>>,
        checkpoints: Arc<Checkpoints>,
    ) -> Self {
        Watcher {
            client,
            cursors: HashMap::new(),
            state,
            checkpoints,
            gauges: Gauges::new(),
        }
    }

    /// Looks once and records what it saw. The server looks once before it answers, so its
    /// first page already shows the backend as it is.
    pub async fn look_once(&mut self) {
        let channels = look(self.client.as_ref(), &mut self.cursors, &self.checkpoints).await;
        self.gauges.record(&channels);
        let at_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        if let Ok(mut state) = self.state.write() {
            state.record(at_ms, channels);
        }
    }

    /// Looks every `every` until the task is dropped.
    pub async fn run(mut self, every: Duration) {
        let mut ticker = tokio::time::interval(every);
        ticker.tick().await; // The first tick is immediate; look_once did that one.
        loop {
            ticker.tick().await;
            self.look_once().await;
        }
    }
}

/// Why something cannot be shown: `Unsupported` is the backend's limit, anything else an error.
pub fn unavailable(backend: &str, error: &StreamError) -> String {
    match error {
        StreamError::Unsupported { .. } => format!("not available from {backend}"),
        other => format!("error from {backend}: {other}"),
    }
}

async fn look(
    client: &dyn Client,
    cursors: &mut HashMap<String, Cursor>,
    checkpoints: &Checkpoints,
) -> Known<BTreeMap<String, Channel>> {
    let backend = client.backend_name();
    let topics = match client.list_topics().await {
        Ok(topics) => topics,
        Err(e) => return Known::Unavailable(unavailable(backend, &e)),
    };
    cursors.retain(|name, _| topics.contains(name));
    checkpoints.retain(&topics);
    let readers = client.capabilities().readers;
    let mut channels = BTreeMap::new();
    for topic in topics {
        let mut channel = Channel {
            subscriptions: match client.list_subscriptions(&topic).await {
                Ok(subs) => Known::Value(
                    subs.into_iter()
                        .map(|s| Subscription {
                            lag: s.lag.map_or_else(
                                || Known::Unavailable(format!("not available from {backend}")),
                                Known::Value,
                            ),
                            name: s.name,
                        })
                        .collect(),
                ),
                Err(e) => Known::Unavailable(unavailable(backend, &e)),
            },
            size_bytes: match client.topic_size_bytes(&topic).await {
                Ok(bytes) => Known::Value(bytes),
                Err(e) => Known::Unavailable(unavailable(backend, &e)),
            },
            ..Channel::default()
        };
        if !readers {
            channel.newest_id = Known::Unavailable(format!("not available from {backend}"));
            channels.insert(topic, channel);
            continue;
        }
        match read_more(client, cursors, checkpoints, &topic).await {
            Ok(cursor) => {
                channel.newest_id = cursor
                    .newest
                    .clone()
                    .map_or_else(|| Known::Unavailable("empty".to_string()), Known::Value);
                channel.messages_read = Some(cursor.read);
                channel.last_tick = cursor.last_tick;
            }
            Err(e) => {
                // A reader that failed (its channel was deleted and made again) starts over.
                cursors.remove(&topic);
                channel.newest_id = Known::Unavailable(unavailable(backend, &e));
            }
        }
        channels.insert(topic, channel);
    }
    Known::Value(channels)
}

/// Reads what `topic` has beyond what was read before, without waiting for more; every
/// [`EVERY`]-th id read becomes a checkpoint.
async fn read_more<'a>(
    client: &dyn Client,
    cursors: &'a mut HashMap<String, Cursor>,
    checkpoints: &Checkpoints,
    topic: &str,
) -> Result<&'a Cursor, StreamError> {
    if !cursors.contains_key(topic) {
        checkpoints.restart(topic);
        let reader = client
            .create_reader(ReaderOptions {
                topic: topic.to_string(),
                start: client.earliest_message_id(),
                inclusive: true,
            })
            .await?;
        let cursor = Cursor {
            reader,
            read: 0,
            newest: None,
            last_tick: None,
        };
        cursors.insert(topic.to_string(), cursor);
    }
    let cursor = cursors
        .get_mut(topic)
        .ok_or_else(|| StreamError::InvalidArgument(format!("no reader for {topic}")))?;
    let mut this_look = 0;
    let mut passed = Vec::new();
    while this_look < READ_PER_LOOK && cursor.reader.has_next().await? {
        let msg = cursor.reader.next().await?;
        this_look += 1;
        cursor.read += 1;
        if cursor.read.is_multiple_of(EVERY) {
            passed.push(msg.id.clone());
        }
        cursor.newest = Some(short_id(msg.id.as_bytes()));
        if let Some(base) = MsgHeader::decode(msg.payload.as_ref())
            .ok()
            .and_then(|h| h.base)
        {
            if base.msg_type == MsgType::TimeTick as i32 {
                cursor.last_tick = Some(base.timestamp);
            }
        }
    }
    checkpoints.extend(topic, passed);
    Ok(cursor)
}
