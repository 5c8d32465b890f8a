//! The `msgstream::mq` adapter: channel → topic (in `config.partition` with extensions),
//! subscription → NSQ channel, ack → FIN.
//!
//! **Message ids.** With partitions, an id is `partition u32 ‖ offset u64 ‖ raw_size u32`, all
//! big-endian, so byte order is channel order; a seek re-subscribes from `offset` (inclusive)
//! or `offset + raw_size` (exclusive). Upstream nsqd assigns no orderable, returned id, so the
//! producer stamps each message with a `u64` (8 bytes BE) that increases per process, and
//! nothing can be seeked to. A foreign body (no envelope, so no stamp) gets the NSQ id nsqd gave
//! it, read as the hexadecimal `u64` nsqd writes: foreign messages in flight together have
//! distinct ids, so each is acked on its own.
//!
//! **Envelope.** NSQ has no message headers, so properties travel in the body, framed as
//! `"\xffMS1" ‖ u64 id ‖ u16 count ‖ (u16 len, key, u32 len, value)* ‖ payload`. A body
//! without the magic (published by a foreign client) is delivered as payload with no
//! properties.
//!
//! **Consume offsets** (`virtual_queue:` and the like) exist only on a Youzan cluster
//! (`cluster = true`): a standalone Youzan nsqd refuses them ("Not supported while coordinator
//! disabled"), so there seek, readers and the latest id are `Unsupported`, a new subscription
//! starts without an offset and ordered consumers are spooled, as upstream.
//!
//! **Readers** (a cluster, and `nsqd_http` or lookupd) are ephemeral channels started at an
//! offset; with lookupd they dial the nsqd lookupd names for the partition, TCP and HTTP.
//!
//! **Seeking by time** (a cluster, hybrid timestamps: `NsqConfig::timestamps`): see `time_seek`.
//!
//! **Latest id** (a cluster, `nsqd_http`): nsqd has no call for a partition's last offset, so
//! it is pieced together from the fork's HTTP API: `/stats` gives the partition's message count
//! and end offset, `/message/get?search_mode=count` the newest message's own offset, and the
//! raw size is the end minus that offset, re-read until no publish raced the calls. The result
//! is exactly the id a consumer receives for that message.
//!
//! **Ordered consumers** (`ConsumerOptions::ordered`, a cluster and `nsqd_http`): read through
//! the fork's ordered channels, FIN on receipt, commit point in the subscription's channel
//! (see `ordered`).
//!
//! **Spooled consumers** (ordered consumers where the server has no ordered channel with a
//! settable commit point, and any consumer of a subscription whose spool holds messages): one
//! message in flight, FINed once it is in a local spool that keeps it until the ack (see
//! `crate::spool` and `spooled`).
//!
//! **Exclusive subscriptions** are enforced per client: NSQ shares a channel's messages among
//! all its consumers, and cannot tell two processes apart.

mod admin;
mod client;
mod cluster;
mod consumer;
mod ordered;
mod producer;
mod reader;
mod redelivery;
mod spooled;
mod time_seek;

pub use client::NsqClient;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use msgstream::mq::{Delivery, Message, MessageId, Properties};
use msgstream::msg::SharedStr;
use msgstream::{Error, Result};

use crate::codec::MsgId;
use crate::BACKEND;

const MAGIC: &[u8; 4] = b"\xffMS1";

/// Maps a client error onto the core's.
pub(crate) fn map_err(e: crate::Error) -> Error {
    match e {
        crate::Error::Invalid(message) => Error::InvalidArgument(message),
        crate::Error::Closed(what) => Error::Closed(what),
        e => {
            let transient = e.is_transient();
            Error::backend_source(BACKEND, e.to_string(), transient, e)
        }
    }
}

/// Frames payload and properties into an NSQ body.
pub(crate) fn encode(id: u64, payload: &[u8], properties: &Properties) -> Bytes {
    let props: usize = properties.iter().map(|(k, v)| 6 + k.len() + v.len()).sum();
    let mut buf = BytesMut::with_capacity(14 + props + payload.len());
    buf.put_slice(MAGIC);
    buf.put_u64(id);
    buf.put_u16(properties.len() as u16);
    for (key, value) in properties {
        buf.put_u16(key.len() as u16);
        buf.put_slice(key.as_bytes());
        buf.put_u32(value.len() as u32);
        buf.put_slice(value.as_bytes());
    }
    buf.put_slice(payload);
    buf.freeze()
}

/// Splits an NSQ body into producer id, payload and properties; a foreign body (without the
/// envelope) has no producer id.
pub(crate) fn decode(body: &Bytes) -> Result<(Option<u64>, Bytes, Properties)> {
    if !body.starts_with(MAGIC) {
        return Ok((None, body.clone(), Properties::new()));
    }
    let short = || Error::Decode("truncated msgstream envelope in an NSQ message".into());
    let mut rest = &body[4..];
    if rest.len() < 10 {
        return Err(short());
    }
    let id = rest.get_u64();
    let count = rest.get_u16();
    let mut properties = Properties::new();
    for _ in 0..count {
        let key = take(&mut rest, 2).ok_or_else(short)?;
        let value = take(&mut rest, 4).ok_or_else(short)?;
        properties.insert(text(key)?, text(value)?);
    }
    let payload = body.slice(body.len() - rest.len()..);
    Ok((Some(id), payload, properties))
}

