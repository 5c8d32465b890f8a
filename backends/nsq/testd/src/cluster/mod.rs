//! A Youzan cluster in one process: a test nsqlookupd (the coordinator's HTTP face, see
//! `lookupd`) over N test nsqds in coordinator mode that share the cluster's topic metadata.
//!
//! What a real cluster (nsqd/nsqlookupd 0.3.7-HA.1.13.0 with etcd, transcripts Y1-Y7) does and
//! this one reproduces: topics are created and deleted only through the lookupd; nsqd refuses
//! `INTERNAL_CREATE_TOPIC` (non-fatal `E_CREATE_TOPIC_FAILED`) and has no HTTP `/topic/create`;
//! partition `p` of a topic lives on node `p mod N` (its leader) and, with replicas, on the
//! following nodes (followers); until the leader is elected (`leader_delay` after the create,
//! 8-16 s on a real cluster) the future leader answers `E_FAILED_ON_NOT_LEADER ` and every other
//! node `E_TOPIC_NOT_EXIST `; a follower always answers `E_FAILED_ON_NOT_LEADER `. A test can
//! move a partition's leader ([`TestCluster::move_leader`]), as a failover does.

mod lookupd;
mod nsqd_http;

pub(crate) use nsqd_http::gate;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::{Extensions, Options, Shared, TestServer};

/// How a [`TestCluster`] is laid out and how fast it elects leaders.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// Number of nsqds (at least 1).
    pub nsqds: usize,
    /// Time from a topic's creation until its partitions have leaders. Meanwhile PUB and SUB
    /// answer `E_FAILED_ON_NOT_LEADER ` on the future leader.
    pub leader_delay: Duration,
    /// Time from a topic's creation until lookupd lists its partitions (about 2 s on a real
    /// cluster; never more than `leader_delay` here).
    pub registration_delay: Duration,
    /// Limits of every nsqd (`extensions` is forced to `Partitions`).
    pub nsqd: Options,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        ClusterOptions {
            nsqds: 2,
            leader_delay: Duration::ZERO,
            registration_delay: Duration::ZERO,
            nsqd: Options::default(),
        }
    }
}

/// The cluster's view of one topic, as the lookupd's `meta` reports it.
#[derive(Debug, Clone)]
pub(crate) struct TopicMeta {
    pub partition_num: u32,
    pub replica: u32,
    pub ordered: bool,
    pub multi_part: bool,
    pub ext: bool,
    /// When lookupd starts listing the partitions.
    pub listed_at: Instant,
    pub partitions: Vec<PartitionMeta>,
}

/// Where one partition lives.
#[derive(Debug, Clone)]
pub(crate) struct PartitionMeta {
    /// Leader first, then the followers.
    pub replicas: Vec<usize>,
    /// When the leader starts serving.
    pub ready_at: Instant,
}

impl PartitionMeta {
    pub(crate) fn leader(&self) -> usize {
        self.replicas[0]
    }
}

/// What one node may do with one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// The node leads the partition: PUB and SUB are served.
    Leader,
    /// A follower, or the leader before its election: `E_FAILED_ON_NOT_LEADER `.
    NotLeader,
    /// The node does not hold the partition (or the topic does not exist): `E_TOPIC_NOT_EXIST `.
    NotHere,
}

/// A lookupd refusal: status and the `message`.
pub(crate) type Refusal = (u16, String);

/// The metadata every node of one cluster shares (the coordinator's, held in etcd for real).
pub(crate) struct ClusterState {
    leader_delay: Duration,
    registration_delay: Duration,
    topics: Mutex<BTreeMap<String, TopicMeta>>,
    nodes: OnceLock<Vec<Weak<Shared>>>,
}

/// One nsqd's handle on its cluster.
#[derive(Clone)]
pub(crate) struct ClusterNode {
    pub state: Arc<ClusterState>,
    pub index: usize,
}

impl ClusterNode {
    /// What this node may do with `partition` of `topic` now.
    pub(crate) fn access(&self, topic: &str, partition: u32) -> Access {
        self.state
            .access(topic, partition, self.index, Instant::now())
    }

    /// The partition a command without one uses: the first one this node holds.
    pub(crate) fn own_partition(&self, topic: &str) -> Option<u32> {
        let topics = self.state.topics();
        let meta = topics.get(topic)?;
        (0u32..)
            .zip(&meta.partitions)
            .find(|(_, p)| p.replicas.contains(&self.index))
            .map(|(pid, _)| pid)
    }

