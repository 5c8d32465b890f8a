//! [`Remoting`]: one multiplexed connection per address, redialled with backoff and jitter.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use msgstream::sync::lock;
use tokio::sync::mpsc;

use super::backoff::{self, log_failure, Streak};
use super::conn::HeartbeatBody;
use super::{Command, Connection, ServerRequest};
use crate::error::{Error, Result};
use crate::protocol::codes;

/// Timeouts and limits of the remoting layer (see [`crate::ConnectionConfig`] for the
/// settings users give).
#[derive(Debug, Clone)]
pub struct RemotingOptions {
    /// Dial timeout.
    pub connect_timeout: Duration,
    /// Largest frame accepted from a server.
    pub max_frame: usize,
    /// Reconnect delay after the first failed dial; doubles per failure up to `max_backoff`,
    /// the upper half of each delay jittered.
    pub min_backoff: Duration,
    /// Longest reconnect delay.
    pub max_backoff: Duration,
    /// Longest a frame may take to be written; a connection whose writes stall longer is closed.
    pub write_timeout: Duration,
    /// Idle time before TCP keepalive probes (also their interval); `None` leaves keepalive off.
    pub keepalive: Option<Duration>,
    /// Frames queued per connection for its writer; senders wait for room (back-pressure).
    pub queued_frames: usize,
    /// Period of the HEART_BEAT sent on every broker connection (not to name servers).
    pub heartbeat_interval: Duration,
    /// How long a heartbeat (or the probe of a suspect connection) may take.
    pub probe_timeout: Duration,
}

impl Default for RemotingOptions {
    fn default() -> Self {
        RemotingOptions::from(&crate::ConnectionConfig::default())
    }
}

impl From<&crate::ConnectionConfig> for RemotingOptions {
    fn from(c: &crate::ConnectionConfig) -> Self {
        let ms = Duration::from_millis;
        RemotingOptions {
            connect_timeout: ms(c.connect_timeout_ms.max(1)),
            max_frame: super::codec::MAX_FRAME + 4,
            min_backoff: ms(c.reconnect_min_backoff_ms.max(1)),
            max_backoff: ms(c
                .reconnect_max_backoff_ms
                .max(c.reconnect_min_backoff_ms.max(1))),
            write_timeout: ms(c.write_timeout_ms.max(1)),
            keepalive: (c.keepalive_ms > 0).then(|| ms(c.keepalive_ms)),
            queued_frames: c.queued_frames.max(1),
            heartbeat_interval: ms(c.heartbeat_interval_ms.max(1)),
            probe_timeout: ms(c.probe_timeout_ms.max(1)),
        }
    }
}

#[derive(Default)]
struct Slot {
    conn: Option<Arc<Connection>>,
    failures: Streak,
    retry_at: Option<Instant>,
}

/// Connections by address. While a dial to an address is backing off after failures, requests
/// to it fail at once (transient `Disconnected`), so callers can move to another broker or name
/// server instead of piling up behind a dead one. Connections to brokers carry the pool's
/// heartbeat (see [`Remoting::set_heartbeat`]); name servers (see
/// [`Remoting::add_name_servers`]) get none, as from the Java client.
pub struct Remoting {
    options: RemotingOptions,
    slots: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Slot>>>>,
    notices: Option<mpsc::UnboundedSender<ServerRequest>>,
    heartbeat: HeartbeatBody,
    /// The body without groups, under the pool's own client id.
    plain_heartbeat: Bytes,
    name_servers: Mutex<HashSet<String>>,
}

impl Remoting {
    /// A pool; server requests (NOTIFY_CONSUMER_IDS_CHANGED) go to `notices` when given.
    /// Its broker connections heartbeat under a client id of the pool's own with no consumer
    /// groups until [`Remoting::set_heartbeat`] says otherwise. (Never under a consumer's id: a
    /// heartbeat without its groups under a member's client id, from another connection, took
    /// the member out of its group on the rocketmq-rust broker.)
    pub fn new(
        options: RemotingOptions,
        notices: Option<mpsc::UnboundedSender<ServerRequest>>,
    ) -> Self {
        let plain_heartbeat = Bytes::from(heartbeat_body(&client_id("pool")));
        Remoting {
            options,
            slots: Mutex::default(),
            notices,
            heartbeat: Arc::new(Mutex::new(plain_heartbeat.clone())),
            plain_heartbeat,
            name_servers: Mutex::default(),
        }
    }

    /// The pool's options (consumers open pools of their own with the same ones).
    pub fn options(&self) -> &RemotingOptions {
        &self.options
    }

