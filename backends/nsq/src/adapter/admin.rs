//! What the adapter asks nsqd's HTTP API: `/stats` for listings, lag, whether a channel
//! exists and a partition's end, the fork's `/message/get` for the newest message's offset, and
//! `/topic/delete`, `/channel/delete`, `/channel/empty`, `/channel/setoffset`; and what it asks
//! nsqlookupd: which nsqd holds the configured partition of a topic.

use std::time::Duration;

use msgstream::{Error, Result};
use serde_json::Value;

use super::{map_err, Position, BACKEND};
use crate::codec::ConsumeOffset;
use crate::{http, lookup};

const TIMEOUT: Duration = Duration::from_secs(10);

/// Rounds of `/stats` → `/message/get` → `/stats` before `latest` gives up on a partition that
/// grows under every attempt.
const LATEST_ATTEMPTS: usize = 20;

/// The HTTP addresses of the configured nsqds.
#[derive(Debug, Clone)]
pub(crate) struct Admin {
    pub http: Vec<String>,
    /// Only this partition's entries count (extensions on).
    pub partition: Option<u32>,
    /// nsqlookupd HTTP addresses. With them (and partitions) a partition's own calls go to the
    /// nsqd lookupd names for it, which need not be among the configured ones.
    pub lookupd: Vec<String>,
    /// Coordinator mode (a Youzan cluster): a partition's calls go to its leader only (a
    /// follower refuses them with `E_FAILED_ON_NOT_LEADER`).
    pub coordinator: bool,
}

/// The nsqd that holds the configured partition of a topic, as lookupd names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Node {
    /// `host:port` of its TCP protocol.
    pub tcp: String,
    /// `host:port` of its HTTP API.
    pub http: String,
}

/// A partition's figures from one `/stats` reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PartitionStats {
    /// Messages ever written: the next count index.
    count: u64,
    /// The end offset: where the next message will be written.
    end: u64,
}

/// The JSON of a reply, unwrapped from `{"status_code","data"}` when an older server wraps it.
fn json_reply(addr: &str, what: &str, body: &[u8]) -> Result<Value> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| Error::backend(BACKEND, format!("{addr} {what}: {e}")))?;
    Ok(match value.get("data") {
        Some(data) if value.get("status_code").is_some() => data.clone(),
        _ => value,
    })
}

/// Whether a 404 body is nsqd's `CHANNEL_NOT_FOUND`.
fn is_channel_not_found(body: &[u8]) -> bool {
    String::from_utf8_lossy(body).contains("CHANNEL_NOT_FOUND")
}

/// One channel as `/stats` reports it, summed over the nsqds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ChannelStats {
    pub name: String,
    /// Messages not yet finished: queued plus in flight.
    pub backlog: u64,
}

/// One channel entry of `/stats` in either server's terms. nsqd 1.3.0's `depth` counts the
/// messages ready to go out (not in flight, not deferred) and `client_count` the consumers;
/// the fork's `depth` (recognised by its `depth_size`) counts everything from the first
/// unfinished message to the end, in flight and deferred ones included, and its consumers are
/// `client_num`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ChannelFigures {
    /// Messages waiting to go out now.
    pub ready: u64,
    pub in_flight: u64,
    /// Held back until later (DPUB, REQ with a delay).
    pub deferred: u64,
    pub clients: u64,
}

impl ChannelFigures {
    pub(crate) fn read(channel: &Value) -> ChannelFigures {
        let field = |name: &str| channel[name].as_u64().unwrap_or(0);
        let in_flight = field("in_flight_count");
        let deferred = field("deferred_count");
        if channel.get("depth_size").is_some() {
            ChannelFigures {
                ready: field("depth").saturating_sub(in_flight + deferred),
                in_flight,
                deferred,
                clients: field("client_num"),
            }
        } else {
            ChannelFigures {
                ready: field("depth"),
                in_flight,
                deferred,
                clients: field("client_count"),
            }
        }
    }

