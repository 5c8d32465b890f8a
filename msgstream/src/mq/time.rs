//! Time as a position: what a message's timestamp is to the mq layer, how a backend's time
//! index is asked, and the forward scan that makes its answer exact.
//!
//! **A message's timestamp** is the stream's *logical* timestamp: the `end_ts` of the
//! [`crate::msg::TsMsg`] its payload encodes ([`crate::msg::MsgBody::end_ts`]: the largest row
//! timestamp of an Insert or Delete, else the header's). Backends treat it as an opaque `u64`;
//! only where the configuration says timestamps are Milvus hybrid timestamps
//! ([`Timestamps::Hybrid`]) may a backend relate it to a clock of its own. A payload that does
//! not decode as a message has no timestamp: a time search passes over it and never stops at it.
//!
//! Timestamps are *not* ordered within a channel between two timeticks (a tick only promises
//! that nothing after it is at or below its own timestamp). "The first message with timestamp ≥
//! ts" therefore means the first in channel order; messages after it may still be below `ts`.
//! It is also the first message at which the running maximum of timestamps reaches `ts`, and
//! that running maximum *is* ordered: this is what makes a sparse index of high-water marks
//! exact (see [`crate::mq::Client::time_lower_bound`]).
//!
//! **Exactness** comes in two steps. The backend answers [`crate::mq::Client::time_lower_bound`]
//! from its own index: an id before which no message has a timestamp ≥ ts, as close to the
//! answer as its index allows. [`scan_to_time`] then reads forward from there, decoding, to the
//! exact first message. The provided [`crate::mq::Client::message_id_at_time`] does both.

use std::sync::OnceLock;

use super::{Client, MessageId, ReaderOptions};
use crate::msg::DecoderRegistry;
use crate::Result;

/// Bits of a Milvus hybrid timestamp below the physical milliseconds (the logical counter).
pub const HYBRID_LOGICAL_BITS: u32 = 18;

/// How the streams' logical timestamps relate to wall-clock time, as the configuration says
/// (`[stream] timestamps` in the facade's file).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Timestamps {
    /// Opaque `u64`s: nothing relates them to any clock. Backends whose only index is their
    /// own clock (RocketMQ's store time, Youzan nsqd's seconds) cannot search them:
    /// `Error::Unsupported`. The default.
    #[default]
    Opaque,
    /// Milvus hybrid timestamps: `physical_ms << 18 | logical`, the physical part from a clock
    /// that runs at most `clock_slack_ms` ahead of a broker's clock when the message is stored.
    /// A broker that indexes its store time can then answer a time search exactly (see
    /// [`Timestamps::broker_search_ms`]).
    Hybrid {
        /// How far ahead of a broker's clock the timestamps' clock may run, in milliseconds.
        clock_slack_ms: u64,
    },
}

impl Timestamps {
    /// The broker time (Unix milliseconds) to search a store-time index at for the first message
    /// with timestamp ≥ `timestamp`, or `None` where timestamps are [`Timestamps::Opaque`].
    ///
    /// Why this is a lower bound: a message with hybrid timestamp `t` is stored after `t` was
    /// allocated, at broker time `s ≥ physical(t) − slack`. So a message stored before
    /// `physical(ts) − slack` has `physical(t) ≤ s + slack < physical(ts)`, hence `t < ts`:
    /// starting at the first message stored at or after that time loses nothing. The answer
    /// is exact whenever the broker's clock is at most `clock_slack_ms` behind the clock the
    /// timestamps come from.
    pub fn broker_search_ms(self, timestamp: u64) -> Option<u64> {
        match self {
            Timestamps::Opaque => None,
            Timestamps::Hybrid { clock_slack_ms } => {
                Some(hybrid_physical_ms(timestamp).saturating_sub(clock_slack_ms))
            }
        }
    }
}

/// The hybrid timestamp of Unix time `unix_ms` with logical counter 0: the smallest hybrid
/// timestamp at or after that millisecond (saturating for times past the year 10^4 × 100).
pub fn hybrid_from_unix_ms(unix_ms: u64) -> u64 {
    unix_ms
        .checked_shl(HYBRID_LOGICAL_BITS)
        .filter(|ts| ts >> HYBRID_LOGICAL_BITS == unix_ms)
        .unwrap_or(u64::MAX)
}

/// The physical part (Unix milliseconds) of a hybrid timestamp.
pub fn hybrid_physical_ms(timestamp: u64) -> u64 {
    timestamp >> HYBRID_LOGICAL_BITS
}

/// Where a time search landed in one channel: read from `id`, including it or not. It is
/// exactly what [`crate::mq::Consumer::seek`] and [`ReaderOptions`] take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimePosition {
    /// The first message with timestamp ≥ the time asked (`inclusive`), or, when no message
    /// has one yet, the newest message (`!inclusive`) or an id past every message (`inclusive`).
    pub id: MessageId,
    /// Whether the message at `id` is read.
    pub inclusive: bool,
}

