//! [`Admin`]: topics, offsets and consumer groups on the brokers.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::namesrv::NameServers;
use crate::protocol::codes;
use crate::protocol::route::MessageQueue;
use crate::remoting::{check, Command, Remoting, RemotingOptions};

/// How long `create_topic` waits for the new route to reach the name servers.
const ROUTE_PROPAGATION: Duration = Duration::from_secs(10);

/// Administrative requests; cheap to clone (shared connections and route cache).
#[derive(Clone)]
pub struct Admin {
    pub(crate) remoting: Arc<Remoting>,
    pub(crate) namesrv: Arc<NameServers>,
    pub(crate) timeout: Duration,
    /// UPDATE_CONSUMER_OFFSET requests sent, shared with the consumers made from this admin.
    pub(crate) offset_updates: Arc<AtomicU64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ConsumerIdList {
    #[serde(default)]
    consumer_id_list: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GroupList {
    #[serde(default)]
    group_list: Vec<String>,
}

impl Admin {
    /// An admin client of the name servers at `name_servers` (`host:port`), with its own
    /// connections; `timeout` bounds each request.
    pub fn connect(name_servers: Vec<String>, timeout: Duration) -> Result<Admin> {
        Admin::connect_with(name_servers, timeout, RemotingOptions::default())
    }

    /// Like [`Admin::connect`], with the connections' timeouts and limits.
    pub fn connect_with(
        name_servers: Vec<String>,
        timeout: Duration,
        options: RemotingOptions,
    ) -> Result<Admin> {
        let remoting = Arc::new(Remoting::new(options, None));
        let namesrv = Arc::new(NameServers::new(name_servers, remoting.clone(), timeout)?);
        Ok(Admin {
            remoting,
            namesrv,
            timeout,
            offset_updates: Arc::default(),
        })
    }

    /// How many UPDATE_CONSUMER_OFFSET requests this admin and the consumers made from it have
    /// sent (what persisting offsets costs).
    pub fn offset_updates(&self) -> u64 {
        self.offset_updates.load(Ordering::Relaxed)
    }

    /// The name servers (routes, cluster info).
    pub fn name_servers(&self) -> &NameServers {
        &self.namesrv
    }

    /// The master address of the broker holding `mq`, checking that the queue exists.
    pub async fn broker_of(&self, mq: &MessageQueue) -> Result<String> {
        let route = self.namesrv.route(&mq.topic).await?;
        if !route.read_queues.contains(mq) && !route.write_queues.contains(mq) {
            return Err(Error::NoSuchQueue {
                topic: mq.topic.clone(),
                queue: format!("{}#{}", mq.broker, mq.queue_id),
            });
        }
        route
            .address(&mq.broker)
            .map(str::to_owned)
            .ok_or_else(|| Error::TopicNotFound(mq.topic.clone()))
    }

    async fn queue_call(&self, mq: &MessageQueue, command: Command) -> Result<Command> {
        let addr = self.broker_of(mq).await?;
        let result = self.remoting.call(&addr, command, self.timeout).await;
        if let Err(e) = &result {
            if e.is_transient() {
                self.namesrv.invalidate(&mq.topic);
            }
        }
        result.map_err(|e| match e {
            Error::Response {
                code: codes::TOPIC_NOT_EXIST,
                ..
            } => Error::TopicNotFound(mq.topic.clone()),
            other => other,
        })
    }

    /// Creates (or updates) `topic` with `queues` read and write queues on every master, then
    /// waits until the name servers route it.
    pub async fn create_topic(&self, topic: &str, queues: u32) -> Result<()> {
        self.create_topic_on(topic, queues, usize::MAX).await
    }

    /// Creates `topic` with `queues` queues on the first `brokers` masters (by name), then
    /// waits until the name servers route it there.
    pub async fn create_topic_on(&self, topic: &str, queues: u32, brokers: usize) -> Result<()> {
        let masters: Vec<String> = self
            .namesrv
            .masters()
            .await?
            .into_values()
            .take(brokers)
            .collect();
        if masters.is_empty() {
            return Err(Error::Disconnected {
                addr: "name servers".into(),
                reason: "no broker is registered".into(),
            });
        }
        for addr in &masters {
            let command = Command::request(
                codes::CREATE_TOPIC,
                [
                    ("topic", topic.to_owned()),
                    ("defaultTopic", "TBW102".to_owned()),
                    ("readQueueNums", queues.to_string()),
                    ("writeQueueNums", queues.to_string()),
                    ("perm", "6".to_owned()),
                    ("topicFilterType", "SINGLE_TAG".to_owned()),
                    ("topicSysFlag", "0".to_owned()),
                    ("order", "false".to_owned()),
                ],
            );
            self.remoting.call(addr, command, self.timeout).await?;
        }
        // The broker registers the topic with the name servers asynchronously; there is no
        // event to wait for, so the route is polled (it usually appears within ~20 ms).
        let deadline = Instant::now() + ROUTE_PROPAGATION;
        loop {
            match self.namesrv.refresh(topic).await {
                Ok(route) if route.masters.len() >= masters.len() => return Ok(()),
                Ok(_) | Err(Error::TopicNotFound(_)) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(20)).await
                }
                Ok(_) => return Ok(()),
                Err(e) => return Err(e),
            }
        }
    }

    /// Deletes `topic` from every master and every name server. Idempotent.
    pub async fn delete_topic(&self, topic: &str) -> Result<()> {
        for addr in self.namesrv.masters().await?.values() {
            let command =
                Command::request(codes::DELETE_TOPIC_IN_BROKER, [("topic", topic.to_owned())]);
            self.remoting.call(addr, command, self.timeout).await?;
        }
        self.namesrv.delete_topic(topic).await
    }