    /// Messages not yet finished: ready, in flight and deferred.
    pub(crate) fn backlog(&self) -> u64 {
        self.ready + self.in_flight + self.deferred
    }
}

impl Admin {
    pub(crate) fn available(&self) -> bool {
        !self.http.is_empty()
    }

    fn require(&self, what: &'static str) -> Result<()> {
        if self.available() {
            Ok(())
        } else {
            Err(Error::Unsupported {
                backend: BACKEND,
                what,
            })
        }
    }

    /// Whether a partition's calls find its nsqd through lookupd.
    pub(crate) fn locates(&self) -> bool {
        self.partition.is_some() && !self.lookupd.is_empty()
    }

    /// Asks the lookupds in turn (the first that answers counts) for the nsqd holding the
    /// configured partition of `topic`. A partition nobody lists yet is a transient error:
    /// nsqd registers a new topic with lookupd a moment after creating it.
    pub(crate) async fn locate(&self, topic: &str) -> Result<Node> {
        let Some(partition) = self.partition.filter(|_| !self.lookupd.is_empty()) else {
            return Err(Error::Unsupported {
                backend: BACKEND,
                what: "locating a partition without lookupd and extensions = partitions",
            });
        };
        let mut last = None;
        for addr in &self.lookupd {
            match lookup::lookup(addr, topic, TIMEOUT).await {
                Ok(endpoints) => {
                    return endpoints
                        .into_iter()
                        .find(|e| e.partition == Some(partition))
                        .map(|e| Node {
                            tcp: e.tcp,
                            http: e.http,
                        })
                        .ok_or_else(|| {
                            Error::transient(
                                BACKEND,
                                format!(
                                    "lookupd {addr} lists no nsqd for partition {partition} of {topic} (yet)"
                                ),
                            )
                        });
                }
                Err(e) => last = Some(map_err(e)),
            }
        }
        Err(last.unwrap_or_else(|| Error::transient(BACKEND, "no lookupd answered")))
    }

    /// The HTTP addresses to ask about the configured partition of `topic`: the one lookupd
    /// names, or else the configured ones.
    pub(crate) async fn partition_http(&self, topic: &str) -> Result<Vec<String>> {
        if self.locates() {
            Ok(vec![self.locate(topic).await?.http])
        } else {
            Ok(self.http.clone())
        }
    }

    /// One nsqd's `/stats` as JSON, of `topic` only or of every topic; a status other than
    /// 200 is a transient error.
    async fn stats(&self, addr: &str, topic: Option<&str>) -> Result<serde_json::Value> {
        let target = match topic {
            Some(t) => format!("/stats?format=json&topic={}", http::query_value(t)),
            None => "/stats?format=json".to_string(),
        };
        let (status, body) = self.call(addr, "GET", &target, b"").await?;
        if status != 200 {
            return Err(Error::transient(
                BACKEND,
                format!("{addr} /stats answered {status}"),
            ));
        }
        json_reply(addr, "/stats", &body)
    }

    async fn call(
        &self,
        addr: &str,
        method: &str,
        target: &str,
        body: &[u8],
    ) -> Result<(u16, Vec<u8>)> {
        http::request(addr, method, target, body, TIMEOUT)
            .await
            .map_err(map_err)
    }

    /// Topic entries of `/stats` of the configured nsqds (only the configured partition's,
    /// with extensions).
    async fn topics(&self, topic: Option<&str>) -> Result<Vec<Value>> {
        self.topics_at(&self.http, topic).await
    }

    /// Topic entries of `/stats` of the nsqds at `addrs`.
    async fn topics_at(&self, addrs: &[String], topic: Option<&str>) -> Result<Vec<Value>> {
        let mut out = Vec::new();
        for addr in addrs {
            let stats = self.stats(addr, topic).await?;
            for entry in stats["topics"].as_array().cloned().unwrap_or_default() {
                let partition = entry["topic_partition"]
                    .as_str()
                    .and_then(|p| p.parse::<u32>().ok());
                if self.partition.is_some() && partition.is_some() && partition != self.partition {
                    continue;
                }
                out.push(entry);
            }
        }
        Ok(out)
    }

