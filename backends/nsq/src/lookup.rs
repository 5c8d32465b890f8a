//! Discovery through nsqlookupd: `GET /lookup?topic=T` with the NSQ Accept header, accepting
//! both the raw 1.x reply and the `{"status_code","data"}` wrapper, and reading the Youzan
//! partition map.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::http;

/// One nsqd to connect to, for one partition (`None`: an upstream nsqd, or a Youzan nsqd
/// listed without partitions).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Endpoint {
    /// `host:port` of the TCP protocol.
    pub tcp: String,
    /// `host:port` of the HTTP API.
    pub http: String,
    /// The partition served there.
    pub partition: Option<u32>,
}

#[derive(Deserialize)]
struct Peer {
    broadcast_address: String,
    tcp_port: u16,
    http_port: u16,
}

#[derive(Deserialize)]
struct Reply {
    #[serde(default)]
    producers: Vec<Peer>,
    #[serde(default)]
    partitions: BTreeMap<String, Peer>,
    #[serde(default)]
    meta: Option<TopicMeta>,
}

/// A Youzan topic's layout, as a coordinator-mode lookupd reports it with `metainfo=true`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct TopicMeta {
    /// Number of partitions.
    pub partition_num: u32,
    /// Copies of each partition (leader included).
    pub replica: u32,
    /// Created with `orderedmulti=true`: only `SUB_ORDERED` reads it.
    #[serde(default)]
    pub ordered: bool,
}

/// What one `/lookup` said about a topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    /// The layout, when the lookupd reports one (a coordinator-mode lookupd, for a topic it
    /// knows).
    pub meta: Option<TopicMeta>,
    /// Where to connect, one entry per partition (its leader) and per other nsqd.
    pub endpoints: Vec<Endpoint>,
}

#[derive(Deserialize)]
struct Wrapped {
    data: Reply,
}

fn join(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Parses a `/lookup` body. Producers that appear in the partition map are listed once per
/// partition; the others (old nsqds) without one.
pub fn parse(addr: &str, body: &[u8]) -> Result<Vec<Endpoint>> {
    parse_topology(addr, body).map(|t| t.endpoints)
}

/// Parses a `/lookup` body with its `meta`.
pub fn parse_topology(addr: &str, body: &[u8]) -> Result<Topology> {
    let reply = match serde_json::from_slice::<Wrapped>(body) {
        Ok(wrapped) => wrapped.data,
        Err(_) => serde_json::from_slice::<Reply>(body).map_err(|e| Error::Protocol {
            addr: addr.to_string(),
            what: format!("lookup reply: {e}"),
        })?,
    };
    let mut out = Vec::new();
    for (pid, peer) in &reply.partitions {
        let partition = pid.parse().map_err(|_| Error::Protocol {
            addr: addr.to_string(),
            what: format!("partition {pid:?} is not a number"),
        })?;
        out.push(Endpoint {
            tcp: join(&peer.broadcast_address, peer.tcp_port),
            http: join(&peer.broadcast_address, peer.http_port),
            partition: Some(partition),
        });
    }
    for peer in &reply.producers {
        let tcp = join(&peer.broadcast_address, peer.tcp_port);
        if !out.iter().any(|e| e.tcp == tcp) {
            out.push(Endpoint {
                http: join(&peer.broadcast_address, peer.http_port),
                tcp,
                partition: None,
            });
        }
    }
    out.sort();
    Ok(Topology {
        meta: reply.meta,
        endpoints: out,
    })
}

/// Asks one lookupd where `topic` lives. An unknown topic is an empty list, not an error.
pub async fn lookup(addr: &str, topic: &str, timeout: Duration) -> Result<Vec<Endpoint>> {
    lookup_topology(addr, topic, timeout)
        .await
        .map(|t| t.endpoints)
}

/// Asks one lookupd where `topic` lives and how it is laid out (`access=r`, which a Youzan
/// lookupd answers before the topic has a channel, unlike `access=w`). An unknown topic has
/// no endpoints and no meta.
pub async fn lookup_topology(addr: &str, topic: &str, timeout: Duration) -> Result<Topology> {
    let target = format!(
        "/lookup?topic={}&metainfo=true&access=r",
        http::query_value(topic)
    );
    let (status, body) = http::request(addr, "GET", &target, b"", timeout).await?;
    match status {
        200 => parse_topology(addr, &body),
        404 => Ok(Topology {
            meta: None,
            endpoints: Vec::new(),
        }),
        other => Err(Error::Protocol {
            addr: addr.to_string(),
            what: format!(
                "lookup answered {other}: {}",
                String::from_utf8_lossy(&body)
            ),
        }),
    }
}

/// What a coordinator-mode lookupd's `/topic/create` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Created {
    /// Created now, or already there with the same layout.
    Created,
    /// The topic exists with another layout (`400 already exist`).
    AlreadyExists,
}

