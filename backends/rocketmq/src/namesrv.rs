//! The name-server client: topic routes with a cache, cluster info, and failover between
//! several name servers.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::protocol::codes;
use crate::protocol::route::TopicRoute;
use crate::remoting::{check, Command, Remoting};

/// Routes are re-fetched when older than this, so new queues and brokers are noticed.
pub const ROUTE_TTL: Duration = Duration::from_secs(30);

/// Name servers tried in turn: a request moves on to the next one when the current one fails
/// with a transient error, and the one that answered stays current.
pub struct NameServers {
    addrs: Vec<String>,
    current: AtomicUsize,
    remoting: Arc<Remoting>,
    timeout: Duration,
    /// Routes with when they were fetched; `None` once invalidated (kept, as the last known
    /// route, for name-server outages and for telling a lost broker from a deleted topic).
    routes: Mutex<HashMap<String, Cached>>,
}

type Cached = (Arc<TopicRoute>, Option<Instant>);

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ClusterInfo {
    #[serde(default)]
    broker_addr_table: HashMap<String, BrokerAddrs>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct BrokerAddrs {
    #[serde(default)]
    broker_addrs: HashMap<String, String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TopicList {
    #[serde(default)]
    topic_list: Vec<String>,
}

impl NameServers {
    /// Name servers at `addrs` (`host:port`), reached through `remoting`.
    pub fn new(addrs: Vec<String>, remoting: Arc<Remoting>, timeout: Duration) -> Result<Self> {
        if addrs.is_empty() {
            return Err(Error::InvalidArgument(
                "no name server address given".into(),
            ));
        }
        remoting.add_name_servers(&addrs);
        Ok(NameServers {
            addrs,
            current: AtomicUsize::new(0),
            remoting,
            timeout,
            routes: Mutex::default(),
        })
    }

    /// Sends `command` to the current name server, failing over on transient errors.
    async fn request(&self, command: Command) -> Result<Command> {
        let start = self.current.load(Ordering::Relaxed);
        let mut last = None;
        for i in 0..self.addrs.len() {
            let index = (start + i) % self.addrs.len();
            match self
                .remoting
                .invoke(&self.addrs[index], command.clone(), self.timeout)
                .await
            {
                Ok(response) => {
                    self.current.store(index, Ordering::Relaxed);
                    return Ok(response);
                }
                Err(e) if e.is_transient() => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| Error::InvalidArgument("no name server".into())))
    }

    /// The route of `topic`, from the cache while it is fresh.
    pub async fn route(&self, topic: &str) -> Result<Arc<TopicRoute>> {
        if let Some((route, Some(at))) = self.cached(topic) {
            if at.elapsed() < ROUTE_TTL {
                return Ok(route);
            }
        }
        self.refresh(topic).await
    }

    fn cached(&self, topic: &str) -> Option<Cached> {
        self.lock().get(topic).cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Cached>> {
        msgstream::sync::lock(&self.routes)
    }

    /// The name servers route no `topic` (TOPIC_NOT_EXIST). When every broker of its last known
    /// route is unregistered too, the brokers are down (a name server drops a broker's topics
    /// with its connection), not the topic deleted: a transient error, and the route is kept.
    async fn not_routed(&self, topic: &str) -> Error {
        let known = self.cached(topic).map(|(route, _)| route);
        if let Some(known) = known {
            if let Ok(registered) = self.masters().await {
                if !known.masters.keys().any(|b| registered.contains_key(b)) {
                    let brokers: Vec<&String> = known.masters.keys().collect();
                    return Error::Disconnected {
                        addr: "name servers".into(),
                        reason: format!(
                            "the brokers of topic {topic:?} ({brokers:?}) are not registered"
                        ),
                    };
                }
            }
        }
        self.lock().remove(topic);
        Error::TopicNotFound(topic.to_owned())
    }

    /// Fetches the route of `topic` now. A stale cached route is kept when the name servers
    /// are unreachable, so a name-server outage does not stop traffic to known brokers.
    pub async fn refresh(&self, topic: &str) -> Result<Arc<TopicRoute>> {
        let command = Command::request(
            codes::GET_ROUTE,
            [
                ("topic", topic.to_owned()),
                ("acceptStandardJsonOnly", "true".to_owned()),
            ],
        );
        let response = match self.request(command).await {
            Ok(response) => response,
            Err(e) if e.is_transient() => {
                return self.cached(topic).map(|(route, _)| route).ok_or(e);
            }
            Err(e) => return Err(e),
        };
        if response.code == codes::TOPIC_NOT_EXIST {
            return Err(self.not_routed(topic).await);
        }
        let response = check(codes::GET_ROUTE, response)?;
        let route = Arc::new(TopicRoute::parse(topic, &response.body)?);
        if route.masters.is_empty() {
            return Err(self.not_routed(topic).await);
        }
        self.lock()
            .insert(topic.to_owned(), (route.clone(), Some(Instant::now())));
        Ok(route)
    }

    /// Makes the next use of `topic`'s route fetch it again (after a send or pull error).
    pub fn invalidate(&self, topic: &str) {
        if let Some(entry) = self.lock().get_mut(topic) {
            entry.1 = None;
        }
    }

    /// Broker name → master address of every broker the name servers know.
    pub async fn masters(&self) -> Result<BTreeMap<String, String>> {
        let response = self
            .request(Command::request(codes::GET_CLUSTER_INFO, []))
            .await?;
        let response = check(codes::GET_CLUSTER_INFO, response)?;
        let info: ClusterInfo = serde_json::from_slice(&response.body)
            .map_err(|e| Error::Protocol(format!("cluster info: {e}")))?;
        Ok(info
            .broker_addr_table
            .into_iter()
            .filter_map(|(name, b)| b.broker_addrs.get("0").map(|a| (name, a.clone())))
            .collect())
    }

    /// Every topic name the name servers know, system topics included.
    pub async fn all_topics(&self) -> Result<Vec<String>> {
        let response = self
            .request(Command::request(codes::GET_ALL_TOPICS, []))
            .await?;
        let response = check(codes::GET_ALL_TOPICS, response)?;
        let list: TopicList = serde_json::from_slice(&response.body)
            .map_err(|e| Error::Protocol(format!("topic list: {e}")))?;
        Ok(list.topic_list)
    }

    /// Removes `topic` from every name server (DELETE_TOPIC_IN_NAMESRV).
    pub async fn delete_topic(&self, topic: &str) -> Result<()> {
        self.lock().remove(topic);
        for addr in &self.addrs {
            let command = Command::request(
                codes::DELETE_TOPIC_IN_NAMESRV,
                [("topic", topic.to_owned())],
            );
            let response = self.remoting.invoke(addr, command, self.timeout).await?;
            check(codes::DELETE_TOPIC_IN_NAMESRV, response)?;
        }
        Ok(())
    }
}
