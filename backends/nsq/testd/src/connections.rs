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