    /// Every topic's metadata as it is now (a copy: callers may then lock a store).
    pub(crate) fn metas(&self) -> BTreeMap<String, TopicMeta> {
        self.state.topics().clone()
    }

    /// Whether the topic was created as an ordered (`orderedmulti`) one.
    pub(crate) fn ordered(&self, topic: &str) -> bool {
        self.state.topics().get(topic).is_some_and(|m| m.ordered)
    }
}

impl ClusterState {
    fn topics(&self) -> MutexGuard<'_, BTreeMap<String, TopicMeta>> {
        self.topics.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn nodes(&self) -> Vec<Arc<Shared>> {
        self.nodes
            .get()
            .map(|nodes| nodes.iter().filter_map(Weak::upgrade).collect())
            .unwrap_or_default()
    }

    fn node_count(&self) -> usize {
        self.nodes.get().map_or(0, Vec::len)
    }

    /// What `node` may do with `partition` of `topic` at `now`.
    pub(crate) fn access(&self, topic: &str, partition: u32, node: usize, now: Instant) -> Access {
        let topics = self.topics();
        let Some(part) = topics
            .get(topic)
            .and_then(|m| m.partitions.get(partition as usize))
        else {
            return Access::NotHere;
        };
        if part.leader() == node {
            if now >= part.ready_at {
                Access::Leader
            } else {
                Access::NotLeader
            }
        } else if part.replicas.contains(&node) {
            Access::NotLeader
        } else {
            Access::NotHere
        }
    }

    /// A snapshot of one topic's metadata.
    pub(crate) fn topic(&self, topic: &str) -> Option<TopicMeta> {
        self.topics().get(topic).cloned()
    }

    /// Every topic's name.
    pub(crate) fn topic_names(&self) -> Vec<String> {
        self.topics().keys().cloned().collect()
    }

    /// lookupd `/topic/create`: places the partitions (leader of `p` on node `p mod N`, the
    /// followers on the next nodes) and creates them in their leaders' stores. Creating an
    /// existing topic with the same layout succeeds (the real lookupd re-checks it); with
    /// another layout it is `already exist`. Without `multi_part` a node holds at most one
    /// replica of a topic, so `partition_num × replica` must fit on the nodes.
    pub(crate) fn create(
        &self,
        topic: &str,
        partition_num: u32,
        replica: u32,
        ordered: bool,
        multi_part: bool,
    ) -> Result<(), Refusal> {
        let n = self.node_count();
        let mut topics = self.topics();
        if let Some(existing) = topics.get(topic) {
            let same = existing.partition_num == partition_num
                && existing.replica == replica
                && existing.ordered == ordered
                && existing.multi_part == multi_part;
            return if same {
                Ok(())
            } else {
                Err((400, "already exist".into()))
            };
        }
        let replica_count = replica as usize;
        let slots = partition_num as usize * replica_count;
        if partition_num == 0
            || replica_count == 0
            || replica_count > n
            || (!multi_part && !ordered && slots > n)
        {
            return Err((
                400,
                "ErrType:9 ErrCode:1 : No node is available for topic".into(),
            ));
        }
        let now = Instant::now();
        let partitions: Vec<PartitionMeta> = (0..partition_num as usize)
            .map(|p| PartitionMeta {
                replicas: (0..replica_count).map(|k| (p + k) % n).collect(),
                ready_at: now + self.leader_delay,
            })
            .collect();
        let nodes = self.nodes();
        for (pid, part) in (0u32..).zip(&partitions) {
            if let Some(leader) = nodes.get(part.leader()) {
                leader
                    .store()
                    .partition_entry(topic, pid)
                    .channels_start_at_end = true;
            }
        }
        topics.insert(
            topic.to_string(),
            TopicMeta {
                partition_num,
                replica,
                ordered,
                multi_part,
                ext: false,
                listed_at: now + self.registration_delay.min(self.leader_delay),
                partitions,
            },
        );
        Ok(())
    }

    /// lookupd `/topic/delete?partition=**`: forgets the topic and drops it, and its clients'
    /// connections, on every node.
    pub(crate) fn delete(&self, topic: &str) -> Result<(), Refusal> {
        if self.topics().remove(topic).is_none() {
            return Err((500, "Key not found".into()));
        }
        for node in self.nodes() {
            let mut store = node.store();
            store.topics.remove(topic);
            crate::api::close_subscribers(&mut store, |sub| sub.topic == topic);
        }
        Ok(())
    }