/// The id of a foreign upstream delivery: nsqd writes its ids as 16 hexadecimal digits, read
/// here as the `u64` they spell; an id that is not hexadecimal gives its last 8 bytes.
fn foreign_id(nsq_id: &MsgId) -> u64 {
    std::str::from_utf8(&nsq_id.0)
        .ok()
        .and_then(|hex| u64::from_str_radix(hex, 16).ok())
        .unwrap_or_else(|| {
            let mut low = [0u8; 8];
            low.copy_from_slice(&nsq_id.0[8..]);
            u64::from_be_bytes(low)
        })
}

/// The message of a delivery: payload and properties from the envelope; the id is the
/// delivery's place `(partition, offset, raw_size)` when the server has partitions (then a
/// delivery without one is an error), else the producer's stamp, or for a foreign body its
/// NSQ id (see [`foreign_id`]).
pub(crate) fn delivered_message(
    topic: &SharedStr,
    partition: Option<u32>,
    nsq_id: &MsgId,
    body: &Bytes,
    position: Option<(u64, u32)>,
    delivery: Delivery,
) -> Result<Message> {
    let (stamped, payload, properties) = decode(body)?;
    let id = match (partition, position) {
        (Some(partition), Some((offset, raw_size))) => Position {
            partition,
            offset,
            raw_size,
        }
        .id(),
        (Some(_), None) => {
            return Err(Error::backend(
                BACKEND,
                "a delivery without an offset from a partitioned topic",
            ))
        }
        (None, _) => MessageId::from_u64(stamped.unwrap_or_else(|| foreign_id(nsq_id))),
    };
    Ok(Message {
        topic: topic.clone(),
        id,
        payload,
        properties,
        delivery,
    })
}

fn take<'a>(rest: &mut &'a [u8], width: usize) -> Option<&'a [u8]> {
    let len = match width {
        2 => usize::from(u16::from_be_bytes(rest.get(..2)?.try_into().ok()?)),
        _ => u32::from_be_bytes(rest.get(..4)?.try_into().ok()?) as usize,
    };
    let value = rest.get(width..width + len)?;
    *rest = &rest[width + len..];
    Some(value)
}

fn text(bytes: &[u8]) -> Result<String> {
    String::from_utf8(bytes.to_vec())
        .map_err(|_| Error::Decode("a message property is not UTF-8".into()))
}

/// A position in a partition: the message at `offset`, `raw_size` bytes long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Position {
    pub partition: u32,
    pub offset: u64,
    pub raw_size: u32,
}

impl Position {
    pub(crate) fn id(self) -> MessageId {
        let mut bytes = [0u8; 16];
        bytes[..4].copy_from_slice(&self.partition.to_be_bytes());
        bytes[4..12].copy_from_slice(&self.offset.to_be_bytes());
        bytes[12..].copy_from_slice(&self.raw_size.to_be_bytes());
        MessageId::from_backend_bytes(bytes)
    }

    pub(crate) fn parse(id: &MessageId) -> Result<Position> {
        let b = id.as_bytes();
        if b.len() != 16 {
            return Err(Error::Decode(format!(
                "an nsq (partition, offset) id is 16 bytes, got {} ({id:?})",
                b.len()
            )));
        }
        let mut b = b;
        Ok(Position {
            partition: b.get_u32(),
            offset: b.get_u64(),
            raw_size: b.get_u32(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelopes_round_trip_and_foreign_bodies_pass() {
        let mut props = Properties::new();
        props.insert("traceparent".into(), "00-ab".into());
        props.insert("k".into(), String::new());
        let body = encode(7, b"payload", &props);
        let (id, payload, back) = decode(&body).expect("decode");
        assert_eq!(
            (id, payload.as_ref(), &back),
            (Some(7), &b"payload"[..], &props)
        );
        let foreign = Bytes::from_static(b"plain body");
        assert_eq!(
            decode(&foreign).expect("foreign"),
            (None, foreign, Properties::new())
        );
        for cut in 4..body.len() - 7 {
            assert!(decode(&body.slice(..cut)).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn foreign_bodies_are_known_by_their_nsq_id() {
        let topic = SharedStr::interned("t");
        let delivered = |nsq_id: &[u8; 16], body: &'static [u8]| {
            delivered_message(
                &topic,
                None,
                &MsgId(*nsq_id),
                &Bytes::from_static(body),
                None,
                Delivery::default(),
            )
            .expect("delivered")
            .id
        };
        assert_eq!(
            delivered(b"0d1a2b3c4d5e6f70", b"foreign"),
            MessageId::from_u64(0x0d1a_2b3c_4d5e_6f70)
        );
        assert_ne!(
            delivered(b"0d1a2b3c4d5e6f70", b"foreign"),
            delivered(b"0d1a2b3c4d5e6f71", b"foreign")
        );
        assert_eq!(
            delivered(b"not hex: 1234567", b"foreign"),
            MessageId::from_backend_bytes(*b" 1234567")
        );
        // An envelope's stamp wins over the NSQ id.
        let body = encode(9, b"p", &Properties::new());
        let stamped = delivered_message(
            &topic,
            None,
            &MsgId(*b"0d1a2b3c4d5e6f70"),
            &body,
            None,
            Delivery::default(),
        )
        .expect("delivered");
        assert_eq!(stamped.id, MessageId::from_u64(9));
    }

    #[test]
    fn positions_order_as_bytes() {
        let a = Position {
            partition: 0,
            offset: 35,
            raw_size: 35,
        }
        .id();
        let b = Position {
            partition: 0,
            offset: 300,
            raw_size: 1,
        }
        .id();
        let c = Position {
            partition: 1,
            offset: 0,
            raw_size: 9,
        }
        .id();
        assert!(a < b && b < c);
        assert_eq!(Position::parse(&b).expect("parse").offset, 300);
        assert!(Position::parse(&MessageId::from_u64(1)).is_err());
    }
}
