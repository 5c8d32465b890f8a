//! [`Remoting`]: one multiplexed connection per address, redialled with backoff.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use super::{Command, Connection, ServerRequest};
use crate::error::{Error, Result};
use crate::protocol::codes;

/// Timeouts and limits of the remoting layer.
#[derive(Debug, Clone)]
pub struct RemotingOptions {
    /// Dial timeout.
    pub connect_timeout: Duration,
    /// Largest frame accepted from a server.
    pub max_frame: usize,
    /// First reconnect delay after a failed dial; doubles per failure up to `max_backoff`.
    pub min_backoff: Duration,
    /// Longest reconnect delay.
    pub max_backoff: Duration,
}

impl Default for RemotingOptions {
    fn default() -> Self {
        RemotingOptions {
            connect_timeout: Duration::from_secs(3),
            max_frame: super::codec::MAX_FRAME + 4,
            min_backoff: Duration::from_millis(50),
            max_backoff: Duration::from_secs(2),
        }
    }
}

#[derive(Default)]
struct Slot {
    conn: Option<Arc<Connection>>,
    failures: u32,
    retry_at: Option<Instant>,
}

/// Connections by address. While a dial to an address is backing off after failures, requests
/// to it fail at once (transient `Disconnected`), so callers can move to another broker or name
/// server instead of piling up behind a dead one.
pub struct Remoting {
    options: RemotingOptions,
    slots: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Slot>>>>,
    notices: Option<mpsc::UnboundedSender<ServerRequest>>,
}

impl Remoting {
    /// A pool; server requests (NOTIFY_CONSUMER_IDS_CHANGED) go to `notices` when given.
    pub fn new(
        options: RemotingOptions,
        notices: Option<mpsc::UnboundedSender<ServerRequest>>,
    ) -> Self {
        Remoting {
            options,
            slots: Mutex::default(),
            notices,
        }
    }

    async fn connection(&self, addr: &str) -> Result<Arc<Connection>> {
        let slot = {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            slots.entry(addr.to_owned()).or_default().clone()
        };
        let mut slot = slot.lock().await;
        if let Some(conn) = slot.conn.as_ref().filter(|c| !c.is_dead()) {
            return Ok(conn.clone());
        }
        if let Some(at) = slot.retry_at.filter(|at| Instant::now() < *at) {
            return Err(Error::Disconnected {
                addr: addr.into(),
                reason: format!(
                    "reconnecting in {:?} after {} failed attempts",
                    at - Instant::now(),
                    slot.failures
                ),
            });
        }
        let o = &self.options;
        match Connection::connect(addr, o.connect_timeout, o.max_frame, self.notices.clone()).await
        {
            Ok(conn) => {
                let conn = Arc::new(conn);
                // A slot that held a connection (now dead) or failed to dial: a reconnect.
                if slot.conn.is_some() || slot.failures > 0 {
                    msgstream::metrics::record_reconnect("rocketmq", addr);
                }
                *slot = Slot {
                    conn: Some(conn.clone()),
                    failures: 0,
                    retry_at: None,
                };
                Ok(conn)
            }
            Err(e) => {
                slot.conn = None;
                slot.failures = slot.failures.saturating_add(1);
                let shift = slot.failures.min(16) - 1;
                let delay = o.min_backoff.saturating_mul(1 << shift).min(o.max_backoff);
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
        self.connection(addr).await?.oneway(command)
    }

    /// Closes every connection.
    pub fn close(&self) {
        let slots: Vec<_> = self
            .slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain()
            .map(|(_, slot)| slot)
            .collect();
        for slot in slots {
            if let Ok(slot) = slot.try_lock() {
                if let Some(conn) = &slot.conn {
                    conn.close();
                }
            }
        }
    }
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
