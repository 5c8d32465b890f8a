//! Finding nsqds: lookupd polls (a random lookupd first, up to three tried), connecting to
//! what they list, and reconnecting after a drop (an immediate re-poll with lookupd, a
//! delayed redial of a configured nsqd).

use std::sync::Arc;

use super::{entropy, spawn_after, Engine, Ev};
use crate::error::Error;
use crate::lookup::{self, Endpoint};
use crate::message::Origin;

impl Engine {
    /// Dials every endpoint lookupd listed that is not connected yet (only the configured
    /// partition's when one is set).
    pub(super) fn discovered(&mut self, endpoints: Vec<Endpoint>) {
        for endpoint in endpoints {
            if self.config.partition.is_some() && endpoint.partition != self.config.partition {
                continue;
            }
            let origin = Origin {
                addr: Arc::from(endpoint.tcp.as_str()),
                partition: endpoint.partition.or(self.config.partition),
            };
            self.http.insert(origin.clone(), endpoint.http);
            self.spawn_dial(origin);
        }
    }

    pub(super) fn poll(&self) {
        if self.stopping {
            return;
        }
        let lookupds = self.config.lookupd.clone();
        let topic = self.config.topic.clone();
        let timeout = self.config.conn.read_timeout;
        let start = (entropy() as usize) % lookupds.len().max(1);
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let mut last = Err(Error::NoServer("no lookupd configured".into()));
            for i in 0..lookupds.len().min(3) {
                let addr = &lookupds[(start + i) % lookupds.len()];
                last = lookup::lookup(addr, &topic, timeout).await;
                if last.is_ok() {
                    break;
                }
            }
            let _ = tx.send(Ev::Lookup(last));
        });
    }

    /// After a connection dropped: asks lookupd again at once (the nsqd may have moved), or
    /// redials a configured nsqd after `reconnect_interval`.
    pub(super) fn schedule_reconnect(&mut self, origin: Origin) {
        self.schedule_redial(origin, false);
    }

    /// After a dial failed: as [`Engine::schedule_reconnect`], but asks lookupd again only after
    /// `reconnect_interval`, so a partition whose leader is not elected yet (a Youzan cluster
    /// answers `E_FAILED_ON_NOT_LEADER` for seconds) is not dialed in a tight loop.
    pub(super) fn schedule_redial(&mut self, origin: Origin, failed: bool) {
        if self.stopping {
            return;
        }
        if !self.config.lookupd.is_empty() {
            if failed {
                spawn_after(&self.tx, self.config.reconnect_interval, Ev::Poll);
            } else {
                let _ = self.tx.send(Ev::Poll);
            }
        }
        let is_static = self.config.nsqd.iter().any(|a| **a == *origin.addr);
        if is_static {
            spawn_after(
                &self.tx,
                self.config.reconnect_interval,
                Ev::Reconnect(origin),
            );
        }
    }
}
