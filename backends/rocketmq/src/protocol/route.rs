//! Topic routes (TopicRouteData JSON) and the message queues they describe.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use serde::Deserialize;

use crate::error::{Error, Result};

const PERM_WRITE: i32 = 0x2;
/// More queues than any broker hosts for one topic: a route claiming this many is garbage,
/// refused before a queue list of that size is built.
const MAX_QUEUES: i32 = 65_536;
const PERM_READ: i32 = 0x4;

/// One queue of a topic on one broker.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MessageQueue {
    /// Topic (as on the broker, namespace included).
    pub topic: String,
    /// Broker name (not address: the address comes from the route).
    pub broker: String,
    /// Queue id on that broker.
    pub queue_id: i32,
}

impl MessageQueue {
    /// A queue.
    pub fn new(topic: impl Into<String>, broker: impl Into<String>, queue_id: i32) -> Self {
        MessageQueue {
            topic: topic.into(),
            broker: broker.into(),
            queue_id,
        }
    }
}

impl fmt::Display for MessageQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}#{}", self.topic, self.broker, self.queue_id)
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct QueueData {
    broker_name: String,
    #[serde(default)]
    read_queue_nums: i32,
    #[serde(default)]
    write_queue_nums: i32,
    #[serde(default)]
    perm: i32,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct BrokerData {
    broker_name: String,
    #[serde(default)]
    broker_addrs: HashMap<String, String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RouteJson {
    #[serde(default)]
    queue_datas: Vec<QueueData>,
    #[serde(default)]
    broker_datas: Vec<BrokerData>,
}

/// A topic's route: its queues and the master address of each broker.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopicRoute {
    /// Readable queues, sorted.
    pub read_queues: Vec<MessageQueue>,
    /// Writable queues, sorted.
    pub write_queues: Vec<MessageQueue>,
    /// Broker name → master address (broker id 0).
    pub masters: BTreeMap<String, String>,
}

impl TopicRoute {
    /// Parses a route body. Lenient: unknown fields are ignored, missing ones default, and the
    /// unquoted integer keys old Java name servers write (`{0:"host:port"}`) are accepted.
    pub fn parse(topic: &str, body: &[u8]) -> Result<TopicRoute> {
        let text = std::str::from_utf8(body)
            .map_err(|_| Error::Protocol("route body is not UTF-8".into()))?;
        let json: RouteJson = match serde_json::from_str(text) {
            Ok(json) => json,
            Err(_) => serde_json::from_str(&quote_integer_keys(text))
                .map_err(|e| Error::Protocol(format!("route of {topic:?}: {e}")))?,
        };
        let mut route = TopicRoute::default();
        for b in json.broker_datas {
            if let Some(addr) = b.broker_addrs.get("0") {
                route.masters.insert(b.broker_name, addr.clone());
            }
        }
        for q in json.queue_datas {
            if q.read_queue_nums.max(q.write_queue_nums) > MAX_QUEUES {
                return Err(Error::Protocol(format!(
                    "route of {topic:?} claims more than {MAX_QUEUES} queues on {}",
                    q.broker_name
                )));
            }
            if !route.masters.contains_key(&q.broker_name) {
                continue;
            }
            if q.perm & PERM_READ != 0 {
                route.read_queues.extend(
                    (0..q.read_queue_nums).map(|i| MessageQueue::new(topic, &q.broker_name, i)),
                );
            }
            if q.perm & PERM_WRITE != 0 {
                route.write_queues.extend(
                    (0..q.write_queue_nums).map(|i| MessageQueue::new(topic, &q.broker_name, i)),
                );
            }
        }
        route.read_queues.sort();
        route.write_queues.sort();
        Ok(route)
    }

    /// The master address of `broker`.
    pub fn address(&self, broker: &str) -> Option<&str> {
        self.masters.get(broker).map(String::as_str)
    }
}

/// Rewrites `{0:"a",1:"b"}` object keys into quoted keys, leaving strings untouched.
fn quote_integer_keys(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    let mut chars = text.chars().peekable();
    let (mut in_string, mut escaped, mut after_open) = (false, false, false);
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        if after_open && c.is_ascii_digit() {
            let mut key = String::from(c);
            while let Some(d) = chars.peek().copied().filter(char::is_ascii_digit) {
                key.push(d);
                chars.next();
            }
            out.push('"');
            out.push_str(&key);
            out.push('"');
            after_open = false;
            continue;
        }
        if c == '"' {
            in_string = true;
        }
        if !c.is_whitespace() {
            after_open = c == '{' || c == ',';
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_json_with_extra_fields() {
        let body = br#"{"orderTopicConf":null,"zoneName":null,"queueDatas":[{"brokerName":"b","readQueueNums":2,"writeQueueNums":1,"perm":6,"topicSysFlag":0}],"brokerDatas":[{"cluster":"c","brokerName":"b","brokerAddrs":{"0":"127.0.0.1:1","1":"127.0.0.1:2"},"enableActingMaster":false}],"filterServerTable":{}}"#;
        let r = TopicRoute::parse("t", body).expect("parse");
        assert_eq!(r.read_queues.len(), 2);
        assert_eq!(r.write_queues, vec![MessageQueue::new("t", "b", 0)]);
        assert_eq!(r.address("b"), Some("127.0.0.1:1"));
    }

    #[test]
    fn fastjson_integer_keys_and_missing_fields() {
        let body = br#"{"queueDatas":[{"brokerName":"b","readQueueNums":1,"writeQueueNums":1,"perm":4}],"brokerDatas":[{"brokerName":"b","brokerAddrs":{0:"127.0.0.1:1"}}]}"#;
        let r = TopicRoute::parse("t", body).expect("parse");
        assert_eq!(r.read_queues.len(), 1);
        assert!(r.write_queues.is_empty(), "read-only permission");
        assert!(TopicRoute::parse("t", b"{}")
            .expect("empty")
            .masters
            .is_empty());
        assert!(TopicRoute::parse("t", b"not json").is_err());
        let huge = br#"{"queueDatas":[{"brokerName":"b","readQueueNums":2000000000,"writeQueueNums":1,"perm":6}],"brokerDatas":[{"brokerName":"b","brokerAddrs":{"0":"x:1"}}]}"#;
        assert!(matches!(
            TopicRoute::parse("t", huge),
            Err(Error::Protocol(_))
        ));
    }
}
