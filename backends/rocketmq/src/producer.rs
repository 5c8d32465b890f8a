//! [`Producer`]: SEND_MESSAGE_V2 with queue selection, retries on other brokers, sync, oneway
//! and batch sends.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;

use crate::admin::Admin;
use crate::config::{DEFAULT_COMPRESS_OVER_BYTES, DEFAULT_MAX_MESSAGE_BYTES};
use crate::error::{Error, Result};
use crate::namespace::Namespace;
use crate::protocol::route::{MessageQueue, TopicRoute};
use crate::protocol::{codes, compression, java_hash, properties, stored};
use crate::remoting::Command;

/// A message to send.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutgoingMessage {
    /// Application-side topic (the namespace is added by the producer).
    pub topic: String,
    /// Payload.
    pub body: Bytes,
    /// Tag (one; used by tag selectors).
    pub tag: Option<String>,
    /// Keys (indexed by the broker).
    pub keys: Vec<String>,
    /// User properties.
    pub properties: BTreeMap<String, String>,
}

impl OutgoingMessage {
    /// A message with a body and nothing else.
    pub fn new(topic: impl Into<String>, body: impl Into<Bytes>) -> Self {
        OutgoingMessage {
            topic: topic.into(),
            body: body.into(),
            ..OutgoingMessage::default()
        }
    }

    /// The wire properties: user ones plus UNIQ_KEY, TAGS, KEYS and WAIT.
    fn wire_properties(&self, uniq: &str) -> Result<String> {
        if let Some(k) = self
            .properties
            .keys()
            .find(|k| properties::SYSTEM_KEYS.contains(&k.as_str()))
        {
            return Err(Error::InvalidArgument(format!(
                "property {k:?} is reserved"
            )));
        }
        let mut p = self.properties.clone();
        p.insert(properties::UNIQ_KEY.into(), uniq.into());
        p.insert(properties::WAIT.into(), "true".into());
        if let Some(tag) = &self.tag {
            p.insert(properties::TAGS.into(), tag.clone());
        }
        if !self.keys.is_empty() {
            p.insert(properties::KEYS.into(), self.keys.join(" "));
        }
        properties::encode(&p)
    }
}

/// Which queue of the topic a message goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueueSelector {
    /// The next queue in turn (and another broker on retry).
    RoundRobin,
    /// Always the same queue for the same key (order per key); no failover to other queues.
    ByKey(String),
    /// Exactly this queue; no failover.
    Queue(MessageQueue),
}

/// What the broker answered for one stored message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendResult {
    /// The client message id (UNIQ_KEY).
    pub msg_id: String,
    /// The queue written to.
    pub queue: MessageQueue,
    /// Its offset there.
    pub queue_offset: i64,
}

/// A producer; cheap to share by reference, safe to use from many tasks at once.
pub struct Producer {
    admin: Admin,
    group: String,
    namespace: Namespace,
    retries: usize,
    next: AtomicUsize,
    compress_over: usize,
    max_body: usize,
}

impl Producer {
    /// A producer in producer group `group` (informational for the broker). Like the Java
    /// client it zlib-compresses bodies over 4 KiB and refuses bodies over 4 MiB (see
    /// [`Producer::compress_over`], [`Producer::max_message_bytes`]).
    pub fn new(admin: Admin, group: &str, namespace: Namespace, retries: usize) -> Self {
        Producer {
            group: namespace.wrap(group),
            admin,
            namespace,
            retries,
            next: AtomicUsize::new(0),
            compress_over: DEFAULT_COMPRESS_OVER_BYTES,
            max_body: DEFAULT_MAX_MESSAGE_BYTES,
        }
    }

    /// Sends bodies longer than `bytes` zlib-compressed, with the sysflag bit every RocketMQ
    /// consumer (4.x and 5.x) decompresses by; `0` sends every body as it is. Batches are never
    /// compressed (their layout has no per-message sysflag), as in the Java client.
    pub fn compress_over(mut self, bytes: usize) -> Self {
        self.compress_over = bytes;
        self
    }

