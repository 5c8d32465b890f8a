//! A test nsqlookupd over several [`TestServer`]s. Over upstream servers it answers as
//! nsqlookupd 1.3.0 ([`crate::lookupd_upstream`]); over servers with the extensions it answers
//! as the Youzan lookupd without coordinator (transcript Y8): `/ping`, `/info`, `/lookup`
//! (with the partition map; `access=w` lists only partitions that have a channel, Y8 138-140)
//! and `/topics`, replies wrapped in `{"status_code","status_txt","data"}` unless the client
//! sends `Accept: application/vnd.nsq; version=1.0`; topic create and delete need the
//! coordinator (`500 MISSING_COORDINATOR`, Y8 141-144).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use serde_json::{json, Map, Value};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::http::{Handler, Request, Response};
use crate::lookupd_upstream::UpstreamLookup;
use crate::{Shared, TestServer};

/// A running lookupd; dropping it stops it.
pub struct TestLookupd {
    addr: SocketAddr,
    servers: Arc<Mutex<Vec<Arc<Shared>>>>,
    task: JoinHandle<()>,
}

struct Lookup(Arc<Mutex<Vec<Arc<Shared>>>>);

impl TestLookupd {
    /// Starts a lookupd on a free loopback port, knowing `servers` (an upstream lookupd when
    /// none of them speaks the extensions).
    pub async fn start(servers: &[&TestServer]) -> std::io::Result<TestLookupd> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let upstream = servers
            .iter()
            .all(|s| !s.shared().options.extensions.partitions());
        let servers = Arc::new(Mutex::new(servers.iter().map(|s| s.shared()).collect()));
        let handler: Arc<dyn Handler> = if upstream {
            Arc::new(UpstreamLookup::new(Arc::clone(&servers)))
        } else {
            Arc::new(Lookup(Arc::clone(&servers)))
        };
        let task = tokio::spawn(crate::http::serve(listener, handler));
        Ok(TestLookupd {
            addr,
            servers,
            task,
        })
    }

    /// The HTTP address.
    pub fn http_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Makes another server known (as if it had registered).
    pub fn register(&self, server: &TestServer) {
        self.servers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(server.shared());
    }
}

impl Drop for TestLookupd {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn peer(shared: &Shared) -> Value {
    json!({
        "id": shared.tcp_addr.to_string(),
        "remote_address": shared.tcp_addr.to_string(),
        "hostname": "testd",
        "broadcast_address": shared.tcp_addr.ip().to_string(),
        "tcp_port": shared.tcp_addr.port(),
        "http_port": shared.http_addr.port(),
        "version": shared.options.extensions.version(),
        // The coordinator's node id; empty without one.
        "distributed_id": "",
    })
}

impl Handler for Lookup {
    fn max_body(&self) -> usize {
        0
    }

    fn handle(&self, req: Request) -> Response {
        let servers = self.0.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let data = match req.path.as_str() {
            "/ping" => return Response::text("OK"),
            "/info" => json!({
                "version": crate::Extensions::Partitions.version(),
                "ha_support": false,
            }),
            "/topic/create" | "/topic/delete" => {
                return Response::error(500, "MISSING_COORDINATOR")
            }
            "/topics" => {
                let mut names: Vec<String> = servers
                    .iter()
                    .flat_map(|s| s.store().topics.keys().cloned().collect::<Vec<_>>())
                    .collect();
                names.sort();
                names.dedup();
                json!({ "topics": names })
            }
            "/lookup" => {
                let Some(topic) = req.query.get("topic") else {
                    return Response::error(400, "MISSING_ARG_TOPIC");
                };
                let only: Option<u32> = req.query.get("partition").and_then(|p| p.parse().ok());
                let write = req.query.get("access").is_some_and(|a| a == "w");
                let mut producers = Vec::new();
                let mut partitions = Map::new();
                let mut channels = Vec::new();
                for shared in &servers {
                    let store = shared.store();
                    let Some(t) = store.topics.get(topic) else {
                        continue;
                    };
                    producers.push(peer(shared));
                    for (pid, part) in &t.partitions {
                        if only.is_some_and(|o| o != *pid) {
                            continue;
                        }
                        channels.extend(part.channels.keys().cloned());
                        if write && part.channels.is_empty() {
                            continue;
                        }
                        if shared.options.extensions.partitions() {
                            partitions.insert(pid.to_string(), peer(shared));
                        }
                    }
                }
                if producers.is_empty() {
                    return Response::error(404, "TOPIC_NOT_FOUND");
                }
                channels.sort();
                channels.dedup();
                let mut reply = json!({ "channels": channels, "producers": producers });
                if !partitions.is_empty() {
                    reply["partitions"] = Value::Object(partitions);
                }
                reply
            }
            _ => return Response::error(404, "NOT_FOUND"),
        };
        if req.accept.contains("application/vnd.nsq") {
            Response::json(&data)
        } else {
            Response::json(&json!({ "status_code": 200, "status_txt": "OK", "data": data }))
        }
    }
}