/// The `message` of a lookupd refusal, or the body as it is.
fn refusal(body: &[u8]) -> String {
    #[derive(Deserialize)]
    struct Message {
        message: String,
    }
    serde_json::from_slice::<Message>(body)
        .map(|m| m.message)
        .unwrap_or_else(|_| String::from_utf8_lossy(body).into_owned())
}

/// Creates a topic through a coordinator-mode (Youzan) lookupd:
/// `POST /topic/create?topic=&partition_num=&replicator=`. The partitions get leaders some
/// seconds later; until then their nsqds answer `E_FAILED_ON_NOT_LEADER`.
pub async fn create_topic(
    addr: &str,
    topic: &str,
    partition_num: u32,
    replicator: u32,
    timeout: Duration,
) -> Result<Created> {
    let target = format!(
        "/topic/create?topic={}&partition_num={partition_num}&replicator={replicator}",
        http::query_value(topic)
    );
    let (status, body) = http::request(addr, "POST", &target, b"", timeout).await?;
    match (status, refusal(&body).as_str()) {
        (200, _) => Ok(Created::Created),
        (400, "already exist") => Ok(Created::AlreadyExists),
        (_, message) => Err(Error::Protocol {
            addr: addr.to_string(),
            what: format!("topic/create of {topic} answered {status}: {message}"),
        }),
    }
}

/// Deletes every partition of a topic through a coordinator-mode lookupd
/// (`POST /topic/delete?topic=&partition=**`). A topic the lookupd does not know
/// (`Key not found`) counts as deleted.
pub async fn delete_topic(addr: &str, topic: &str, timeout: Duration) -> Result<()> {
    let target = format!(
        "/topic/delete?topic={}&partition=**",
        http::query_value(topic)
    );
    let (status, body) = http::request(addr, "POST", &target, b"", timeout).await?;
    match (status, refusal(&body).as_str()) {
        (200, _) | (_, "Key not found") => Ok(()),
        (_, message) => Err(Error::Protocol {
            addr: addr.to_string(),
            what: format!("topic/delete of {topic} answered {status}: {message}"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_wrapped_and_partitioned_replies() {
        let raw = br#"{"channels":[],"producers":[{"broadcast_address":"127.0.0.1","tcp_port":4150,"http_port":4151,"hostname":"h"}]}"#;
        let wrapped = br#"{"status_code":200,"status_txt":"OK","data":{"channels":[],"producers":[{"broadcast_address":"127.0.0.1","tcp_port":4150,"http_port":4151}]}}"#;
        let want = vec![Endpoint {
            tcp: "127.0.0.1:4150".into(),
            http: "127.0.0.1:4151".into(),
            partition: None,
        }];
        assert_eq!(parse("l", raw).expect("raw"), want);
        assert_eq!(parse("l", wrapped).expect("wrapped"), want);
        let parts = br#"{"partitions":{"1":{"broadcast_address":"127.0.0.1","tcp_port":5,"http_port":6},"0":{"broadcast_address":"127.0.0.1","tcp_port":5,"http_port":6}},"producers":[{"broadcast_address":"127.0.0.1","tcp_port":5,"http_port":6},{"broadcast_address":"127.0.0.2","tcp_port":7,"http_port":8}]}"#;
        let got = parse("l", parts).expect("partitions");
        let keys: Vec<_> = got.iter().map(|e| (e.tcp.as_str(), e.partition)).collect();
        assert_eq!(
            keys,
            [
                ("127.0.0.1:5", Some(0)),
                ("127.0.0.1:5", Some(1)),
                ("127.0.0.2:7", None)
            ]
        );
        assert!(parse("l", b"not json").is_err());
    }
}
