//! SUB, SUB_ORDERED and SUB_ADVANCED, with consume offsets and the fork's partition quirk.

use super::{text, Fail, Session};
use crate::store::SubKey;
use crate::tcp::client_state;
use crate::valid_name;

impl Session {
    pub(super) fn sub(&mut self, p: &[Vec<u8>], kind: SubKind) -> Result<(), Fail> {
        self.check_auth()?;
        if self.subscribed || self.closing {
            return Err(Fail::fatal("E_INVALID", "cannot SUB in current state"));
        }
        if self.heartbeat.is_none() {
            return Err(Fail::fatal(
                "E_INVALID",
                "cannot SUB with heartbeats disabled",
            ));
        }
        let topic = self.topic_name(p.first(), "SUB")?;
        let channel = p
            .get(1)
            .map(|c| text(c))
            .ok_or_else(|| Fail::fatal("E_INVALID", "SUB insufficient number of parameters"))?;
        if !valid_name(&channel) {
            return Err(Fail::fatal(
                "E_BAD_CHANNEL",
                &format!("SUB channel name {channel:?} is not valid"),
            ));
        }
        let ordered_topic = self
            .shared
            .cluster
            .as_ref()
            .is_some_and(|c| c.ordered(&topic));
        if ordered_topic && !matches!(kind, SubKind::Ordered) {
            return Err(Fail::fatal(
                "E_SUB_ORDER_IS_MUST",
                "this topic is configured only allow ordered sub",
            ));
        }
        // The Youzan parser reads the partition of SUB_ADVANCED only when there is no offset
        // (notes §2.6.1): with an offset the default partition is used.
        let partition_param = match kind {
            SubKind::Advanced if p.len() >= 4 => None,
            SubKind::Ordered if p.len() < 3 => {
                return Err(Fail::fatal(
                    "E_INVALID",
                    "SUB_ORDERED insufficient number of parameters",
                ))
            }
            _ => p.get(2),
        };
        // A SUB the leader cannot serve ends the connection, unlike a PUB.
        let pid = self
            .partition(&topic, partition_param, false)
            .map_err(|fail| Fail {
                fatal: true,
                ..fail
            })?;
        let offset = match (kind, p.get(3)) {
            (SubKind::Advanced, Some(raw)) => Some(parse_offset(raw)?),
            _ => None,
        };
        // Without the coordinator only `special:-1` is served; the channel exists by then
        // (Y8 87-89, and its later /lookup lists the channel).
        let refused = offset.as_ref().is_some_and(|o| !o.served_standalone())
            && self.shared.cluster.is_none();
        let mut store = self.store();
        let ordered_channel = {
            let Some(partition) = store.partition(&topic, pid) else {
                return Err(Fail::fatal("E_TOPIC_NOT_EXIST", ""));
            };
            // `special:-1` on a channel that already exists does not skip what the channel
            // already holds (notes §2.6.3): only a new channel starts at the end.
            let existed = partition.channels.contains_key(&channel);
            let target = offset
                .filter(|o| !(existed && matches!(o, Offset::Latest)))
                .map(|o| o.index_in(partition));
            let channel_state = partition.channel(&channel);
            if refused {
                return Err(Fail::fatal("E_INVALID", NO_COORDINATOR));
            }
            if matches!(kind, SubKind::Ordered) {
                channel_state.ordered = true;
            }
            let mut forgotten = Vec::new();
            if let Some(cursor) = target {
                if channel_state.clients.is_empty() {
                    forgotten = channel_state.reset(cursor);
                }
            }
            channel_state.clients.push(self.id);
            let ordered = channel_state.ordered;
            store.release_in_flight(forgotten);
            ordered
        };
        if ordered_channel && !matches!(kind, SubKind::Ordered) {
            if let Some(c) = store
                .partition(&topic, pid)
                .and_then(|p| p.channels.get_mut(&channel))
            {
                c.clients.retain(|id| *id != self.id);
            }
            return Err(Fail::fatal(
                "E_SUB_ORDER_IS_MUST",
                "the channel is ordered, use SUB_ORDERED",
            ));
        }
        let mut state = client_state(self.tx.clone(), self.closer.clone(), self.msg_timeout);
        state.sub = Some(SubKey {
            topic,
            partition: pid,
            channel,
        });
        state.positions = !matches!(kind, SubKind::Plain);
        state.user_agent = self.user_agent.clone();
        store.clients.insert(self.id, state);
        drop(store);
        self.subscribed = true;
        self.reply(b"OK");
        Ok(())
    }
}

#[derive(Clone, Copy)]
pub(super) enum SubKind {
    Plain,
    Ordered,
    Advanced,
}

/// A consume offset (`special:-1`, `virtual_queue:N`, `timestamp:S`).
pub(crate) enum Offset {
    Latest,
    Virtual(u64),
    Time(u64),
    /// `msgcount:N`: the N-th message, 1-based (0 is the first too).
    Count(u64),
}

/// How a standalone Youzan nsqd (no coordinator) refuses every consume offset but
/// `special:-1`, over TCP and HTTP (Y8 73-77, 88).
pub(crate) const NO_COORDINATOR: &str = "Not supported while coordinator disabled";

impl Offset {
    /// Whether a standalone Youzan nsqd (no coordinator) serves this offset: only
    /// `special:-1`; the others search the coordinator's commit log (Y8 72-77, 87-89).
    pub(crate) fn served_standalone(&self) -> bool {
        matches!(self, Offset::Latest)
    }

    /// The log index a channel moved to this offset continues from.
    pub(crate) fn index_in(&self, partition: &crate::store::Partition) -> usize {
        match *self {
            Offset::Latest => partition.log.len(),
            Offset::Virtual(v) => partition.index_of_offset(v),
            Offset::Time(secs) => partition.index_of_time(secs),
            Offset::Count(n) => usize::try_from(n.saturating_sub(1))
                .unwrap_or(usize::MAX)
                .min(partition.log.len()),
        }
    }
}

/// Parses an offset token; `None` for unknown types and values.
pub(crate) fn parse_offset_token(token: &str) -> Option<Offset> {
    let (kind, value) = token.split_once(':')?;
    let value: i64 = value.parse().ok()?;
    match (kind, value) {
        ("special", -1) => Some(Offset::Latest),
        // The fork reads a negative virtual offset as the beginning (Y6 299).
        ("virtual_queue", v) => Some(Offset::Virtual(v.max(0) as u64)),
        ("msgcount", v) if v >= 0 => Some(Offset::Count(v as u64)),
        ("timestamp", v) if v >= 0 => Some(Offset::Time(v as u64)),
        _ => None,
    }
}

pub(super) fn parse_offset(raw: &[u8]) -> Result<Offset, Fail> {
    let token = text(raw);
    parse_offset_token(&token)
        .ok_or_else(|| Fail::fatal("E_INVALID", &format!("invalid consume offset:{token}")))
}
