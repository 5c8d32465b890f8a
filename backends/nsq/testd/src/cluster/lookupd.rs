//! The Youzan nsqlookupd of a [`super::TestCluster`], answering as the recorded one does (Y1,
//! Y2, Y7): `/lookup` (partition map, `meta` with `metainfo=true`, the `access=w` refusals),
//! `/topic/create` and `/topic/delete` (the coordinator's), `/topics`, `/channels`, `/nodes`,
//! `/listlookup`, `/info`, `/ping`.
//!
//! Replies are wrapped in `{"status_code","status_txt","data"}` and every error is a 500,
//! unless the request carries `Accept: application/vnd.nsq; version=1.0`: then bare JSON and
//! the real status. `/topic/create` and `/topic/delete` always answer `{"message":..}` with the
//! real status.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use serde_json::{json, Value};

use super::{ClusterState, TopicMeta};
use crate::http::{wrapped_error, wrapped_ok as ok, Handler, Request, Response};
use crate::{valid_name, Shared};

/// The HTTP face of the cluster's coordinator.
pub(super) struct Lookupd {
    pub state: Arc<ClusterState>,
    pub addr: SocketAddr,
}

/// A producer entry, in the field order the real lookupd writes.
#[derive(Serialize)]
struct Peer {
    id: String,
    remote_address: String,
    hostname: &'static str,
    broadcast_address: String,
    tcp_port: u16,
    http_port: u16,
    version: &'static str,
    distributed_id: String,
}

/// A `/nodes` entry.
#[derive(Serialize)]
struct NodeEntry {
    remote_address: String,
    hostname: &'static str,
    broadcast_address: String,
    tcp_port: u16,
    http_port: u16,
    version: &'static str,
    tombstones: Vec<bool>,
    topics: Vec<String>,
    partitions: BTreeMap<String, Vec<String>>,
}

/// The `meta` object of a `metainfo=true` lookup.
#[derive(Serialize)]
struct Meta {
    disable_channel_auto_create: bool,
    extend_support: bool,
    multi_part: bool,
    ordered: bool,
    partition_num: u32,
    replica: u32,
}

#[derive(Serialize)]
struct LookupReply {
    channels: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    meta: Option<Meta>,
    partitions: BTreeMap<String, Peer>,
    producers: Vec<Peer>,
}

/// The `distributed_id` of node `index`: `ip:rpc:tcp:worker` on a real cluster; the test nsqd
/// has no RPC port, so its HTTP port stands in.
fn peer(shared: &Shared, index: usize) -> Peer {
    let tcp = shared.tcp_addr;
    Peer {
        id: tcp.to_string(),
        remote_address: tcp.to_string(),
        hostname: "testd",
        broadcast_address: tcp.ip().to_string(),
        tcp_port: tcp.port(),
        http_port: shared.http_addr.port(),
        version: shared.options.extensions.version(),
        distributed_id: format!(
            "{}:{}:{}:{}",
            tcp.ip(),
            shared.http_addr.port(),
            tcp.port(),
            index + 1
        ),
    }
}

/// `/info`, in the real field order.
#[derive(Serialize)]
struct Info {
    version: &'static str,
    ha_support: bool,
}

impl Handler for Lookupd {
    fn max_body(&self) -> usize {
        0
    }

    fn handle(&self, req: Request) -> Response {
        let post = req.method == "POST" || req.method == "PUT";
        match (req.path.as_str(), post) {
            ("/ping", _) => Response::text("OK"),
            ("/info", _) => ok(
                &req,
                Info {
                    version: crate::Extensions::Partitions.version(),
                    ha_support: true,
                },
            ),
            ("/topics", _) => ok(&req, json!({ "topics": self.state.topic_names() })),
            ("/channels", _) => match req.query.get("topic") {
                None => wrapped_error(&req, 400, "MISSING_ARG_TOPIC"),
                Some(topic) => ok(&req, json!({ "channels": self.channels(topic) })),
            },
            ("/nodes", _) => ok(&req, json!({ "producers": self.nodes() })),
            ("/listlookup", _) => ok(&req, self.list_lookup()),
            ("/lookup", _) => self.lookup(&req),
            ("/topic/create", true) => self.create(&req),
            ("/topic/delete", true) => self.delete(&req),
            ("/topic/create" | "/topic/delete", false) => {
                Response::error(405, "METHOD_NOT_ALLOWED")
            }
            _ => Response::error(404, "NOT_FOUND"),
        }
    }
}

impl Lookupd {
    /// The listed partitions of `topic` (none before its registration delay passed).
    fn listed(&self, topic: &str) -> Option<TopicMeta> {
        self.state
            .topic(topic)
            .filter(|m| Instant::now() >= m.listed_at)
    }

    /// Channels of every partition of `topic`, from the leaders' stores.
    fn channels(&self, topic: &str) -> Vec<String> {
        let Some(meta) = self.listed(topic) else {
            return Vec::new();
        };
        let nodes = self.state.nodes();
        let mut names: Vec<String> = Vec::new();
        for (pid, part) in (0u32..).zip(&meta.partitions) {
            if let Some(node) = nodes.get(part.leader()) {
                if let Some(p) = node.store().partition(topic, pid) {
                    names.extend(p.channels.keys().cloned());
                }
            }
        }
        names.sort();
        names.dedup();
        names
    }