    /// Makes `to` the leader of `partition` of `topic` at once (a failover): the partition's
    /// messages and channels move to `to`, what was in flight is delivered again, and the old
    /// leader closes its consumers' connections.
    fn move_leader(&self, topic: &str, partition: u32, to: usize) -> Result<(), String> {
        let nodes = self.nodes();
        if to >= nodes.len() {
            return Err(format!("no node {to}"));
        }
        let mut topics = self.topics();
        let part = topics
            .get_mut(topic)
            .and_then(|m| m.partitions.get_mut(partition as usize))
            .ok_or_else(|| format!("no partition {partition} of {topic}"))?;
        let from = part.leader();
        if from == to {
            return Ok(());
        }
        let moved = {
            let mut store = nodes[from].store();
            crate::api::close_subscribers(&mut store, |sub| {
                sub.topic == topic && sub.partition == partition
            });
            store
                .topics
                .get_mut(topic)
                .and_then(|t| t.partitions.remove(&partition))
        };
        part.replicas.retain(|n| *n != to);
        part.replicas.insert(0, to);
        if let Some(mut moved) = moved {
            let now = Instant::now();
            for channel in moved.channels.values_mut() {
                channel.requeue_all(now);
            }
            let mut store = nodes[to].store();
            store
                .topics
                .entry(topic.to_string())
                .or_default()
                .partitions
                .insert(partition, moved);
            store.pump(now);
        }
        Ok(())
    }
}

/// A running cluster; dropping it stops the lookupd and every nsqd.
pub struct TestCluster {
    state: Arc<ClusterState>,
    nsqds: Vec<TestServer>,
    lookupd: SocketAddr,
    task: JoinHandle<()>,
}

impl TestCluster {
    /// Starts `options.nsqds` nsqds in coordinator mode and their lookupd, on free loopback
    /// ports.
    pub async fn start(options: ClusterOptions) -> std::io::Result<TestCluster> {
        let state = Arc::new(ClusterState {
            leader_delay: options.leader_delay,
            registration_delay: options.registration_delay,
            topics: Mutex::default(),
            nodes: OnceLock::new(),
        });
        let mut nsqds = Vec::new();
        for index in 0..options.nsqds.max(1) {
            let node = ClusterNode {
                state: state.clone(),
                index,
            };
            let nsqd = Options {
                extensions: Extensions::Partitions,
                ..options.nsqd.clone()
            };
            nsqds
                .push(TestServer::bind_node(nsqd, "127.0.0.1:0", "127.0.0.1:0", Some(node)).await?);
        }
        let weak = nsqds.iter().map(|s| Arc::downgrade(&s.shared())).collect();
        // Set once, right here: the state was created above and is not shared yet.
        let _ = state.nodes.set(weak);
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let lookupd = listener.local_addr()?;
        let handler = lookupd::Lookupd {
            state: state.clone(),
            addr: lookupd,
        };
        let task = tokio::spawn(crate::http::serve(listener, Arc::new(handler)));
        Ok(TestCluster {
            state,
            nsqds,
            lookupd,
            task,
        })
    }

    /// The nsqds, node 0 first.
    pub fn nsqds(&self) -> &[TestServer] {
        &self.nsqds
    }

    /// The lookupd's HTTP address.
    pub fn lookupd_http_addr(&self) -> SocketAddr {
        self.lookupd
    }

    /// The node leading `partition` of `topic`, if the topic exists.
    pub fn leader_of(&self, topic: &str, partition: u32) -> Option<usize> {
        self.state
            .topic(topic)
            .and_then(|m| m.partitions.get(partition as usize).map(|p| p.leader()))
    }

    /// Returns once every partition of `topic` has a serving leader (the configured leader
    /// delay after the create); at once for a topic the cluster does not know.
    pub async fn leaders_elected(&self, topic: &str) {
        let ready = self
            .state
            .topic(topic)
            .and_then(|m| m.partitions.iter().map(|p| p.ready_at).max());
        if let Some(at) = ready {
            tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await;
        }
    }

    /// Moves the leadership of `partition` of `topic` to node `to`, with its data, as a
    /// failover does; the old leader's consumers are disconnected.
    pub fn move_leader(&self, topic: &str, partition: u32, to: usize) -> Result<(), String> {
        self.state.move_leader(topic, partition, to)
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        self.task.abort();
    }
}