impl TimePosition {
    /// Options for a reader starting here.
    pub fn reader_options(&self, topic: &str) -> ReaderOptions {
        ReaderOptions {
            topic: topic.to_string(),
            start: self.id.clone(),
            inclusive: self.inclusive,
        }
    }
}

/// The decoders a time search uses: the built-in kinds, every other kind read by its header.
fn registry() -> &'static DecoderRegistry {
    static REGISTRY: OnceLock<DecoderRegistry> = OnceLock::new();
    REGISTRY.get_or_init(DecoderRegistry::default)
}

/// A payload's timestamp as time searches see it: the `end_ts` of the message it encodes, or
/// `None` when it does not decode. Whoever copies messages between backends sets
/// [`crate::mq::ProducerMessage::timestamp`] from it.
pub fn message_timestamp(payload: &[u8]) -> Option<u64> {
    registry().decode(payload).ok().map(|body| body.end_ts())
}

/// Reads `topic` forward from `bound` (inclusive) to the first message with timestamp ≥
/// `timestamp`, as of the call (messages produced meanwhile may or may not be seen).
///
/// Exact when `bound` is a lower bound in the sense of [`Client::time_lower_bound`]. Costs one
/// reader and the messages between `bound` and the answer.
pub async fn scan_to_time<C: Client + ?Sized>(
    client: &C,
    topic: &str,
    bound: MessageId,
    timestamp: u64,
) -> Result<TimePosition> {
    let start = TimePosition {
        id: bound,
        inclusive: true,
    };
    let mut reader = client.create_reader(start.reader_options(topic)).await?;
    let mut found = Ok(start);
    loop {
        match reader.has_next().await {
            Ok(true) => {}
            Ok(false) => break,
            Err(error) => {
                found = Err(error);
                break;
            }
        }
        match reader.next().await {
            Ok(message) => {
                if message_timestamp(&message.payload).is_some_and(|ts| ts >= timestamp) {
                    found = Ok(TimePosition {
                        id: message.id,
                        inclusive: true,
                    });
                    break;
                }
                found = Ok(TimePosition {
                    id: message.id,
                    inclusive: false,
                });
            }
            Err(error) => {
                found = Err(error);
                break;
            }
        }
    }
    reader.close().await;
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hybrid_timestamps_round_trip_their_physical_part() {
        let ms = 1_796_403_600_000; // 2026-12-04T17:00:00Z
        let ts = hybrid_from_unix_ms(ms);
        assert_eq!(ts, ms << 18);
        assert_eq!(hybrid_physical_ms(ts | 0x3ffff), ms);
        assert_eq!(hybrid_from_unix_ms(u64::MAX >> 10), u64::MAX);
    }

    #[test]
    fn broker_search_time_is_the_physical_time_minus_the_slack() {
        let ts = hybrid_from_unix_ms(10_000) | 5;
        assert_eq!(Timestamps::Opaque.broker_search_ms(ts), None);
        let hybrid = Timestamps::Hybrid {
            clock_slack_ms: 3_000,
        };
        assert_eq!(hybrid.broker_search_ms(ts), Some(7_000));
        assert_eq!(hybrid.broker_search_ms(5), Some(0));
    }

    /// The memory backend indexes what raw producers send too (no timestamp given: it reads
    /// the payload's), and the answer is the first message in channel order at or after the
    /// time, not the smallest timestamp above it.
    #[tokio::test]
    async fn raw_messages_are_found_by_their_payload_timestamp() {
        use crate::mq::{Client, ProducerMessage};
        let client = crate::mem::MemoryClient::new();
        let producer = client.create_producer("t").await.expect("producer");
        for ts in [5, 3, 9, 7, 12] {
            let payload = crate::msg::TsMsg::time_tick(ts).encode();
            producer
                .send(ProducerMessage::new(payload))
                .await
                .expect("send");
        }
        let bound = client.time_lower_bound("t", 8).await.expect("bound");
        assert_eq!(bound, MessageId::from_u64(2));
        let at = client.message_id_at_time("t", 6).await.expect("at");
        assert_eq!(
            at,
            TimePosition {
                id: MessageId::from_u64(2),
                inclusive: true
            }
        );
        let after = client.message_id_at_time("t", 13).await.expect("after");
        assert_eq!(
            after,
            TimePosition {
                id: MessageId::from_u64(4),
                inclusive: false
            }
        );
    }

    #[test]
    fn a_payload_that_is_no_message_has_no_timestamp() {
        let tick = crate::msg::TsMsg::time_tick(42).encode();
        assert_eq!(message_timestamp(&tick), Some(42));
        assert_eq!(message_timestamp(b"\xff\xff not a message"), None);
    }
}
