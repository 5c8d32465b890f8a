//! `MsgPack`: what a stream yields.

use super::proto::MsgPosition;
use super::tsmsg::TsMsg;

/// A batch of messages between two timestamps, with the positions to resume from.
///
/// Plain streams yield one message per pack (start and end positions are that message's);
/// timetick-aligned streams yield every message with `begin_ts < end_ts ≤ end_ts` of all channels.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MsgPack {
    /// Exclusive lower bound of the message timestamps.
    pub begin_ts: u64,
    /// Inclusive upper bound of the message timestamps.
    pub end_ts: u64,
    /// The messages, in a deterministic order.
    pub msgs: Vec<TsMsg>,
    /// Per channel, where to resume to see this pack again.
    pub start_positions: Vec<MsgPosition>,
    /// Per channel, where to resume to see what follows this pack.
    pub end_positions: Vec<MsgPosition>,
}
