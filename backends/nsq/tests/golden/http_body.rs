//! HTTP answers: comparing a recorded response body with a replayed one. A JSON body is
//! compared as JSON after both sides are normalised: the fields the transcripts' README names
//! as varying become `"<var>"`, recorded ports become the replay's ports, map-ordered lists of
//! names are sorted. Anything else is compared byte for byte. Pure.

use std::collections::HashMap;

use serde_json::Value;

/// Fields whose values vary run to run (the README's list; `*` = any suffix).
const VARYING: &[&str] = &[
    "start_time",
    "uptime*",
    "connect_ts",
    "remote_address",
    "memory",
    "depth_ts*",
    "last_pub_ts",
];

/// Measured figures the README does not name as varying: the Youzan fork's latency
/// histograms in `/stats` (per partition `msg_write_latency_stats`: how long each write took
/// to store; per channel `msg_consume_latency_stats`: delivery to FIN, and
/// `msg_delivery_latency_stats`: publish to delivery). Their buckets hold run-dependent
/// timings (a FIN 1.5 s after a delivery lands one bucket or the next), so they are compared
/// by shape only: a list of as many non-negative integers as recorded. Everything else in the
/// fork's `/stats`, the message-size histogram included, is compared exactly.
const MEASURED: &[&str] = &[
    "msg_write_latency_stats",
    "msg_consume_latency_stats",
    "msg_delivery_latency_stats",
];

/// How recorded bodies map onto a replay.
#[derive(Debug, Default, Clone)]
pub struct BodyRules {
    /// Recorded port → the replay's port (`tcp_port` / `http_port` values).
    pub ports: HashMap<u16, u16>,
}

impl BodyRules {
    /// Compares bodies; on a difference, says what differs.
    pub fn compare(&self, expected: &[u8], actual: &[u8]) -> Result<(), String> {
        let Ok(recorded) = serde_json::from_slice::<Value>(expected) else {
            return if expected == actual {
                Ok(())
            } else {
                Err("body differs".into())
            };
        };
        let Ok(replayed) = serde_json::from_slice::<Value>(actual) else {
            return Err("body is not JSON".into());
        };
        let recorded = self.normalise(recorded, true);
        let replayed = self.normalise(replayed, false);
        if recorded == replayed {
            Ok(())
        } else {
            Err(format!(
                "JSON differs: normalised expected {recorded}, normalised actual {replayed}"
            ))
        }
    }

    /// The comparable form of a body; `recorded` says whether its ports are the recording's.
    pub fn normalise(&self, value: Value, recorded: bool) -> Value {
        match value {
            Value::Object(map) => {
                // A node description (nsqd /info, lookupd producers) names the machine it ran
                // on; the recording machine's hostname is not the replay's.
                let node = map.contains_key("broadcast_address");
                // A Youzan lookupd's own description (`/listlookup`) names its TCP and RPC
                // ports, which a test lookupd does not have (it answers its HTTP port there).
                let lookupd = map.contains_key("NodeIP");
                Value::Object(
                    map.into_iter()
                        .map(|(k, v)| {
                            if lookupd {
                                return (k.clone(), self.lookupd_field(&k, v, recorded));
                            }
                            let v = self.field(&k, v, node, recorded);
                            (k, v)
                        })
                        .collect(),
                )
            }
            Value::Array(items) => {
                let mut items: Vec<Value> = items
                    .into_iter()
                    .map(|v| self.normalise(v, recorded))
                    .collect();
                if items.iter().all(Value::is_string) {
                    items.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
                }
                // Node lists (lookupd `producers`) are map-ordered on the servers too.
                if items.iter().all(|v| v.get("broadcast_address").is_some()) {
                    items.sort_by_key(Value::to_string);
                }
                Value::Array(items)
            }
            other => other,
        }
    }

