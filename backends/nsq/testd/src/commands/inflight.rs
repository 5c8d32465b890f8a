//! RDY, FIN, REQ, TOUCH and CLS: what a subscribed connection does with its messages.

use std::time::Duration;

use super::{hex, number, Fail, Session};
use crate::store::Store;
use crate::tcp::now;

impl Session {
    pub(super) fn rdy(&mut self, p: &[Vec<u8>]) -> Result<(), Fail> {
        if self.closing {
            return Ok(());
        }
        if !self.subscribed {
            return Err(Fail::fatal("E_INVALID", "cannot RDY in current state"));
        }
        let count = match p.first() {
            Some(raw) => number(raw, "RDY could not parse count")?,
            None => 1,
        };
        let max = u64::from(self.shared.options.max_rdy_count);
        if count > max {
            return Err(Fail::fatal(
                "E_INVALID",
                &format!("RDY count {count} out of range 0-{max}"),
            ));
        }
        if let Some(c) = self.store().clients.get_mut(&self.id) {
            c.rdy = count as u32;
            if c.in_flight >= c.rdy {
                // Not ready any more: nsqd flushes what it buffered.
                let _ = c.out.send(crate::output::flush_marker());
            }
        }
        self.shared.pump();
        Ok(())
    }

    /// The id of FIN / REQ / TOUCH, checked in nsqd's order: state, number of params
    /// (`needed`), id length.
    fn message_id(&self, p: &[Vec<u8>], cmd: &str, needed: usize) -> Result<[u8; 16], Fail> {
        if !self.subscribed {
            return Err(Fail::fatal(
                "E_INVALID",
                &format!("cannot {cmd} in current state"),
            ));
        }
        let raw = p.first().filter(|_| p.len() >= needed).ok_or_else(|| {
            Fail::fatal("E_INVALID", &format!("{cmd} insufficient number of params"))
        })?;
        // The texts differ: nsqd 1.3.0 says `invalid message ID`, the fork `Invalid Message ID`.
        let invalid = if self.shared.options.extensions.partitions() {
            "Invalid Message ID"
        } else {
            "invalid message ID"
        };
        let id: [u8; 16] = raw
            .as_slice()
            .try_into()
            .map_err(|_| Fail::fatal("E_INVALID", invalid))?;
        if self.shared.options.extensions.partitions() && id == [0u8; 16] {
            return Err(Fail::fatal("E_INVALID", "Invalid Message ID"));
        }
        Ok(id)
    }

    /// Applies `f` to this client's in-flight message `id`; `None` when it is not in flight.
    fn with_flight<R>(
        &self,
        id: &[u8; 16],
        f: impl FnOnce(&mut crate::store::Channel, &mut crate::store::ClientState) -> R,
    ) -> Option<R> {
        let mut store = self.store();
        let sub = store.clients.get(&self.id)?.sub.clone()?;
        let Store {
            topics, clients, ..
        } = &mut *store;
        let channel = topics
            .get_mut(&sub.topic)?
            .partitions
            .get_mut(&sub.partition)?
            .channels
            .get_mut(&sub.channel)?;
        if channel.in_flight.get(id)?.client != self.id {
            return None;
        }
        let client = clients.get_mut(&self.id)?;
        Some(f(channel, client))
    }

    pub(super) fn fin(&mut self, p: &[Vec<u8>]) -> Result<(), Fail> {
        let id = self.message_id(p, "FIN", 1)?;
        let done = self.with_flight(&id, |channel, client| {
            if let Some(flight) = channel.in_flight.remove(&id) {
                channel.latencies.finished(flight.delivered);
            }
            client.in_flight = client.in_flight.saturating_sub(1);
            client.finish_count += 1;
        });
        self.shared.pump();
        done.ok_or_else(|| {
            Fail::soft(
                "E_FIN_FAILED",
                self.not_in_flight(
                    "FIN",
                    &id,
                    "failed ErrType:7 ErrCode:0 : Message ID not in flight",
                ),
            )
        })
    }

    pub(super) fn req(&mut self, p: &[Vec<u8>]) -> Result<(), Fail> {
        let id = self.message_id(p, "REQ", 2)?;
        let raw = p.get(1).map_or(&[][..], Vec::as_slice);
        let delay = number(raw, "REQ could not parse timeout")?;
        let max = self.shared.options.max_req_timeout.as_millis() as u64;
        let delay = Duration::from_millis(delay.min(max));
        let done = self.with_flight(&id, |channel, client| {
            if channel.ordered && !delay.is_zero() {
                // The Youzan server ignores a delayed REQ on an ordered channel: the message
                // stays in flight until its timeout.
                return;
            }
            if let Some(flight) = channel.in_flight.remove(&id) {
                client.in_flight = client.in_flight.saturating_sub(1);
                client.requeue_count += 1;
                channel.requeue_count += 1;
                channel.requeue(flight, now() + delay);
            }
        });
        self.shared.pump();
        done.ok_or_else(|| {
            Fail::soft(
                "E_REQ_FAILED",
                self.not_in_flight("REQ", &id, "failed Message ID not in flight"),
            )
        })
    }

    pub(super) fn touch(&mut self, p: &[Vec<u8>]) -> Result<(), Fail> {
        let id = self.message_id(p, "TOUCH", 1)?;
        let max_msg_timeout = self.shared.options.max_msg_timeout;
        let done = self.with_flight(&id, |channel, client| {
            if let Some(flight) = channel.in_flight.get_mut(&id) {
                // As nsqd: a touched message still times out `max_msg_timeout` after delivery.
                let limit = flight.delivered + max_msg_timeout;
                flight.deadline = (now() + client.msg_timeout).min(limit);
            }
        });
        done.ok_or_else(|| {
            Fail::soft(
                "E_TOUCH_FAILED",
                self.not_in_flight("TOUCH", &id, "failed Message ID not in flight"),
            )
        })
    }

    pub(super) fn cls(&mut self) -> Result<(), Fail> {
        if !self.subscribed || self.closing {
            return Err(Fail::fatal("E_INVALID", "cannot CLS in current state"));
        }
        self.closing = true;
        if let Some(c) = self.store().clients.get_mut(&self.id) {
            c.closing = true;
        }
        self.reply(b"CLOSE_WAIT");
        Ok(())
    }
}

impl Session {
    /// The text of a FIN/REQ/TOUCH of an id not in flight: nsqd 1.3.0 prints the id as text,
    /// the fork as a Go byte array with its own wording (Y4 24, 236, 239).
    fn not_in_flight(&self, cmd: &str, id: &[u8; 16], fork: &str) -> String {
        if self.shared.options.extensions.partitions() {
            format!("{cmd} {} {fork}", super::go_bytes(id))
        } else {
            format!("{cmd} {} failed ID not in flight", hex(id))
        }
    }
}