    fn lookup(&self, req: &Request) -> Response {
        let Some(topic) = req.query.get("topic") else {
            return wrapped_error(req, 400, "MISSING_ARG_TOPIC");
        };
        let write = match req.query.get("access").map(String::as_str) {
            None | Some("r") => false,
            Some("w") => true,
            Some(_) => return wrapped_error(req, 400, "INVALID_ACCESS_MODE"),
        };
        let meta = self.state.topic(topic);
        if write && meta.is_none() {
            return wrapped_error(req, 404, "Key not found");
        }
        let channels = self.channels(topic);
        if write && channels.is_empty() {
            return wrapped_error(
                req,
                404,
                "Topic has no channel, should init at least one for the new topic",
            );
        }
        let only: Option<u32> = req.query.get("partition").and_then(|p| p.parse().ok());
        let nodes = self.state.nodes();
        let mut partitions = BTreeMap::new();
        let mut holders: Vec<usize> = Vec::new();
        if let Some(listed) = self.listed(topic) {
            for (pid, part) in (0u32..).zip(&listed.partitions) {
                // Producers are the partitions' leaders; followers are not listed (Y6 9).
                if !holders.contains(&part.leader()) {
                    holders.push(part.leader());
                }
                if only.is_some_and(|o| o != pid) {
                    continue;
                }
                if let Some(leader) = nodes.get(part.leader()) {
                    partitions.insert(pid.to_string(), peer(leader, part.leader()));
                }
            }
        }
        holders.sort_unstable();
        let producers = holders
            .into_iter()
            .filter_map(|i| nodes.get(i).map(|n| peer(n, i)))
            .collect();
        let metainfo = req.query.get("metainfo").is_some_and(|m| m == "true");
        let meta = meta.filter(|_| metainfo).map(|m| Meta {
            disable_channel_auto_create: false,
            extend_support: m.ext,
            multi_part: m.multi_part,
            ordered: m.ordered,
            partition_num: m.partition_num,
            replica: m.replica,
        });
        ok(
            req,
            LookupReply {
                channels,
                meta,
                partitions,
                producers,
            },
        )
    }

    fn nodes(&self) -> Vec<NodeEntry> {
        let nodes = self.state.nodes();
        let names = self.state.topic_names();
        nodes
            .iter()
            .enumerate()
            .map(|(index, shared)| {
                let mut topics = Vec::new();
                let mut partitions = BTreeMap::new();
                for name in &names {
                    let Some(meta) = self.listed(name) else {
                        continue;
                    };
                    let held: Vec<String> = (0u32..)
                        .zip(&meta.partitions)
                        .filter(|(_, p)| p.replicas.contains(&index))
                        .map(|(pid, _)| pid.to_string())
                        .collect();
                    if !held.is_empty() {
                        topics.push(name.clone());
                        partitions.insert(name.clone(), held);
                    }
                }
                NodeEntry {
                    remote_address: shared.tcp_addr.to_string(),
                    hostname: "testd",
                    broadcast_address: shared.tcp_addr.ip().to_string(),
                    tcp_port: shared.tcp_addr.port(),
                    http_port: shared.http_addr.port(),
                    version: shared.options.extensions.version(),
                    tombstones: vec![false; topics.len()],
                    topics,
                    partitions,
                }
            })
            .collect()
    }

    /// The coordinator's lookupd list: this one, the leader. Its TCP and RPC ports do not
    /// exist here; the HTTP port stands in for them.
    fn list_lookup(&self) -> Value {
        let ip = self.addr.ip().to_string();
        let port = self.addr.port().to_string();
        let node = json!({
            "ID": format!("{ip}:{port}:{port}:nsqlookup"),
            "NodeIP": ip,
            "TcpPort": port,
            "HttpPort": port,
            "RpcPort": port,
            "Epoch": 0,
        });
        json!({ "lookupdleader": node, "lookupdnodes": [node] })
    }

    fn create(&self, req: &Request) -> Response {
        let Some(topic) = req.query.get("topic") else {
            return Response::error(400, "MISSING_ARG_TOPIC");
        };
        if !valid_name(topic) {
            return Response::error(400, "INVALID_ARG_TOPIC");
        }
        let Some(partition_num) = req.query.get("partition_num") else {
            return Response::error(400, "MISSING_ARG_TOPIC_PARTITION_NUM");
        };
        let Ok(partition_num) = partition_num.parse::<u32>() else {
            return Response::error(400, "INVALID_ARG_TOPIC_PARTITION_NUM");
        };
        let Some(replicator) = req.query.get("replicator") else {
            return Response::error(400, "MISSING_ARG_TOPIC_REPLICATOR");
        };
        let Ok(replicator) = replicator.parse::<u32>() else {
            return Response::error(400, "INVALID_ARG_TOPIC_REPLICATOR");
        };
        let flag = |name: &str| req.query.get(name).is_some_and(|v| v == "true");
        match self.state.create(
            topic,
            partition_num,
            replicator,
            flag("orderedmulti"),
            flag("multipart"),
        ) {
            Ok(()) => Response::text(""),
            Err((status, message)) => Response::error(status, &message),
        }
    }

    fn delete(&self, req: &Request) -> Response {
        let Some(topic) = req.query.get("topic") else {
            return Response::error(400, "MISSING_ARG_TOPIC");
        };
        match req.query.get("partition").map(String::as_str) {
            None => Response::error(400, "MISSING_ARG_TOPIC_PARTITION"),
            Some("**") => match self.state.delete(topic) {
                Ok(()) => Response::text(""),
                Err((status, message)) => Response::error(status, &message),
            },
            Some(_) => Response::error(400, "REMOVE_SINGLE_PARTITION_NOT_ALLOWED"),
        }
    }
}