    /// A field of a Youzan lookupd's description: its `ID` (`ip:rpc_port:tcp_port:nsqlookup`),
    /// `TcpPort` and `RpcPort` vary; `HttpPort` (a string) is the replay's port.
    fn lookupd_field(&self, key: &str, value: Value, recorded: bool) -> Value {
        match key {
            "ID" | "TcpPort" | "RpcPort" => Value::String("<var>".into()),
            "HttpPort" if recorded => value
                .as_str()
                .and_then(|p| p.parse::<u16>().ok())
                .and_then(|p| self.ports.get(&p))
                .map_or(value, |port| Value::String(port.to_string())),
            _ => self.normalise(value, recorded),
        }
    }

    fn field(&self, key: &str, value: Value, node: bool, recorded: bool) -> Value {
        let varying = VARYING
            .iter()
            .any(|pattern| match pattern.strip_suffix('*') {
                Some(prefix) => key.starts_with(prefix),
                None => key == *pattern,
            });
        let local_id = key == "id"
            && value
                .as_str()
                .and_then(|v| v.strip_prefix("127.0.0.1:"))
                .is_some_and(|port| port.parse::<u16>().is_ok());
        // A Youzan node's `distributed_id` (`ip:rpc_port:tcp_port:worker_id`) names its
        // coordinator RPC port and worker id, which a test nsqd does not have.
        let node_name = node && (key == "hostname" || key == "distributed_id");
        if varying || local_id || node_name {
            return Value::String("<var>".into());
        }
        if MEASURED.contains(&key) {
            return histogram_shape(value);
        }
        if recorded && (key == "tcp_port" || key == "http_port") {
            if let Some(port) = value
                .as_u64()
                .and_then(|p| u16::try_from(p).ok())
                .and_then(|p| self.ports.get(&p))
            {
                return Value::from(*port);
            }
        }
        self.normalise(value, recorded)
    }
}

