//! Every [`EVERY`]-th message id the watcher's reader passed, per channel: where a newest-first
//! page of the message browser starts reading, instead of the channel's first message.
//!
//! Readers only go forward, so the messages just before a point are found by reading up to it
//! from somewhere earlier. The watcher reads every channel from its first message anyway; the
//! ids it notes on the way let a page start two checkpoints before its bound, with at least
//! `EVERY` (≥ the largest page) messages between there and the bound, and read at most about
//! `2 × EVERY` messages more than the watcher has not read yet. Nothing here is a position of
//! any subscription, and nothing is written to the backend.

use std::collections::HashMap;
use std::sync::RwLock;

use msgstream_facade::msgstream::mq::MessageId;

/// One checkpoint per this many messages read.
pub const EVERY: u64 = 1000;

const _: () = assert!(EVERY >= super::browse::query::MAX_LIMIT as u64);

/// The checkpoints of every channel the watcher reads.
#[derive(Debug, Default)]
pub struct Checkpoints {
    channels: RwLock<HashMap<String, Vec<MessageId>>>,
}

impl Checkpoints {
    /// The watcher's reader of `channel` started over (from its first message): its old
    /// checkpoints are forgotten.
    pub fn restart(&self, channel: &str) {
        if let Ok(mut channels) = self.channels.write() {
            channels.remove(channel);
        }
    }

    /// Appends checkpoints the watcher passed, in channel order.
    pub fn extend(&self, channel: &str, ids: Vec<MessageId>) {
        if ids.is_empty() {
            return;
        }
        if let Ok(mut channels) = self.channels.write() {
            channels.entry(channel.to_string()).or_default().extend(ids);
        }
    }

    /// Forgets the channels not in `names` (deleted).
    pub fn retain(&self, names: &[String]) {
        if let Ok(mut channels) = self.channels.write() {
            channels.retain(|name, _| names.contains(name));
        }
    }

    /// Where to read from for the messages before `bound` (before the channel's end for
    /// `None`): the checkpoint two before the last one below `bound`, so that at least
    /// [`EVERY`] messages lie between it and `bound`. `None` when there is no such checkpoint
    /// (read from the channel's first message).
    pub fn start_before(&self, channel: &str, bound: Option<&MessageId>) -> Option<MessageId> {
        let channels = self.channels.read().ok()?;
        let ids = channels.get(channel)?;
        let below = match bound {
            Some(bound) => ids.partition_point(|id| id < bound),
            None => ids.len(),
        };
        below.checked_sub(2).map(|i| ids[i].clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(range: std::ops::Range<u64>) -> Vec<MessageId> {
        range.map(|i| MessageId::from_u64(i * 10)).collect()
    }

    #[test]
    fn a_page_starts_two_checkpoints_before_its_bound() {
        let checkpoints = Checkpoints::default();
        checkpoints.extend("c", ids(1..4)); // 10, 20, 30
        let start = |bound: Option<u64>| {
            let bound = bound.map(MessageId::from_u64);
            checkpoints
                .start_before("c", bound.as_ref())
                .and_then(|id| id.as_u64())
        };
        assert_eq!(start(None), Some(20));
        assert_eq!(start(Some(31)), Some(20));
        assert_eq!(start(Some(30)), Some(10));
        assert_eq!(start(Some(25)), Some(10));
        assert_eq!(
            start(Some(20)),
            None,
            "one checkpoint below: from the first message"
        );
        assert_eq!(checkpoints.start_before("other", None), None);
        checkpoints.restart("c");
        assert_eq!(start(None), None, "a reader started over forgets");
        checkpoints.extend("c", ids(1..4));
        checkpoints.retain(&["d".to_string()]);
        assert_eq!(start(None), None, "a deleted channel is forgotten");
    }
}
