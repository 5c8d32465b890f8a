//! Flow control on the engine task: RDY shares, backoff pauses and test-the-waters, and the
//! redistribution that keeps connections beyond the in-flight budget from starving.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{entropy, spawn_after, Engine, Ev};
use crate::backoff::{Action, Signal};
use crate::codec;
use crate::message::{Answered, Origin};
use crate::rdy;

impl Engine {
    /// Gives every connection its share (or 0 in backoff), lowering before raising so the
    /// sum never passes `max_in_flight` on the wire.
    pub(super) async fn rebalance(&mut self) {
        let target = if self.backoff.active() || self.stopping {
            0
        } else {
            rdy::per_conn(self.max_in_flight, self.links.len())
        };
        let origins: Vec<Origin> = self.links.keys().cloned().collect();
        for lowering in [true, false] {
            for origin in &origins {
                let current = self.links.get(origin).map_or(0, |l| l.rdy);
                if (target < current) == lowering {
                    self.set_rdy(origin, target).await;
                }
            }
            if lowering {
                self.flush_rdy(&origins).await;
            }
        }
    }

    /// Waits until the RDY counts queued on `origins` are written to their sockets: a raise
    /// on one connection then never reaches the wire before a lowering on another that makes
    /// room for it (each connection writes from its own task, and a busy one could send its
    /// RDY 0 after another's RDY 1: more than `max_in_flight` granted for a moment).
    async fn flush_rdy(&self, origins: &[Origin]) {
        for origin in origins {
            if let Some(link) = self.links.get(origin) {
                if let Err(e) = link.conn.writer.flush().await {
                    tracing::debug!(addr = %origin.addr, "RDY not flushed: {e}");
                }
            }
        }
    }

    pub(super) async fn set_rdy(&mut self, origin: &Origin, wanted: u32) {
        let total: u32 = self.links.values().map(|l| l.rdy).sum();
        let max_in_flight = self.max_in_flight;
        let Some(link) = self.links.get_mut(origin) else {
            return;
        };
        if link.closing {
            return;
        }
        let count = rdy::grant(
            wanted,
            link.conn.negotiated.max_rdy_count,
            link.rdy,
            total,
            max_in_flight,
        );
        if count == link.rdy {
            return;
        }
        link.rdy = count;
        self.shared.touch(&link.source);
        if let Err(e) = link.conn.writer.send(codec::Command::Rdy(count)).await {
            tracing::debug!(addr = %origin.addr, "RDY not sent: {e}");
        }
    }

    /// An answer the engine needs (see `Shared::report`); the counters and the in-flight
    /// count were updated by the answer itself.
    pub(super) async fn answered(&mut self, answered: Answered) {
        if self.stopping {
            if answered.signal == Signal::Backoff {
                self.shared.backoff_handled();
            }
            self.close_if_drained(&answered.origin).await;
            return;
        }
        let action = self.backoff.signal(answered.signal);
        self.counters
            .backoff_level
            .store(u64::from(self.backoff.counter()), Ordering::Relaxed);
        self.shared.listen(self.backoff.active());
        if answered.signal == Signal::Backoff {
            self.shared.backoff_handled();
        }
        match action {
            Action::None => {}
            Action::Pause(duration) => {
                let origins: Vec<Origin> = self.links.keys().cloned().collect();
                for origin in origins {
                    self.set_rdy(&origin, 0).await;
                }
                spawn_after(&self.tx, duration, Ev::BackoffTimer);
            }
            Action::Recover => self.rebalance().await,
        }
    }

    /// The backoff pause ended: RDY 1 on one connection, chosen in rotation.
    pub(super) async fn test_the_waters(&mut self) {
        self.backoff.timer_fired();
        if self.stopping {
            return;
        }
        if !self.backoff.active() {
            self.rebalance().await;
            return;
        }
        if self.links.is_empty() {
            spawn_after(&self.tx, Duration::from_secs(1), Ev::BackoffTimer);
            return;
        }
        self.rotate = self.rotate.wrapping_add(1);
        let pick = self
            .links
            .keys()
            .nth(self.rotate % self.links.len())
            .cloned();
        if let Some(origin) = pick {
            self.set_rdy(&origin, 1).await;
        }
    }

    /// Rotates the budget when connections outnumber `max_in_flight`.
    pub(super) async fn redistribute(&mut self) {
        if self.stopping || self.backoff.active() || self.links.len() <= self.max_in_flight as usize
        {
            return;
        }
        let origins: Vec<Origin> = self.links.keys().cloned().collect();
        let views: Vec<rdy::ConnView> = self
            .links
            .values()
            .map(|l| rdy::ConnView {
                rdy: l.rdy,
                idle: if l.source.in_flight() > 0 {
                    Duration::ZERO
                } else {
                    self.shared.idle(&l.source)
                },
                max_rdy: l.conn.negotiated.max_rdy_count,
            })
            .collect();
        // A random start (go-nsq picks at random too): a fixed stride could keep landing on
        // the same idle connections and starve the one with messages.
        self.rotate = self.rotate.wrapping_add(1 + entropy() as usize);
        let plan = rdy::redistribute(
            &views,
            self.max_in_flight,
            self.config.low_rdy_idle_timeout,
            self.rotate,
        );
        for lowering in [true, false] {
            for (origin, count) in origins.iter().zip(&plan) {
                let current = self.links.get(origin).map_or(0, |l| l.rdy);
                if (*count < current) == lowering && *count != current {
                    self.set_rdy(origin, *count).await;
                }
            }
            if lowering {
                self.flush_rdy(&origins).await;
            }
        }
    }
}
