//! Finding nsqds: lookupd polls (a random lookupd first, up to three tried), connecting to
//! what they list, and reconnecting after a drop (an immediate re-poll with lookupd, a
//! delayed redial of a configured nsqd).

use std::sync::Arc;
use std::time::Duration;

use super::{entropy, spawn_after, Engine, Ev};
use crate::error::Error;
use crate::lookup::{self, Endpoint};
use crate::message::Origin;

/// The first pause before asking lookupd again after a failed dial.
const FIRST_REDIAL: Duration = Duration::from_millis(50);

/// The pause after `failures` failed dials in a row: [`FIRST_REDIAL`] doubled per failure, at
/// most `longest`.
fn redial_pause(failures: u32, longest: Duration) -> Duration {
    FIRST_REDIAL
        .saturating_mul(1u32 << failures.min(16))
        .min(longest)
}

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
    /// a pause that doubles from [`FIRST_REDIAL`] to `reconnect_interval` with each failure in
    /// a row, so a partition whose leader is not elected yet (a Youzan cluster answers
    /// `E_FAILED_ON_NOT_LEADER` for seconds) is neither dialed in a tight loop nor found late.
    pub(super) fn schedule_redial(&mut self, origin: Origin, failed: bool) {
        if self.stopping {
            return;
        }
        if !self.config.lookupd.is_empty() {
            if failed {
                let pause = redial_pause(self.failed_dials, self.config.reconnect_interval);
                self.failed_dials = self.failed_dials.saturating_add(1);
                spawn_after(&self.tx, pause, Ev::Poll);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redials_back_off_up_to_the_reconnect_interval() {
        let longest = Duration::from_secs(1);
        let pauses: Vec<u128> = (0..7)
            .map(|n| redial_pause(n, longest).as_millis())
            .collect();
        assert_eq!(pauses, [50, 100, 200, 400, 800, 1000, 1000]);
        assert_eq!(redial_pause(u32::MAX, longest), longest);
        assert_eq!(redial_pause(0, Duration::ZERO), Duration::ZERO);
    }
}
