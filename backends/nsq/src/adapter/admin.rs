//! What the adapter asks nsqd's HTTP API: `/stats` for listings, lag and whether a channel
//! exists, and `/topic/delete`, `/channel/delete`, `/channel/empty`, `/channel/setoffset`.

use std::time::Duration;

use msgstream::{Error, Result};
use serde_json::Value;

use super::{map_err, BACKEND};
use crate::http;

const TIMEOUT: Duration = Duration::from_secs(10);

/// The HTTP addresses of the configured nsqds.
#[derive(Debug, Clone)]
pub(crate) struct Admin {
    pub http: Vec<String>,
    /// Only this partition's entries count (extensions on).
    pub partition: Option<u32>,
}

/// One channel as `/stats` reports it, summed over the nsqds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ChannelStats {
    pub name: String,
    /// Messages not yet finished: queued plus in flight.
    pub backlog: u64,
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

    /// Topic entries of `/stats` (only the configured partition's, with extensions).
    async fn topics(&self, topic: Option<&str>) -> Result<Vec<Value>> {
        let mut out = Vec::new();
        for addr in &self.http {
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
            let stats: Value = serde_json::from_slice(&body)
                .map_err(|e| Error::backend(BACKEND, format!("{addr} /stats: {e}")))?;
            let stats = if stats.get("data").is_some() {
                stats["data"].clone()
            } else {
                stats
            };
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
            let backlog = channel["depth"].as_u64().unwrap_or(0)
                + channel["in_flight_count"].as_u64().unwrap_or(0);
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

    /// `(depth, in_flight_count, client_count)` of one channel summed over the nsqds, `None`
    /// when no nsqd has it.
    pub(crate) async fn channel_counts(
        &self,
        topic: &str,
        channel: &str,
    ) -> Result<Option<(u64, u64, u64)>> {
        self.require("reading channel depth without nsqd_http")?;
        let mut found = None;
        for entry in self.topics(Some(topic)).await? {
            if entry["topic_name"] != topic {
                continue;
            }
            for c in entry["channels"].as_array().cloned().unwrap_or_default() {
                if c["channel_name"] == channel {
                    let (depth, in_flight, clients) = found.unwrap_or((0, 0, 0));
                    found = Some((
                        depth + c["depth"].as_u64().unwrap_or(0),
                        in_flight + c["in_flight_count"].as_u64().unwrap_or(0),
                        clients + c["client_count"].as_u64().unwrap_or(0),
                    ));
                }
            }
        }
        Ok(found)
    }

    /// POSTs `path?query` to every nsqd; 404 (already gone) counts as done.
    async fn post_all(
        &self,
        what: &'static str,
        path: &str,
        query: &str,
        body: &[u8],
    ) -> Result<()> {
        self.require(what)?;
        let partition = self
            .partition
            .map(|p| format!("&partition={p}"))
            .unwrap_or_default();
        for addr in &self.http {
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
            "/channel/create",
            &query,
            b"",
        )
        .await?;
        self.post_all(
            "starting at Latest without nsqd_http",
            "/channel/empty",
            &query,
            b"",
        )
        .await
    }
}