    /// Refuses bodies longer than `bytes` before sending (the broker's `maxMessageSize`).
    pub fn max_message_bytes(mut self, bytes: usize) -> Self {
        self.max_body = bytes;
        self
    }

    /// The body to send and its sysflag: compressed over the threshold.
    fn wire_body(&self, body: &Bytes) -> Result<(Bytes, i32)> {
        if body.len() > self.max_body {
            return Err(Error::InvalidArgument(format!(
                "message body of {} bytes exceeds the {}-byte limit",
                body.len(),
                self.max_body
            )));
        }
        if self.compress_over == 0 || body.len() <= self.compress_over {
            return Ok((body.clone(), 0));
        }
        let compressed = compression::zlib(body)
            .map_err(|e| Error::InvalidArgument(format!("compressing a message body: {e}")))?;
        Ok((compressed, compression::COMPRESSED_FLAG))
    }

    fn candidates(
        &self,
        route: &TopicRoute,
        selector: &QueueSelector,
        topic: &str,
    ) -> Result<Vec<MessageQueue>> {
        let queues = &route.write_queues;
        if queues.is_empty() {
            return Err(Error::TopicNotFound(topic.to_owned()));
        }
        Ok(match selector {
            QueueSelector::Queue(q) => {
                let q = MessageQueue::new(topic, &q.broker, q.queue_id);
                if !queues.contains(&q) {
                    return Err(Error::NoSuchQueue {
                        topic: topic.into(),
                        queue: format!("{}#{}", q.broker, q.queue_id),
                    });
                }
                vec![q]
            }
            QueueSelector::ByKey(key) => {
                // As Java's SelectMessageQueueByHash: |hashCode| % queues.
                let index = java_hash(key).unsigned_abs() as usize % queues.len();
                vec![queues[index].clone()]
            }
            QueueSelector::RoundRobin => {
                // Start at the next queue; on retry prefer queues of other brokers.
                let start = self.next.fetch_add(1, Ordering::Relaxed);
                let first = queues[start % queues.len()].clone();
                let mut order = vec![first.clone()];
                order.extend(
                    (1..queues.len())
                        .map(|i| queues[(start + i) % queues.len()].clone())
                        .filter(|q| q.broker != first.broker),
                );
                order.push(first);
                order
            }
        })
    }