    pub(crate) async fn list_topics(&self) -> Result<Vec<String>> {
        self.require("listing topics without nsqd_http")?;
        let mut names: Vec<String> = self
            .topics(None)
            .await?
            .iter()
            .filter_map(|t| t["topic_name"].as_str().map(str::to_string))
            .collect();
        names.sort();
        names.dedup();
        Ok(names)
    }

    /// Channels of `topic`, `None` when the topic exists on no nsqd.
    pub(crate) async fn channels(&self, topic: &str) -> Result<Option<Vec<ChannelStats>>> {
        self.require("listing subscriptions without nsqd_http")?;
        let entries: Vec<Value> = self
            .topics(Some(topic))
            .await?
            .into_iter()
            .filter(|t| t["topic_name"] == topic)
            .collect();
        if entries.is_empty() {
            return Ok(None);
        }
        let mut channels: Vec<ChannelStats> = Vec::new();
        for channel in entries
            .iter()
            .flat_map(|t| t["channels"].as_array().cloned().unwrap_or_default())
        {
            let Some(name) = channel["channel_name"].as_str() else {
                continue;
            };
            let backlog = ChannelFigures::read(&channel).backlog();
            match channels.iter_mut().find(|c| c.name == name) {
                Some(c) => c.backlog += backlog,
                None => channels.push(ChannelStats {
                    name: name.to_string(),
                    backlog,
                }),
            }
        }
        channels.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(Some(channels))
    }

    /// The channel's confirmed offset in the configured partition (every message below it is
    /// finished), from the fork's `/stats`: the partition's end (`backend_depth`) minus the
    /// channel's `depth_size`. `None` when the channel does not exist or the server does not
    /// report both figures.
    pub(crate) async fn confirmed_offset(&self, topic: &str, channel: &str) -> Result<Option<u64>> {
        self.require("reading a channel's confirmed offset without nsqd_http")?;
        for entry in self.topics(Some(topic)).await? {
            if entry["topic_name"] != topic {
                continue;
            }
            let Some(end) = entry["backend_depth"].as_u64() else {
                continue;
            };
            for c in entry["channels"].as_array().cloned().unwrap_or_default() {
                if c["channel_name"] == channel {
                    if let Some(depth) = c["depth_size"].as_u64() {
                        return Ok(Some(end.saturating_sub(depth)));
                    }
                }
            }
        }
        Ok(None)
    }

    /// Moves `channel` of the configured partition of `topic` to `offset` (the fork's
    /// `/channel/setoffset`, which creates the channel): how an ordered subscription keeps its
    /// commit point. Returns once the nsqd holding the partition answered 200; nsqds without
    /// the partition answer 404 and are passed over.
    pub(crate) async fn set_offset(
        &self,
        topic: &str,
        channel: &str,
        offset: ConsumeOffset,
    ) -> Result<()> {
        self.require("setting a channel's offset without nsqd_http")?;
        let target = format!(
            "/channel/setoffset?topic={}&channel={}&partition={}",
            http::query_value(topic),
            http::query_value(channel),
            self.partition.unwrap_or(0)
        );
        let body = offset.to_string();
        for addr in &self.partition_http(topic).await? {
            let (mut status, mut reply) = self.call(addr, "POST", &target, body.as_bytes()).await?;
            if status == 404 && self.coordinator && is_channel_not_found(&reply) {
                // A cluster's setoffset moves existing channels only: create it, then set it.
                self.create_channel(topic, channel).await?;
                (status, reply) = self.call(addr, "POST", &target, body.as_bytes()).await?;
            }
            match status {
                200 => return Ok(()),
                404 => continue,
                _ => {
                    return Err(Error::backend(
                        BACKEND,
                        format!(
                            "{addr} /channel/setoffset answered {status}: {}",
                            String::from_utf8_lossy(&reply)
                        ),
                    ))
                }
            }
        }
        Err(Error::UnknownChannel {
            channel: topic.to_string(),
        })
    }

