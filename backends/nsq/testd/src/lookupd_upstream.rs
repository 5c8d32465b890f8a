//! nsqlookupd 1.3.0's HTTP API (U7): a registration database fed by the servers'
//! announcements (`REGISTER` / `UNREGISTER`, see [`crate::announce`]) and by the lookupd's own
//! `/topic/create`, `/channel/create` and deletes. As on the real lookupd a registration
//! outlives its producers (a topic deleted on its nsqd is still listed by `/topics`) until the
//! lookupd itself deletes it, and replies are bare JSON whatever the Accept header.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use crate::announce::Announcement;
use crate::http::{Handler, Request, Response};
use crate::{valid_name, Shared};

/// `(topic, channel)`; `None` is the topic's own registration.
type Key = (String, Option<String>);

#[derive(Default)]
struct Db {
    /// Registration → the servers (indexes) that registered it.
    registrations: BTreeMap<Key, BTreeSet<usize>>,
    /// How far each server's announcements were read.
    read: Vec<usize>,
}

/// The upstream lookupd's request handler.
pub(crate) struct UpstreamLookup {
    pub servers: Arc<Mutex<Vec<Arc<Shared>>>>,
    db: Mutex<Db>,
}

impl UpstreamLookup {
    pub(crate) fn new(servers: Arc<Mutex<Vec<Arc<Shared>>>>) -> UpstreamLookup {
        UpstreamLookup {
            servers,
            db: Mutex::new(Db::default()),
        }
    }
}

impl Db {
    /// Applies what each server announced since the last request.
    fn catch_up(&mut self, servers: &[Arc<Shared>]) {
        self.read.resize(servers.len(), 0);
        for (index, server) in servers.iter().enumerate() {
            let news: Vec<Announcement> = server.store().announcer.log[self.read[index]..].to_vec();
            self.read[index] += news.len();
            for news in news {
                self.apply(index, news);
            }
        }
    }

    fn apply(&mut self, server: usize, news: Announcement) {
        match news {
            Announcement::Register { topic, channel } => {
                self.registrations
                    .entry((topic, channel))
                    .or_default()
                    .insert(server);
            }
            Announcement::Unregister { topic, channel } => {
                // A topic's unregistration also takes the server off its channels.
                let keys: Vec<Key> = match &channel {
                    Some(_) => vec![(topic.clone(), channel.clone())],
                    None => self
                        .registrations
                        .keys()
                        .filter(|(t, _)| *t == topic)
                        .cloned()
                        .collect(),
                };
                for key in keys {
                    let left = self.registrations.get_mut(&key).map(|producers| {
                        producers.remove(&server);
                        producers.len()
                    });
                    let ephemeral = key.1.as_deref().unwrap_or(&key.0).ends_with("#ephemeral");
                    if left == Some(0) && ephemeral {
                        self.registrations.remove(&key);
                    }
                }
            }
        }
    }

    fn channels(&self, topic: &str) -> Vec<&String> {
        self.registrations
            .keys()
            .filter(|(t, _)| t == topic)
            .filter_map(|(_, c)| c.as_ref())
            .collect()
    }
}

fn peer(shared: &Shared) -> Value {
    json!({
        "remote_address": shared.tcp_addr.to_string(),
        "hostname": "testd",
        "broadcast_address": shared.tcp_addr.ip().to_string(),
        "tcp_port": shared.tcp_addr.port(),
        "http_port": shared.http_addr.port(),
        "version": shared.options.extensions.version(),
    })
}

/// `topic` (and `channel`) arguments with nsqlookupd's codes.
fn args(req: &Request, with_channel: bool) -> Result<(String, Option<String>), Response> {
    let topic = req
        .query
        .get("topic")
        .ok_or_else(|| Response::error(400, "MISSING_ARG_TOPIC"))?;
    if !valid_name(topic) {
        return Err(Response::error(400, "INVALID_ARG_TOPIC"));
    }
    if !with_channel {
        return Ok((topic.clone(), None));
    }
    let channel = req
        .query
        .get("channel")
        .ok_or_else(|| Response::error(400, "MISSING_ARG_CHANNEL"))?;
    if !valid_name(channel) {
        return Err(Response::error(400, "INVALID_ARG_CHANNEL"));
    }
    Ok((topic.clone(), Some(channel.clone())))
}

impl Handler for UpstreamLookup {
    fn max_body(&self) -> usize {
        0
    }

    fn handle(&self, req: Request) -> Response {
        let servers = self
            .servers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let mut db = self.db.lock().unwrap_or_else(|p| p.into_inner());
        db.catch_up(&servers);
        let post = req.method == "POST";
        let result = match (req.path.as_str(), post) {
            ("/ping", _) => return Response::text("OK"),
            ("/info", _) => json!({ "version": "1.3.0" }),
            ("/topics", _) => {
                let topics: Vec<&String> = db
                    .registrations
                    .keys()
                    .filter(|(_, c)| c.is_none())
                    .map(|(t, _)| t)
                    .collect();
                json!({ "topics": topics })
            }
            ("/channels", _) => match args(&req, false) {
                Ok((topic, _)) => json!({ "channels": db.channels(&topic) }),
                Err(r) => return r,
            },
            ("/lookup", _) => {
                let Some(topic) = req.query.get("topic") else {
                    return Response::error(400, "MISSING_ARG_TOPIC");
                };
                let Some(producers) = db.registrations.get(&(topic.clone(), None)) else {
                    return Response::error(404, "TOPIC_NOT_FOUND");
                };
                let producers: Vec<Value> = producers
                    .iter()
                    .filter_map(|i| servers.get(*i))
                    .map(|s| peer(s))
                    .collect();
                json!({ "channels": db.channels(topic), "producers": producers })
            }
            ("/nodes", _) => {
                let nodes: Vec<Value> = servers
                    .iter()
                    .enumerate()
                    .map(|(index, server)| {
                        let topics: Vec<&String> = db
                            .registrations
                            .iter()
                            .filter(|((_, c), producers)| c.is_none() && producers.contains(&index))
                            .map(|((t, _), _)| t)
                            .collect();
                        let mut node = peer(server);
                        node["tombstones"] = json!(vec![false; topics.len()]);
                        node["topics"] = json!(topics);
                        node
                    })
                    .collect();
                json!({ "producers": nodes })
            }
            ("/topic/create", true) => match args(&req, false) {
                Ok((topic, _)) => {
                    db.registrations.entry((topic, None)).or_default();
                    return Response::text("");
                }
                Err(r) => return r,
            },
            ("/topic/delete", true) => match args(&req, false) {
                Ok((topic, _)) => {
                    db.registrations.retain(|(t, _), _| *t != topic);
                    return Response::text("");
                }
                Err(r) => return r,
            },
            ("/channel/create", true) => match args(&req, true) {
                Ok((topic, channel)) => {
                    db.registrations.entry((topic.clone(), None)).or_default();
                    db.registrations.entry((topic, channel)).or_default();
                    return Response::text("");
                }
                Err(r) => return r,
            },
            ("/channel/delete", true) => match args(&req, true) {
                Ok(key) => {
                    if db.registrations.remove(&key).is_none() {
                        return Response::error(404, "CHANNEL_NOT_FOUND");
                    }
                    return Response::text("");
                }
                Err(r) => return r,
            },
            ("/topic/create" | "/topic/delete" | "/channel/create" | "/channel/delete", false) => {
                return Response::error(405, "METHOD_NOT_ALLOWED")
            }
            _ => return Response::error(404, "NOT_FOUND"),
        };
        Response::json(&result)
    }
}
