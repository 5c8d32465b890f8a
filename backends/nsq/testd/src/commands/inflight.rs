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
            Some(raw) => number(raw, "ready count")?,
            None => 1,
        };
        let max = i64::from(self.shared.options.max_rdy_count);
        if !(0..=max).contains(&count) {
            return Err(Fail::fatal(
                "E_INVALID",
                &format!("RDY count {count} out of range 0-{max}"),
            ));
        }
        if let Some(c) = self.store().clients.get_mut(&self.id) {
            c.rdy = count as u32;
        }
        self.shared.pump();
        Ok(())
    }

    fn message_id(&self, p: &[Vec<u8>], cmd: &str) -> Result<[u8; 16], Fail> {
        if !self.subscribed {
            return Err(Fail::fatal(
                "E_INVALID",
                &format!("cannot {cmd} in current state"),
            ));
        }
        let raw = p.first().ok_or_else(|| {
            Fail::fatal("E_INVALID", &format!("{cmd} insufficient number of params"))
        })?;
        let id: [u8; 16] = raw
            .as_slice()
            .try_into()
            .map_err(|_| Fail::fatal("E_INVALID", "Invalid Message ID"))?;
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
        let id = self.message_id(p, "FIN")?;
        let done = self.with_flight(&id, |channel, client| {
            channel.in_flight.remove(&id);
            client.in_flight = client.in_flight.saturating_sub(1);
            client.finish_count += 1;
        });
        self.shared.pump();
        done.ok_or_else(|| {
            Fail::soft(
                "E_FIN_FAILED",
                format!("FIN {} failed ID not in flight", hex(&id)),
            )
        })
    }

    pub(super) fn req(&mut self, p: &[Vec<u8>]) -> Result<(), Fail> {
        let id = self.message_id(p, "REQ")?;
        let delay = number(p.get(1).map_or(&b""[..], |v| v), "timeout")?;
        let max = self.shared.options.max_req_timeout.as_millis() as i64;
        let delay = Duration::from_millis(delay.clamp(0, max) as u64);
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
                format!("REQ {} failed ID not in flight", hex(&id)),
            )
        })
    }

    pub(super) fn touch(&mut self, p: &[Vec<u8>]) -> Result<(), Fail> {
        let id = self.message_id(p, "TOUCH")?;
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
                format!("TOUCH {} failed ID not in flight", hex(&id)),
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
