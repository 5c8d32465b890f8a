//! The client's side of a Youzan cluster (nsqds with the coordinator, `cluster = true`):
//! topics are created and deleted through nsqlookupd, and each channel's partition is
//! published to its leader, found with `/lookup` and followed when it moves.
//!
//! Guarantees: a channel whose topic does not exist is created (`partitions` × `replicas`)
//! when `create_topics` is on, and is [`Error::UnknownChannel`] naming it otherwise; a
//! partition without a leader (a new topic's first seconds, a failover) is waited for up to
//! `leader_wait`, retrying with backoff (50 ms doubling to 1 s) while nsqd answers
//! `E_FAILED_ON_NOT_LEADER` or `E_TOPIC_NOT_EXIST` or lookupd lists no leader, then
//! [`Error::Timeout`] (a subscription likewise: its SUB is retried while no leader takes it);
//! a publish is only retried where the refusal says it was not stored
//! (those two codes) or where the connection failed (then, as on any nsqd, it may have been
//! stored: at least once).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use msgstream::sync::lock;
use msgstream::{Error, Result};

use super::{map_err, BACKEND};
use crate::codec::TraceReceipt;
use crate::conn::ConnConfig;
use crate::consumer::Consumer as NsqPush;
use crate::lookup::{self, Created, Topology};
use crate::producer::{Producer as NsqPublisher, ProducerConfig};

/// Timeout of one lookupd request.
const LOOKUPD_TIMEOUT: Duration = Duration::from_secs(10);
/// First pause between attempts while waiting for a leader.
const FIRST_PAUSE: Duration = Duration::from_millis(50);
/// Longest pause between attempts.
const MAX_PAUSE: Duration = Duration::from_secs(1);

/// The cluster settings and what the client learned about the cluster.
pub(crate) struct Cluster {
    pub lookupd: Vec<String>,
    /// The partition every channel lives in.
    pub partition: u32,
    /// Layout of the topics the client creates.
    pub partitions: u32,
    pub replicas: u32,
    pub create_topics: bool,
    pub leader_wait: Duration,
    pub conn: ConnConfig,
    /// The TCP address of the partition's leader, per topic, as last looked up.
    leaders: Mutex<HashMap<String, String>>,
    /// One publisher per nsqd, opened on first use.
    publishers: Mutex<HashMap<String, Arc<NsqPublisher>>>,
}

/// Whether a publish refusal means the partition is not (or no longer) led by that nsqd:
/// then the message was not stored and the leader must be looked up again.
fn leader_moved(e: &crate::Error) -> bool {
    match e {
        crate::Error::Server { error, .. } => {
            matches!(
                error.code.as_str(),
                "E_FAILED_ON_NOT_LEADER" | "E_TOPIC_NOT_EXIST"
            )
        }
        crate::Error::Io { .. } | crate::Error::Closed(_) | crate::Error::NoServer(_) => true,
        _ => false,
    }
}

/// Pauses that double from [`FIRST_PAUSE`] to [`MAX_PAUSE`] until `deadline`.
struct Patience {
    deadline: Instant,
    pause: Duration,
    waited: Duration,
}

impl Patience {
    fn new(wait: Duration) -> Patience {
        Patience {
            deadline: Instant::now() + wait,
            pause: FIRST_PAUSE,
            waited: wait,
        }
    }

    /// Sleeps before the next attempt, or fails with the timeout once the deadline passed.
    async fn pause(&mut self, topic: &str, partition: u32, why: &str) -> Result<()> {
        let now = Instant::now();
        if now >= self.deadline {
            tracing::warn!(
                topic,
                partition,
                "no leader for the partition after {:?}: {why}",
                self.waited
            );
            return Err(Error::Timeout(self.waited));
        }
        tokio::time::sleep(self.pause.min(self.deadline - now)).await;
        self.pause = (self.pause * 2).min(MAX_PAUSE);
        Ok(())
    }
}

impl Cluster {
    pub(crate) fn new(config: &crate::NsqConfig, conn: ConnConfig) -> Cluster {
        Cluster {
            lookupd: config.lookupd.clone(),
            partition: config.partition,
            partitions: config.partitions,
            replicas: config.replicas,
            create_topics: config.create_topics,
            leader_wait: Duration::from_millis(config.leader_wait_ms),
            conn,
            leaders: Mutex::default(),
            publishers: Mutex::default(),
        }
    }

    /// What the first lookupd that answers says about `topic`.
    async fn topology(&self, topic: &str) -> Result<Topology> {
        let mut last = None;
        for addr in &self.lookupd {
            match lookup::lookup_topology(addr, topic, LOOKUPD_TIMEOUT).await {
                Ok(topology) => return Ok(topology),
                Err(e) => last = Some(map_err(e)),
            }
        }
        Err(last.unwrap_or_else(|| Error::transient(BACKEND, "no lookupd configured")))
    }

    /// The configured partition's leader in `topology`, checking the topic has that
    /// partition.
    fn leader_in(&self, topic: &str, topology: &Topology) -> Result<Option<String>> {
        if let Some(meta) = topology.meta {
            if self.partition >= meta.partition_num {
                return Err(Error::InvalidArgument(format!(
                    "[nsq] partition {} is not a partition of topic {topic:?}, which has {}",
                    self.partition, meta.partition_num
                )));
            }
        }
        Ok(topology
            .endpoints
            .iter()
            .find(|e| e.partition == Some(self.partition))
            .map(|e| e.tcp.clone()))
    }