    /// Creates `channel` of the configured partition of `topic` on the partition's leader
    /// as a coordinator-mode nsqd does it: by a subscription (`SUB_ADVANCED` without offset,
    /// which starts the channel at the partition's end), closed before any RDY, so nothing is
    /// delivered. The channel stays (it is no ephemeral one).
    async fn create_channel(&self, topic: &str, channel: &str) -> Result<()> {
        let node = self.locate(topic).await?;
        let command = crate::codec::Command::SubAdvanced {
            topic,
            channel,
            partition: self.partition.unwrap_or(0),
            offset: None,
        };
        let conn = crate::conn::Conn::connect(
            &node.tcp,
            &crate::conn::ConnConfig::default(),
            Some(command),
            true,
            |_, _| {},
        )
        .await
        .map_err(map_err)?;
        conn.close().await;
        Ok(())
    }

    /// Waits until no nsqd lists a client of the channel: nsqd reads a connection's commands
    /// in order and forgets it only after the last one, so by then everything a closed (or
    /// killed) consumer sent is processed. Gives up after 10 s with a transient error (a
    /// consumer of another process is still subscribed, or a dead connection has not timed
    /// out yet).
    pub(crate) async fn wait_until_unsubscribed(&self, topic: &str, channel: &str) -> Result<()> {
        let deadline = std::time::Instant::now() + TIMEOUT;
        loop {
            let counts = self.channel_counts(topic, channel).await?;
            if counts.is_none_or(|(_, _, clients)| clients == 0) {
                return Ok(());
            }
            if std::time::Instant::now() >= deadline {
                return Err(Error::transient(
                    BACKEND,
                    format!(
                        "nsqd still lists a client of {topic}/{channel} (a consumer in another process, or a dead connection not timed out yet)"
                    ),
                ));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// `(ready, in_flight_count, clients)` of one channel summed over the nsqds (see
    /// [`ChannelFigures`]), `None` when no nsqd has it.
    pub(crate) async fn channel_counts(
        &self,
        topic: &str,
        channel: &str,
    ) -> Result<Option<(u64, u64, u64)>> {
        self.require("reading channel depth without nsqd_http")?;
        self.channel_counts_at(&self.http, topic, channel).await
    }

    /// [`Admin::channel_counts`] asking the nsqds at `addrs` (a reader asks the one it reads
    /// from).
    pub(crate) async fn channel_counts_at(
        &self,
        addrs: &[String],
        topic: &str,
        channel: &str,
    ) -> Result<Option<(u64, u64, u64)>> {
        let mut found = None;
        for entry in self.topics_at(addrs, Some(topic)).await? {
            if entry["topic_name"] != topic {
                continue;
            }
            for c in entry["channels"].as_array().cloned().unwrap_or_default() {
                if c["channel_name"] == channel {
                    let figures = ChannelFigures::read(&c);
                    let (ready, in_flight, clients) = found.unwrap_or((0, 0, 0));
                    found = Some((
                        ready + figures.ready,
                        in_flight + figures.in_flight,
                        clients + figures.clients,
                    ));
                }
            }
        }
        Ok(found)
    }

    /// The newest message of the configured partition of `topic`, `None` when it holds none.
    ///
    /// nsqd has no call for "the last offset", but the fork's `/stats` counts the messages
    /// ever written (`message_count`, the next count index) and reports the end offset
    /// (`backend_depth`), and `/message/get?search_mode=count` returns a message's own offset
    /// by its count index. So the newest is count `message_count - 1`, at the offset
    /// `/message/get` gives, and its raw size is the end minus that offset.
    ///
    /// That holds only if count and end describe the same moment, and nsqd reads the two
    /// figures one after the other: a publish in between pairs a count with the end after the
    /// next message (a raw size spanning two messages), or the end before it with the count
    /// after it (the newest then starts at the end). So `/stats` is read again after
    /// `/message/get`, and a round counts only if the count did not move and the offset lies
    /// below the end; otherwise it repeats from the newer figures.
    pub(crate) async fn latest(&self, topic: &str) -> Result<Option<Position>> {
        let Some(partition) = self.partition else {
            return Err(Error::Unsupported {
                backend: BACKEND,
                what: "latest message id without extensions = partitions",
            });
        };
        let addrs = self.partition_http(topic).await?;
        let mut holder = None;
        for addr in &addrs {
            if let Some(stats) = self.partition_stats(addr, topic, partition).await? {
                holder = Some((addr.as_str(), stats));
                break;
            }
        }
        let Some((addr, mut before)) = holder else {
            return Err(Error::UnknownChannel {
                channel: topic.to_string(),
            });
        };
        for _ in 0..LATEST_ATTEMPTS {
            if before.count == 0 {
                return Ok(None);
            }
            let last = before.count - 1;
            let found = self.message_at_count(addr, topic, partition, last).await?;
            let after = self
                .partition_stats(addr, topic, partition)
                .await?
                .ok_or_else(|| Error::UnknownChannel {
                    channel: topic.to_string(),
                })?;
            if after.count == before.count {
                if let Some(offset) = found.filter(|offset| *offset < before.end) {
                    let raw_size = u32::try_from(before.end - offset).map_err(|_| {
                        Error::backend(
                            BACKEND,
                            format!(
                                "{addr}: message {last} of {topic} at offset {offset} would be {} bytes long",
                                before.end - offset
                            ),
                        )
                    })?;
                    return Ok(Some(Position {
                        partition,
                        offset,
                        raw_size,
                    }));
                }
            }
            // Moved (or the figures were read across a write): again, from the new snapshot.
            before = after;
            tokio::task::yield_now().await;
        }
        Err(Error::transient(
            BACKEND,
            format!(
                "{addr}: partition {partition} of {topic} kept growing while its newest message was read"
            ),
        ))
    }

    /// The end offset of the configured partition of `topic` (`/stats` `backend_depth`): where
    /// the next message will be written. `UnknownChannel` when no nsqd holds the partition.
    pub(crate) async fn partition_end(&self, topic: &str) -> Result<u64> {
        let partition = self.partition.unwrap_or(0);
        for addr in &self.partition_http(topic).await? {
            if let Some(stats) = self.partition_stats(addr, topic, partition).await? {
                return Ok(stats.end);
            }
        }
        Err(Error::UnknownChannel {
            channel: topic.to_string(),
        })
    }

    /// Where a seek or reader start at `id` begins reading in `partition` of `topic`: the
    /// message's offset (`inclusive`) or the offset after it, checked by [`Admin::check_start`].
    /// An id of another partition is refused (the earliest id, offset 0, fits every one).
    pub(crate) async fn start_offset(
        &self,
        topic: &str,
        partition: u32,
        id: &msgstream::mq::MessageId,
        inclusive: bool,
    ) -> Result<u64> {
        let position = Position::parse(id)?;
        if position.partition != partition && position.offset > 0 {
            return Err(Error::InvalidArgument(format!(
                "id {id:?} is of partition {}, this channel lives in {partition}",
                position.partition
            )));
        }
        let offset = if inclusive {
            position.offset
        } else {
            position.offset + u64::from(position.raw_size)
        };
        self.check_start(topic, id, offset, inclusive).await?;
        Ok(offset)
    }

    /// Refuses a seek or reader start beyond what the configured partition of `topic` holds,
    /// as every backend does (`Error::PastEnd`): nsqd would otherwise park the subscription at
    /// an offset it has not written yet, and hand it nothing until the partition grew past
    /// it, silently skipping every message written before. `start` is the offset the
    /// subscription would start at; an inclusive start must name a written message (below the
    /// end), an exclusive one may be the end itself. Offset 0, the earliest id, is always valid.
    pub(crate) async fn check_start(
        &self,
        topic: &str,
        id: &msgstream::mq::MessageId,
        start: u64,
        inclusive: bool,
    ) -> Result<()> {
        let Some(partition) = self.partition else {
            return Ok(());
        };
        if start == 0 {
            return Ok(());
        }
        let mut end = None;
        for addr in &self.partition_http(topic).await? {
            if let Some(stats) = self.partition_stats(addr, topic, partition).await? {
                end = Some(stats.end);
                break;
            }
        }
        let end = end.ok_or_else(|| Error::UnknownChannel {
            channel: topic.to_string(),
        })?;
        let past = if inclusive { start >= end } else { start > end };
        if !past {
            return Ok(());
        }
        let latest = self.latest(topic).await.ok().flatten().map(Position::id);
        Err(Error::PastEnd {
            channel: topic.to_string(),
            id: id.clone(),
            latest,
        })
    }

    /// `message_count` and `backend_depth` of one partition in one `/stats` reply of `addr`,
    /// `None` when that nsqd does not hold it.
    async fn partition_stats(
        &self,
        addr: &str,
        topic: &str,
        partition: u32,
    ) -> Result<Option<PartitionStats>> {
        let stats = self.stats(addr, Some(topic)).await?;
        let wanted = partition.to_string();
        let entry = stats["topics"].as_array().and_then(|topics| {
            topics.iter().find(|t| {
                t["topic_name"] == topic && t["topic_partition"].as_str() == Some(wanted.as_str())
            })
        });
        let Some(entry) = entry else {
            return Ok(None);
        };
        match (entry["message_count"].as_u64(), entry["backend_depth"].as_u64()) {
            (Some(count), Some(end)) => Ok(Some(PartitionStats { count, end })),
            _ => Err(Error::backend(
                BACKEND,
                format!(
                    "{addr} /stats reports no message_count and backend_depth for partition {partition} of {topic}"
                ),
            )),
        }
    }

    /// The offset of the message with count index `count`, from the fork's `/message/get`;
    /// `None` when nothing is there (404).
    async fn message_at_count(
        &self,
        addr: &str,
        topic: &str,
        partition: u32,
        count: u64,
    ) -> Result<Option<u64>> {
        let target = format!(
            "/message/get?topic={}&partition={partition}&search_mode=count&search_pos={count}",
            http::query_value(topic)
        );
        let (status, body) = self.call(addr, "GET", &target, b"").await?;
        match status {
            200 => {}
            404 => return Ok(None),
            other => {
                return Err(Error::backend(
                    BACKEND,
                    format!(
                        "{addr} /message/get answered {other}: {}",
                        String::from_utf8_lossy(&body)
                    ),
                ))
            }
        }
        let message = json_reply(addr, "/message/get", &body)?;
        let offset = message["offset"].as_u64().ok_or_else(|| {
            Error::backend(
                BACKEND,
                format!("{addr} /message/get: no offset in {message}"),
            )
        })?;
        match message["queue_cnt_index"].as_u64() {
            Some(index) if index != count => Err(Error::backend(
                BACKEND,
                format!("{addr} /message/get asked for count {count} returned count {index}"),
            )),
            _ => Ok(Some(offset)),
        }
    }

    /// POSTs `path?query` to every nsqd; 404 (already gone) counts as done.
    async fn post_all(
        &self,
        what: &'static str,
        topic: &str,
        path: &str,
        query: &str,
        body: &[u8],
    ) -> Result<()> {
        self.require(what)?;
        let partition = self
            .partition
            .map(|p| format!("&partition={p}"))
            .unwrap_or_default();
        let leader;
        let addrs = if self.coordinator {
            match self.locate(topic).await {
                Ok(node) => {
                    leader = [node.http];
                    &leader[..]
                }
                // Nothing listed: no partition, nothing to change.
                Err(e) if e.is_transient() => return Ok(()),
                Err(e) => return Err(e),
            }
        } else {
            &self.http[..]
        };
        for addr in addrs {
            let target = format!("{path}?{query}{partition}");
            let (status, reply) = self.call(addr, "POST", &target, body).await?;
            if status != 200 && status != 404 {
                return Err(Error::backend(
                    BACKEND,
                    format!(
                        "{addr} {path} answered {status}: {}",
                        String::from_utf8_lossy(&reply)
                    ),
                ));
            }
        }
        Ok(())
    }

    pub(crate) async fn delete_topic(&self, topic: &str) -> Result<()> {
        self.post_all(
            "deleting topics without nsqd_http",
            topic,
            "/topic/delete",
            &format!("topic={}", http::query_value(topic)),
            b"",
        )
        .await
    }

    pub(crate) async fn delete_channel(&self, topic: &str, channel: &str) -> Result<()> {
        let query = format!(
            "topic={}&channel={}",
            http::query_value(topic),
            http::query_value(channel)
        );
        self.post_all(
            "deleting subscriptions without nsqd_http",
            topic,
            "/channel/delete",
            &query,
            b"",
        )
        .await
    }

    /// Creates the channel (so it starts receiving) and drops what it holds: a new
    /// subscription at `Latest` on upstream nsqd.
    pub(crate) async fn create_empty_channel(&self, topic: &str, channel: &str) -> Result<()> {
        let query = format!(
            "topic={}&channel={}",
            http::query_value(topic),
            http::query_value(channel)
        );
        self.post_all(
            "starting at Latest without nsqd_http",
            topic,
            "/channel/create",
            &query,
            b"",
        )
        .await?;
        self.post_all(
            "starting at Latest without nsqd_http",
            topic,
            "/channel/empty",
            &query,
            b"",
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;
    use std::sync::{Arc, Mutex};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn channel_figures_read_both_servers_shapes() {
        // nsqd 1.3.0: depth is what is ready; in flight and deferred come on top.
        let upstream = serde_json::json!({"depth": 3, "in_flight_count": 2, "deferred_count": 1, "client_count": 1});
        let figures = ChannelFigures::read(&upstream);
        assert_eq!(
            (figures.ready, figures.clients, figures.backlog()),
            (3, 1, 6)
        );
        // The fork (Y4 271 `golden_c3` with a consumer holding one): depth counts from the
        // first unfinished message, in flight and deferred included.
        let fork = serde_json::json!({"backlogs": 21, "depth": 23, "depth_size": 895, "in_flight_count": 1, "deferred_count": 1, "client_num": 1});
        let figures = ChannelFigures::read(&fork);
        assert_eq!(
            (figures.ready, figures.clients, figures.backlog()),
            (21, 1, 23)
        );
    }

    /// An HTTP server answering each request with the next scripted `(path prefix, status,
    /// body)`; a request that does not match the script's next entry fails the test.
    async fn scripted(script: Vec<(&'static str, u16, String)>) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        let script = Arc::new(Mutex::new(VecDeque::from(script)));
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if stream.read(&mut byte).await.unwrap_or(0) == 0 {
                        break;
                    }
                    head.push(byte[0]);
                }
                let line = String::from_utf8_lossy(&head).into_owned();
                let target = line.split(' ').nth(1).unwrap_or_default().to_string();
                let next = script.lock().expect("script").pop_front();
                let (prefix, status, body) = next.expect("a scripted reply left");
                assert!(target.starts_with(prefix), "{target} instead of {prefix}");
                let reply = format!(
                    "HTTP/1.1 {status} X\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(reply.as_bytes()).await;
            }
        });
        addr
    }

    fn admin(addr: String) -> Admin {
        Admin {
            http: vec![addr],
            partition: Some(1),
            lookupd: Vec::new(),
            coordinator: false,
        }
    }

    fn stats(count: u64, end: u64) -> (&'static str, u16, String) {
        let body = serde_json::json!({"topics": [
            {"topic_name": "t", "topic_partition": "0", "message_count": 99, "backend_depth": 9999},
            {"topic_name": "t", "topic_partition": "1", "message_count": count, "backend_depth": end},
        ]});
        ("/stats", 200, body.to_string())
    }

    fn get(offset: u64, index: u64) -> (&'static str, u16, String) {
        let body = serde_json::json!({"id": 7, "trace_id": 0, "body": "b", "timestamp": 1,
            "attempts": 0, "offset": offset, "queue_cnt_index": index, "ext": ""});
        ("/message/get", 200, body.to_string())
    }

    #[tokio::test]
    async fn latest_retries_rounds_a_publish_raced_through() {
        let addr = scripted(vec![
            // Count 2 read, then a publish, then the end after three messages: the count moved
            // by the second read.
            stats(2, 105),
            get(33, 1),
            stats(3, 105),
            // A publish between the get and the second read.
            get(70, 2),
            stats(4, 105),
            // The end read before that publish and the count after it: the newest starts at
            // the end.
            get(105, 3),
            stats(4, 140),
            // Settled.
            get(105, 3),
            stats(4, 140),
        ])
        .await;
        let latest = admin(addr).latest("t").await.expect("latest");
        assert_eq!(
            latest,
            Some(Position {
                partition: 1,
                offset: 105,
                raw_size: 35
            })
        );
    }

    #[tokio::test]
    async fn latest_of_an_empty_or_missing_partition() {
        let empty = scripted(vec![stats(0, 0)]).await;
        assert_eq!(admin(empty).latest("t").await.expect("latest"), None);
        let other = scripted(vec![(
            "/stats",
            200,
            r#"{"topics":[{"topic_name":"t","topic_partition":"0","message_count":1,"backend_depth":33}]}"#.into(),
        )])
        .await;
        assert!(matches!(
            admin(other).latest("t").await,
            Err(Error::UnknownChannel { .. })
        ));
    }

    #[tokio::test]
    async fn bad_replies_are_typed_errors() {
        let cases: Vec<Vec<(&'static str, u16, String)>> = vec![
            vec![("/stats", 200, "not json".into())],
            vec![("/stats", 500, "boom".into())],
            vec![(
                "/stats",
                200,
                r#"{"topics":[{"topic_name":"t","topic_partition":"1"}]}"#.into(),
            )],
            vec![stats(1, 33), ("/message/get", 200, "{".into())],
            vec![stats(1, 33), ("/message/get", 200, r#"{"id":1}"#.into())],
            vec![
                stats(1, 33),
                ("/message/get", 400, r#"{"message":"x"}"#.into()),
            ],
            vec![stats(1, 33), get(0, 5)],
            vec![stats(1, u64::MAX), get(0, 0), stats(1, u64::MAX)],
        ];
        for script in cases {
            let what = format!("{script:?}");
            let result = admin(scripted(script).await).latest("t").await;
            assert!(
                matches!(result, Err(Error::Backend { .. })),
                "{what}: {result:?}"
            );
        }
        let wrapped = scripted(vec![
            (
                "/stats",
                200,
                format!(
                    r#"{{"status_code":200,"status_txt":"OK","data":{}}}"#,
                    stats(1, 33).2
                ),
            ),
            get(0, 0),
            stats(1, 33),
        ])
        .await;
        assert_eq!(
            admin(wrapped).latest("t").await.expect("wrapped /stats"),
            Some(Position {
                partition: 1,
                offset: 0,
                raw_size: 33
            })
        );
    }

    #[tokio::test]
    async fn a_partition_that_keeps_growing_is_a_transient_error() {
        // Each round: `/message/get`, then a `/stats` that has moved on (opening the next).
        let mut ordered = vec![stats(1, 33)];
        for round in 0..LATEST_ATTEMPTS as u64 {
            ordered.push(get(33 * round, round));
            ordered.push(stats(round + 2, 33 * (round + 2)));
        }
        let result = admin(scripted(ordered).await).latest("t").await;
        assert!(
            result.as_ref().is_err_and(Error::is_transient),
            "{result:?}"
        );
    }
}
