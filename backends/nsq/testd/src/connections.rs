//! What the server knows about each open TCP connection for `/stats`: who it says it is
//! (IDENTIFY, else its remote host, as nsqd names a client), when it connected and what it
//! published.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use serde_json::{json, Value};

use crate::store::ClientState;

/// nsqd's client state numbers (`stateInit`, `stateSubscribed`, `stateClosing`).
const STATE_INIT: u8 = 0;
const STATE_SUBSCRIBED: u8 = 3;
const STATE_CLOSING: u8 = 4;

/// The fork's output buffer settings for a client that did not ask for others (its IDENTIFY
/// answer's defaults).
pub(crate) const FORK_OUTPUT_BUFFER: (u32, u32) = (100, 50);

/// The fork's output buffer settings for IDENTIFY's `output_buffer_size` and
/// `output_buffer_timeout` (ms): what was asked, else its defaults (Y1 4: 16384 and 250 asked,
/// 16384 and 250 answered).
pub(crate) fn fork_output_buffer(size: i64, timeout: i64) -> (u32, u32) {
    let asked = |value: i64, default: u32| {
        u32::try_from(value)
            .ok()
            .filter(|v| *v > 0)
            .unwrap_or(default)
    };
    (
        asked(size, FORK_OUTPUT_BUFFER.0),
        asked(timeout, FORK_OUTPUT_BUFFER.1),
    )
}

/// What one connection published to one partition.
#[derive(Default, Clone, Copy)]
pub(crate) struct PartitionPubs {
    pub count: u64,
    /// Seconds since the epoch of the last publish.
    pub last: u64,
}

/// One open connection.
pub(crate) struct Connection {
    pub client_id: String,
    pub hostname: String,
    pub remote: SocketAddr,
    /// Seconds since the epoch.
    pub connect_ts: u64,
    pub user_agent: String,
    /// Messages published per topic (PUB, MPUB, DPUB).
    pub pub_counts: BTreeMap<String, u64>,
    /// Messages published per topic and partition (the fork's `client_pub_stats`).
    pub partition_pubs: BTreeMap<(String, u32), PartitionPubs>,
    /// The fork's answer to IDENTIFY's `output_buffer_size` and `output_buffer_timeout` (ms),
    /// which its `/stats` reports per client.
    pub output_buffer: (u32, u32),
}

impl Connection {
    /// A connection that has not identified itself: nsqd calls it by its remote host.
    pub fn new(remote: SocketAddr) -> Connection {
        Connection {
            client_id: remote.ip().to_string(),
            hostname: remote.ip().to_string(),
            remote,
            connect_ts: crate::unix_seconds(),
            user_agent: String::new(),
            pub_counts: BTreeMap::new(),
            partition_pubs: BTreeMap::new(),
            output_buffer: FORK_OUTPUT_BUFFER,
        }
    }

    /// IDENTIFY's names (nsqd takes them as sent).
    pub fn identify(&mut self, client_id: String, hostname: String, user_agent: String) {
        self.client_id = client_id;
        self.hostname = hostname;
        self.user_agent = user_agent;
    }

    /// nsqd's `ClientStats` JSON; `sub` is the connection's subscription state, if any.
    /// Producers (no subscription) also carry their `pub_counts`.
    pub fn stats(&self, sub: Option<&ClientState>) -> Value {
        let (state, rdy, in_flight, messages, finished, requeued) = match sub {
            Some(c) => (
                if c.closing {
                    STATE_CLOSING
                } else {
                    STATE_SUBSCRIBED
                },
                c.rdy,
                c.in_flight,
                c.message_count,
                c.finish_count,
                c.requeue_count,
            ),
            None => (STATE_INIT, 0, 0, 0, 0, 0),
        };
        let mut stats = json!({
            "client_id": self.client_id,
            "hostname": self.hostname,
            "version": "V2",
            "remote_address": self.remote.to_string(),
            "state": state,
            "ready_count": rdy,
            "in_flight_count": in_flight,
            "message_count": messages,
            "finish_count": finished,
            "requeue_count": requeued,
            "connect_ts": self.connect_ts,
            "sample_rate": 0,
            "deflate": false,
            "snappy": false,
            "user_agent": self.user_agent,
            "tls": false,
            "tls_cipher_suite": "",
            "tls_version": "",
            "tls_negotiated_protocol": "",
            "tls_negotiated_protocol_is_mutual": false,
        });
        if !self.pub_counts.is_empty() {
            stats["pub_counts"] = self
                .pub_counts
                .iter()
                .map(|(topic, count)| json!({ "topic": topic, "count": count }))
                .collect();
        }
        stats
    }
}