    /// Replaces the HEART_BEAT body every broker connection of the pool sends.
    pub fn set_heartbeat(&self, body: Bytes) {
        *lock(&self.heartbeat) = body;
    }

    /// Goes back to the plain heartbeat (before leaving a group, so that no heartbeat joins it
    /// again).
    pub fn reset_heartbeat(&self) {
        self.set_heartbeat(self.plain_heartbeat.clone());
    }

    /// Marks `addrs` as name servers: their connections send no heartbeats.
    pub fn add_name_servers(&self, addrs: &[String]) {
        lock(&self.name_servers).extend(addrs.iter().cloned());
    }

    async fn connection(&self, addr: &str) -> Result<Arc<Connection>> {
        let slot = {
            let mut slots = lock(&self.slots);
            slots.entry(addr.to_owned()).or_default().clone()
        };
        let mut slot = slot.lock().await;
        if let Some(conn) = slot.conn.as_ref().filter(|c| !c.is_dead()) {
            return Ok(conn.clone());
        }
        if let Some(at) = slot.retry_at.filter(|at| Instant::now() < *at) {
            return Err(Error::Disconnected {
                addr: addr.into(),
                reason: format!("reconnecting in {:?}", at - Instant::now()),
            });
        }
        let heartbeat = (!self.is_name_server(addr)).then(|| self.heartbeat.clone());
        let o = &self.options;
        match Connection::connect(addr, o, self.notices.clone(), heartbeat).await {
            Ok(conn) => {
                let conn = Arc::new(conn);
                // A slot that held a connection (now dead) or failed to dial: a reconnect.
                let failures = slot.failures.succeeded();
                if slot.conn.is_some() || failures > 0 {
                    msgstream::metrics::record_reconnect("rocketmq", addr);
                }
                if failures >= backoff::QUIET_FAILURES {
                    tracing::warn!(%addr, failures, "rocketmq: reconnected");
                }
                slot.conn = Some(conn.clone());
                slot.retry_at = None;
                Ok(conn)
            }
            Err(e) => {
                slot.conn = None;
                log_failure!(slot.failures, "rocketmq dial", %addr, error = %e);
                let failures = slot.failures.count();
                let delay =
                    backoff::delay(failures, o.min_backoff, o.max_backoff, backoff::jitter());
                slot.retry_at = Some(Instant::now() + delay);
                Err(e)
            }
        }
    }

    /// Sends a request to `addr` and waits up to `timeout` for the response (any code).
    pub async fn invoke(&self, addr: &str, command: Command, timeout: Duration) -> Result<Command> {
        let conn = self.connection(addr).await?;
        conn.invoke(command, timeout).await
    }

    /// Like [`Remoting::invoke`], but a response code other than SUCCESS is an error.
    pub async fn call(&self, addr: &str, command: Command, timeout: Duration) -> Result<Command> {
        let request = command.code;
        let response = self.invoke(addr, command, timeout).await?;
        check(request, response)
    }

    /// Sends a oneway request to `addr`.
    pub async fn oneway(&self, addr: &str, command: Command) -> Result<()> {
        self.connection(addr).await?.oneway(command).await
    }

    fn is_name_server(&self, addr: &str) -> bool {
        lock(&self.name_servers).contains(addr)
    }

    /// Closes every connection.
    pub fn close(&self) {
        let slots: Vec<_> = lock(&self.slots).drain().map(|(_, slot)| slot).collect();
        for slot in slots {
            if let Ok(slot) = slot.try_lock() {
                if let Some(conn) = &slot.conn {
                    conn.close();
                }
            }
        }
    }
}

/// A client id as the Java client forms it (`ip@instance`), unique per process and `role`.
pub fn client_id(role: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static INSTANCE: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "127.0.0.1@{}#{role}{}#{now}",
        std::process::id(),
        INSTANCE.fetch_add(1, Ordering::Relaxed)
    )
}

/// The HEART_BEAT body of a client with no consumer groups: the Java client's, which always
/// names its inner producer group.
pub fn heartbeat_body(client_id: &str) -> Vec<u8> {
    serde_json::json!({
        "clientID": client_id,
        "producerDataSet": [{"groupName": "CLIENT_INNER_PRODUCER"}],
        "consumerDataSet": [],
        "heartbeatFingerprint": 0,
        "isWithoutSub": false,
    })
    .to_string()
    .into_bytes()
}

/// The response if it is SUCCESS, else an `Error::Response` (or `TopicNotFound`).
pub fn check(request: i32, response: Command) -> Result<Command> {
    if response.code == codes::SUCCESS {
        return Ok(response);
    }
    Err(Error::Response {
        request,
        code: response.code,
        remark: response.remark.unwrap_or_default(),
    })
}