    /// Creates consumer group `group` on every master (with broker defaults), so offsets can be
    /// committed for it before it ever pulled. Idempotent.
    pub async fn create_group(&self, group: &str) -> Result<()> {
        let body = serde_json::json!({ "groupName": group }).to_string();
        for addr in self.namesrv.masters().await?.values() {
            let command =
                Command::request(codes::CREATE_SUBSCRIPTION_GROUP, []).with_body(body.clone());
            self.remoting.call(addr, command, self.timeout).await?;
        }
        Ok(())
    }

    /// Deletes consumer group `group` and its offsets on every master. Idempotent.
    pub async fn delete_group(&self, group: &str) -> Result<()> {
        for addr in self.namesrv.masters().await?.values() {
            let command = Command::request(
                codes::DELETE_SUBSCRIPTION_GROUP,
                [
                    ("groupName", group.to_owned()),
                    ("cleanOffset", "true".to_owned()),
                ],
            );
            self.remoting.call(addr, command, self.timeout).await?;
        }
        Ok(())
    }

    async fn offset_request(
        &self,
        code: i32,
        mq: &MessageQueue,
        extra: Option<(&'static str, String)>,
    ) -> Result<i64> {
        let mut fields = vec![
            ("topic", mq.topic.clone()),
            ("queueId", mq.queue_id.to_string()),
        ];
        fields.extend(extra);
        self.queue_call(mq, Command::request(code, fields))
            .await?
            .num("offset")
    }

    /// The smallest offset still stored in `mq`.
    pub async fn min_offset(&self, mq: &MessageQueue) -> Result<i64> {
        self.offset_request(codes::GET_MIN_OFFSET, mq, None).await
    }

    /// The offset the next message written to `mq` gets.
    pub async fn max_offset(&self, mq: &MessageQueue) -> Result<i64> {
        self.offset_request(codes::GET_MAX_OFFSET, mq, None).await
    }

    /// The offset of the first message stored at or after `timestamp_ms` (the max offset if
    /// there is none).
    pub async fn search_offset(&self, mq: &MessageQueue, timestamp_ms: i64) -> Result<i64> {
        self.offset_request(
            codes::SEARCH_OFFSET_BY_TIMESTAMP,
            mq,
            Some(("timestamp", timestamp_ms.to_string())),
        )
        .await
    }

    /// The offset `group` committed for `mq`, or `None` if it never committed one.
    pub async fn query_consumer_offset(
        &self,
        group: &str,
        mq: &MessageQueue,
    ) -> Result<Option<i64>> {
        let addr = self.broker_of(mq).await?;
        let command = Command::request(
            codes::QUERY_CONSUMER_OFFSET,
            [
                ("consumerGroup", group.to_owned()),
                ("topic", mq.topic.clone()),
                ("queueId", mq.queue_id.to_string()),
                ("setZeroIfNotFound", "false".to_owned()),
            ],
        );
        let response = self.remoting.invoke(&addr, command, self.timeout).await?;
        if response.code == codes::QUERY_NOT_FOUND {
            return Ok(None);
        }
        check(codes::QUERY_CONSUMER_OFFSET, response)?
            .num("offset")
            .map(Some)
    }

    /// Stores `offset` (the next offset to consume) for `group` on `mq`.
    pub async fn update_consumer_offset(
        &self,
        group: &str,
        mq: &MessageQueue,
        offset: i64,
    ) -> Result<()> {
        let command = Command::request(
            codes::UPDATE_CONSUMER_OFFSET,
            [
                ("consumerGroup", group.to_owned()),
                ("topic", mq.topic.clone()),
                ("queueId", mq.queue_id.to_string()),
                ("commitOffset", offset.to_string()),
            ],
        );
        self.offset_updates.fetch_add(1, Ordering::Relaxed);
        self.queue_call(mq, command).await.map(drop)
    }

    /// The client ids of `group`'s live consumers, as the broker at `addr` knows them.
    pub async fn consumer_ids(&self, addr: &str, group: &str) -> Result<Vec<String>> {
        let command = Command::request(
            codes::GET_CONSUMER_LIST_BY_GROUP,
            [("consumerGroup", group.to_owned())],
        );
        let response = self.remoting.invoke(addr, command, self.timeout).await?;
        if response.code != codes::SUCCESS {
            // "no consumer for this group": the list is empty, not an error.
            return Ok(Vec::new());
        }
        let list: ConsumerIdList = serde_json::from_slice(&response.body)
            .map_err(|e| Error::Protocol(format!("consumer list: {e}")))?;
        Ok(list.consumer_id_list)
    }

    /// The consumer groups the brokers know for `topic` (online or with committed offsets).
    pub async fn groups_of_topic(&self, topic: &str) -> Result<Vec<String>> {
        let route = self.namesrv.route(topic).await?;
        let mut groups = Vec::new();
        for addr in route.masters.values() {
            let command = Command::request(
                codes::QUERY_TOPIC_CONSUME_BY_WHO,
                [("topic", topic.to_owned())],
            );
            let response = self.remoting.call(addr, command, self.timeout).await?;
            let list: GroupList = serde_json::from_slice(&response.body)
                .map_err(|e| Error::Protocol(format!("group list: {e}")))?;
            groups.extend(list.group_list);
        }
        groups.sort();
        groups.dedup();
        Ok(groups)
    }
}