    fn header(
        &self,
        topic: &str,
        mq: &MessageQueue,
        props: String,
        sysflag: i32,
        batch: bool,
    ) -> Vec<(&'static str, String)> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        vec![
            ("a", self.group.clone()),
            ("b", topic.to_owned()),
            ("c", "TBW102".to_owned()),
            ("d", "4".to_owned()),
            ("e", mq.queue_id.to_string()),
            ("f", sysflag.to_string()),
            ("g", now.to_string()),
            ("h", "0".to_owned()),
            ("i", props),
            ("j", "0".to_owned()),
            ("k", "false".to_owned()),
            ("m", batch.to_string()),
            ("n", mq.broker.clone()),
        ]
    }

    /// Sends one message and waits for the broker to store it. Retries transient failures on
    /// the next candidate queue (another broker where the topic has several).
    pub async fn send(
        &self,
        message: &OutgoingMessage,
        selector: &QueueSelector,
    ) -> Result<SendResult> {
        let uniq = properties::unique_key();
        let props = message.wire_properties(&uniq)?;
        let (body, sysflag) = self.wire_body(&message.body)?;
        let results = self
            .send_with(&message.topic, selector, |topic, mq| {
                Command::request(
                    codes::SEND_MESSAGE_V2,
                    self.header(topic, mq, props.clone(), sysflag, false),
                )
                .with_body(body.clone())
            })
            .await?;
        Ok(SendResult {
            msg_id: uniq,
            ..results
        })
    }

    /// Sends messages of one topic as one batch: stored together, consecutive offsets.
    pub async fn send_batch(
        &self,
        messages: &[OutgoingMessage],
        selector: &QueueSelector,
    ) -> Result<Vec<SendResult>> {
        let Some(first) = messages.first() else {
            return Ok(Vec::new());
        };
        if messages.iter().any(|m| m.topic != first.topic) {
            return Err(Error::InvalidArgument("a batch must have one topic".into()));
        }
        let mut uniqs = Vec::with_capacity(messages.len());
        let mut encoded = Vec::with_capacity(messages.len());
        for m in messages {
            if m.body.len() > self.max_body {
                return Err(Error::InvalidArgument(format!(
                    "message body of {} bytes exceeds the {}-byte limit",
                    m.body.len(),
                    self.max_body
                )));
            }
            let uniq = properties::unique_key();
            encoded.push((m.body.clone(), m.wire_properties(&uniq)?));
            uniqs.push(uniq);
        }
        let body = stored::encode_batch(&encoded)?;
        let first_result = self
            .send_with(&first.topic, selector, |topic, mq| {
                Command::request(
                    codes::SEND_BATCH_MESSAGE,
                    self.header(topic, mq, String::new(), 0, true),
                )
                .with_body(body.clone())
            })
            .await?;
        Ok(uniqs
            .into_iter()
            .zip(first_result.queue_offset..)
            .map(|(msg_id, queue_offset)| SendResult {
                msg_id,
                queue: first_result.queue.clone(),
                queue_offset,
            })
            .collect())
    }

    async fn send_with(
        &self,
        app_topic: &str,
        selector: &QueueSelector,
        build: impl Fn(&str, &MessageQueue) -> Command,
    ) -> Result<SendResult> {
        let topic = self.namespace.wrap(app_topic);
        let route = self.admin.namesrv.route(&topic).await?;
        let candidates = self.candidates(&route, selector, &topic)?;
        let attempts = candidates.len().min(self.retries + 1).max(1);
        let mut last = None;
        for mq in candidates.iter().cycle().take(attempts) {
            let Some(addr) = route.address(&mq.broker) else {
                continue;
            };
            match self
                .admin
                .remoting
                .call(addr, build(&topic, mq), self.admin.timeout)
                .await
            {
                Ok(response) => {
                    let queue_id: i32 = response.num("queueId")?;
                    let queue_offset: i64 = response.num("queueOffset")?;
                    return Ok(SendResult {
                        msg_id: String::new(),
                        queue: MessageQueue::new(&topic, &mq.broker, queue_id),
                        queue_offset,
                    });
                }
                Err(e) if e.is_transient() => {
                    tracing::debug!(queue = %mq, error = %e, "rocketmq send failed, trying the next queue");
                    self.admin.namesrv.invalidate(&topic);
                    last = Some(e);
                }
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| Error::TopicNotFound(topic.clone())))
    }

    /// Sends one message without waiting for the broker (no result, no retry).
    pub async fn send_oneway(
        &self,
        message: &OutgoingMessage,
        selector: &QueueSelector,
    ) -> Result<()> {
        let topic = self.namespace.wrap(&message.topic);
        let route = self.admin.namesrv.route(&topic).await?;
        let mq = self
            .candidates(&route, selector, &topic)?
            .into_iter()
            .next()
            .ok_or_else(|| Error::TopicNotFound(topic.clone()))?;
        let addr = route
            .address(&mq.broker)
            .ok_or_else(|| Error::TopicNotFound(topic.clone()))?;
        let props = message.wire_properties(&properties::unique_key())?;
        let (body, sysflag) = self.wire_body(&message.body)?;
        let command = Command::request(
            codes::SEND_MESSAGE_V2,
            self.header(&topic, &mq, props, sysflag, false),
        )
        .with_body(body);
        self.admin.remoting.oneway(addr, command).await
    }
}