/// A histogram's shape (`"<histogram of N>"`), or the value itself when it is not a list of
/// non-negative integers (so the difference shows).
fn histogram_shape(value: Value) -> Value {
    match &value {
        Value::Array(items) if items.iter().all(Value::is_u64) => {
            Value::String(format!("<histogram of {}>", items.len()))
        }
        _ => value,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules() -> BodyRules {
        BodyRules {
            ports: HashMap::from([(4250, 5000), (4251, 5001)]),
        }
    }

    #[test]
    fn plain_bodies_compare_byte_for_byte() {
        assert!(rules().compare(b"OK", b"OK").is_ok());
        assert!(rules().compare(b"", b"").is_ok());
        assert!(rules().compare(b"OK", b"OK\n").is_err());
        assert!(rules().compare(b"{\"a\":1}", b"OK").is_err());
    }

    #[test]
    fn varying_fields_ports_and_hostnames_are_normalised() {
        let recorded = br#"{"version":"1.3.0","hostname":"vm","broadcast_address":"127.0.0.1","tcp_port":4250,"http_port":4251,"start_time":1,"uptime_seconds":3,"clients":[{"hostname":"golden","connect_ts":5,"remote_address":"127.0.0.1:1"}],"id":"127.0.0.1:4250"}"#;
        let replayed = br#"{"version":"1.3.0","hostname":"box","broadcast_address":"127.0.0.1","tcp_port":5000,"http_port":5001,"start_time":9,"uptime_seconds":8,"clients":[{"hostname":"golden","connect_ts":7,"remote_address":"127.0.0.1:2"}],"id":"127.0.0.1:5000"}"#;
        assert!(rules().compare(recorded, replayed).is_ok());
        // A client's own hostname (not a node description) is exact.
        let other_client = br#"{"version":"1.3.0","hostname":"box","broadcast_address":"127.0.0.1","tcp_port":5000,"http_port":5001,"start_time":9,"uptime_seconds":8,"clients":[{"hostname":"other","connect_ts":7,"remote_address":"127.0.0.1:2"}],"id":"127.0.0.1:5000"}"#;
        assert!(rules().compare(recorded, other_client).is_err());
        // Ports must be the replay's, not the recording's.
        let recorded_port = br#"{"version":"1.3.0","hostname":"box","broadcast_address":"127.0.0.1","tcp_port":4250,"http_port":5001,"start_time":9,"uptime_seconds":8,"clients":[{"hostname":"golden","connect_ts":7,"remote_address":"127.0.0.1:2"}],"id":"127.0.0.1:5000"}"#;
        assert!(rules().compare(recorded, recorded_port).is_err());
    }

    #[test]
    fn a_lookupd_description_compares_its_node_ip_and_http_port() {
        let recorded = br#"{"lookupdleader":{"ID":"127.0.0.1:34260:34160:nsqlookup","NodeIP":"127.0.0.1","TcpPort":"34160","HttpPort":"4251","RpcPort":"34260","Epoch":0}}"#;
        let replayed = br#"{"lookupdleader":{"ID":"127.0.0.1:5001:5001:nsqlookup","NodeIP":"127.0.0.1","TcpPort":"5001","HttpPort":"5001","RpcPort":"5001","Epoch":0}}"#;
        assert_eq!(rules().compare(recorded, replayed), Ok(()));
        let other_http = br#"{"lookupdleader":{"ID":"x","NodeIP":"127.0.0.1","TcpPort":"1","HttpPort":"5002","RpcPort":"1","Epoch":0}}"#;
        assert!(rules().compare(recorded, other_http).is_err());
        let other_epoch = br#"{"lookupdleader":{"ID":"x","NodeIP":"127.0.0.1","TcpPort":"1","HttpPort":"5001","RpcPort":"1","Epoch":1}}"#;
        assert!(rules().compare(recorded, other_epoch).is_err());
    }

    #[test]
    fn name_lists_compare_as_sets_and_other_lists_in_order() {
        assert!(rules()
            .compare(br#"{"channels":["b","a"]}"#, br#"{"channels":["a","b"]}"#)
            .is_ok());
        assert!(rules()
            .compare(
                br#"{"channels":["b","a"]}"#,
                br#"{"channels":["a","b","c"]}"#
            )
            .is_err());
        assert!(rules()
            .compare(br#"{"t":[{"n":1},{"n":2}]}"#, br#"{"t":[{"n":2},{"n":1}]}"#)
            .is_err());
    }

    #[test]
    fn measured_histograms_compare_by_shape() {
        let recorded = br#"{"msg_write_latency_stats":[18,0,1],"msg_size_stats":[20,0,0]}"#;
        assert!(rules()
            .compare(
                recorded,
                br#"{"msg_write_latency_stats":[17,2,0],"msg_size_stats":[20,0,0]}"#
            )
            .is_ok());
        // One bucket more, a negative count, or a size histogram that differs: not the same.
        assert!(rules()
            .compare(
                recorded,
                br#"{"msg_write_latency_stats":[18,0,1,0],"msg_size_stats":[20,0,0]}"#
            )
            .is_err());
        assert!(rules()
            .compare(
                recorded,
                br#"{"msg_write_latency_stats":[18,0,-1],"msg_size_stats":[20,0,0]}"#
            )
            .is_err());
        assert!(rules()
            .compare(
                recorded,
                br#"{"msg_write_latency_stats":[18,0,1],"msg_size_stats":[19,1,0]}"#
            )
            .is_err());
    }

    #[test]
    fn other_values_and_nulls_are_exact() {
        assert!(rules()
            .compare(br#"{"topics":null}"#, br#"{"topics":[]}"#)
            .is_err());
        assert!(rules()
            .compare(br#"{"depth":3}"#, br#"{"depth":3.0}"#)
            .is_err());
        assert!(rules()
            .compare(
                br#"{"message":"TOPIC_NOT_FOUND"}"#,
                br#"{"message":"TOPIC_NOT_FOUND"}"#
            )
            .is_ok());
    }
}