    /// Makes sure `topic` exists with the configured partition and that lookupd lists a node
    /// for it: creates it through lookupd when it is missing and `create_topics` is on.
    pub(crate) async fn ensure_topic(&self, topic: &str) -> Result<()> {
        let topology = self.topology(topic).await?;
        if topology.meta.is_none() && topology.endpoints.is_empty() {
            if !self.create_topics {
                return Err(Error::UnknownChannel {
                    channel: topic.to_string(),
                });
            }
            self.create(topic).await?;
        }
        let mut patience = Patience::new(self.leader_wait);
        loop {
            let topology = self.topology(topic).await?;
            if let Some(leader) = self.leader_in(topic, &topology)? {
                lock(&self.leaders).insert(topic.to_string(), leader);
                return Ok(());
            }
            patience
                .pause(topic, self.partition, "lookupd lists no node for it")
                .await?;
        }
    }

    /// `POST /topic/create` on the first lookupd that answers. A topic that exists with
    /// another layout is fine when it has the configured partition (checked by the caller).
    async fn create(&self, topic: &str) -> Result<()> {
        if self.partition >= self.partitions {
            return Err(Error::InvalidArgument(format!(
                "[nsq] partition {} needs partitions > {0} to create topic {topic:?} (partitions = {})",
                self.partition, self.partitions
            )));
        }
        let mut last = None;
        for addr in &self.lookupd {
            match lookup::create_topic(addr, topic, self.partitions, self.replicas, LOOKUPD_TIMEOUT)
                .await
            {
                Ok(Created::Created | Created::AlreadyExists) => return Ok(()),
                Err(e @ crate::Error::Protocol { .. }) => {
                    return Err(Error::backend(BACKEND, e.to_string()))
                }
                Err(e) => last = Some(map_err(e)),
            }
        }
        Err(last.unwrap_or_else(|| Error::transient(BACKEND, "no lookupd configured")))
    }

    /// The leader's TCP address: cached, or looked up (`None` while lookupd lists none). A
    /// topic lookupd no longer knows is `UnknownChannel`.
    async fn leader(&self, topic: &str) -> Result<Option<String>> {
        if let Some(addr) = lock(&self.leaders).get(topic) {
            return Ok(Some(addr.clone()));
        }
        let topology = self.topology(topic).await?;
        if topology.meta.is_none() && topology.endpoints.is_empty() {
            return Err(Error::UnknownChannel {
                channel: topic.to_string(),
            });
        }
        let leader = self.leader_in(topic, &topology)?;
        if let Some(addr) = &leader {
            lock(&self.leaders).insert(topic.to_string(), addr.clone());
        }
        Ok(leader)
    }

    /// Forgets the topic's leader and the lookups made for it (the topic was deleted).
    pub(crate) fn forget(&self, topic: &str) {
        lock(&self.leaders).remove(topic);
    }

    fn publisher(&self, addr: &str) -> Result<Arc<NsqPublisher>> {
        let mut publishers = lock(&self.publishers);
        if let Some(p) = publishers.get(addr) {
            return Ok(p.clone());
        }
        let publisher = Arc::new(
            NsqPublisher::new(ProducerConfig {
                nsqd: vec![addr.to_string()],
                conn: self.conn.clone(),
                ..ProducerConfig::default()
            })
            .map_err(map_err)?,
        );
        publishers.insert(addr.to_string(), publisher.clone());
        Ok(publisher)
    }

    /// PUB_TRACE into the configured partition of `topic` on its leader, following the
    /// leader when it moves and waiting for one while there is none.
    pub(crate) async fn publish(&self, topic: &str, body: &[u8]) -> Result<TraceReceipt> {
        let mut patience = Patience::new(self.leader_wait);
        loop {
            let why = match self.leader(topic).await? {
                None => "lookupd lists no leader".to_string(),
                Some(addr) => {
                    let publisher = self.publisher(&addr)?;
                    match publisher
                        .publish_trace(topic, self.partition, 0, body)
                        .await
                    {
                        Ok(receipt) => return Ok(receipt),
                        Err(e) if leader_moved(&e) => {
                            tracing::debug!(topic, addr, "not the leader (any more): {e}");
                            lock(&self.leaders).remove(topic);
                            e.to_string()
                        }
                        Err(e) => return Err(map_err(e)),
                    }
                }
            };
            patience.pause(topic, self.partition, &why).await?;
        }
    }

    /// Waits until `consumer` is subscribed on the partition's leader (it retries a SUB the
    /// node refuses, asking lookupd again with backoff), for up to `leader_wait`; then stops it
    /// and fails with [`Error::Timeout`], as a publish does.
    pub(crate) async fn await_leader(&self, consumer: &NsqPush, topic: &str) -> Result<()> {
        if consumer.wait_connected(self.leader_wait).await {
            return Ok(());
        }
        tracing::warn!(
            topic,
            partition = self.partition,
            "no leader took the subscription after {:?}",
            self.leader_wait
        );
        consumer.stop().await;
        Err(Error::Timeout(self.leader_wait))
    }

    /// Deletes every partition of `topic` through lookupd.
    pub(crate) async fn delete_topic(&self, topic: &str) -> Result<()> {
        let mut last = None;
        for addr in &self.lookupd {
            match lookup::delete_topic(addr, topic, LOOKUPD_TIMEOUT).await {
                Ok(()) => {
                    self.forget(topic);
                    return Ok(());
                }
                Err(e @ crate::Error::Protocol { .. }) => {
                    return Err(Error::backend(BACKEND, e.to_string()))
                }
                Err(e) => last = Some(map_err(e)),
            }
        }
        Err(last.unwrap_or_else(|| Error::transient(BACKEND, "no lookupd configured")))
    }

    /// Closes the publishers.
    pub(crate) async fn close(&self) {
        let publishers: Vec<Arc<NsqPublisher>> =
            lock(&self.publishers).drain().map(|(_, p)| p).collect();
        for publisher in publishers {
            publisher.close().await;
        }
    }
}
