//! Stored messages as a PULL_MESSAGE response carries them (`MessageDecoder` layout), and the
//! batch encoding SEND_BATCH_MESSAGE expects.

use std::collections::BTreeMap;

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::{compression, properties};
use crate::error::{Error, Result};

const MAGIC_V1: i32 = -626_843_481;
const MAGIC_V2: i32 = -626_843_477;
const FLAG_BORNHOST_V6: i32 = 0x10;
const FLAG_STOREHOST_V6: i32 = 0x20;

/// One message as stored by the broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredMessage {
    /// Topic it is stored in (with namespace and `%RETRY%` prefixes as on the broker).
    pub topic: String,
    /// Queue id.
    pub queue_id: i32,
    /// Logical offset in the queue.
    pub queue_offset: i64,
    /// Commit-log offset (what CONSUMER_SEND_MSG_BACK names).
    pub commit_log_offset: i64,
    /// User flag.
    pub flag: i32,
    /// Producer timestamp, ms.
    pub born_timestamp: i64,
    /// Broker store timestamp, ms (what SEARCH_OFFSET_BY_TIMESTAMP compares).
    pub store_timestamp: i64,
    /// How often the message was sent back for reconsumption.
    pub reconsume_times: i32,
    /// Payload.
    pub body: Bytes,
    /// All properties, system ones included.
    pub properties: BTreeMap<String, String>,
    /// `offsetMsgId`: store host and commit-log offset, hex.
    pub offset_msg_id: String,
}

impl StoredMessage {
    /// The client-visible id: UNIQ_KEY if the producer set one, else the offset id.
    pub fn msg_id(&self) -> &str {
        self.properties
            .get(properties::UNIQ_KEY)
            .map(String::as_str)
            .unwrap_or(&self.offset_msg_id)
    }

    /// The message's tag, if any.
    pub fn tag(&self) -> Option<&str> {
        self.properties.get(properties::TAGS).map(String::as_str)
    }
}

/// Why a record of a pull response cannot be read. Permanent: the broker sends the same bytes
/// on every pull of that offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordError {
    /// The record's queue offset, when its header could be read.
    pub queue_offset: Option<i64>,
    /// What is wrong with it.
    pub detail: String,
}

impl std::fmt::Display for RecordError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.detail)
    }
}

type Decoded<T> = std::result::Result<T, RecordError>;

fn bad(queue_offset: Option<i64>, detail: impl Into<String>) -> RecordError {
    RecordError {
        queue_offset,
        detail: detail.into(),
    }
}

fn need(buf: &Bytes, n: usize, at: Option<i64>) -> Decoded<()> {
    if buf.remaining() < n {
        return Err(bad(at, "stored message truncated"));
    }
    Ok(())
}

fn len(v: i64, at: Option<i64>) -> Decoded<usize> {
    usize::try_from(v).map_err(|_| bad(at, format!("negative length {v}")))
}

/// Decodes every record of a pull response body, checking each body's CRC and decompressing
/// compressed bodies (see [`compression`]) up to `max_body` bytes each.
pub fn decode_all(body: Bytes, max_body: usize) -> Decoded<Vec<StoredMessage>> {
    match decode_prefix(body, max_body) {
        (messages, None) => Ok(messages),
        (_, Some(error)) => Err(error),
    }
}

/// Like [`decode_all`], but keeps the records before the first one that cannot be decoded:
/// those records, and why the next one cannot be read (if one cannot).
pub fn decode_prefix(
    mut body: Bytes,
    max_body: usize,
) -> (Vec<StoredMessage>, Option<RecordError>) {
    let mut out: Vec<StoredMessage> = Vec::new();
    while body.has_remaining() {
        // A record too short to name its offset is blamed on the offset after the last good one.
        let after = out.last().map(|m| m.queue_offset + 1);
        match next_record(&mut body, max_body, after) {
            Ok(message) => out.push(message),
            Err(error) => return (out, Some(error)),
        }
    }
    (out, None)
}

fn next_record(body: &mut Bytes, max_body: usize, after: Option<i64>) -> Decoded<StoredMessage> {
    need(body, 4, after)?;
    let total = len(
        i64::from(i32::from_be_bytes([body[0], body[1], body[2], body[3]])),
        after,
    )?;
    if total < 4 {
        return Err(bad(after, format!("record size {total}")));
    }
    need(body, total, after)?;
    decode_one(body.split_to(total), max_body, after)
}

fn decode_one(mut r: Bytes, max_body: usize, after: Option<i64>) -> Decoded<StoredMessage> {
    need(&r, 48, after)?;
    let _total = r.get_i32();
    let magic = r.get_i32();
    if magic != MAGIC_V1 && magic != MAGIC_V2 {
        return Err(bad(after, format!("stored message magic {magic:#x}")));
    }
    let crc = r.get_i32();
    let queue_id = r.get_i32();
    let flag = r.get_i32();
    let queue_offset = r.get_i64();
    let at = Some(queue_offset);
    let commit_log_offset = r.get_i64();
    let sysflag = r.get_i32();
    let born_timestamp = r.get_i64();
    let born_len = if sysflag & FLAG_BORNHOST_V6 != 0 {
        16
    } else {
        4
    };
    need(&r, born_len + 4 + 8, at)?;
    r.advance(born_len + 4);
    let store_timestamp = r.get_i64();
    let store_len = if sysflag & FLAG_STOREHOST_V6 != 0 {
        16
    } else {
        4
    };
    need(&r, store_len + 4 + 16, at)?;
    let store_host = r.split_to(store_len + 4);
    let reconsume_times = r.get_i32();
    let _prepared = r.get_i64();
    let body_len = len(i64::from(r.get_i32()), at)?;
    need(&r, body_len, at)?;
    let body = r.split_to(body_len);
    if (crc32fast::hash(&body) & 0x7FFF_FFFF) as i32 != crc {
        return Err(bad(at, "body CRC mismatch"));
    }
    let body =
        compression::decompress(sysflag, body, max_body).map_err(|e| bad(at, e.to_string()))?;
    let topic_len = if magic == MAGIC_V2 {
        need(&r, 2, at)?;
        len(i64::from(r.get_i16()), at)?
    } else {
        need(&r, 1, at)?;
        usize::from(r.get_u8())
    };
    need(&r, topic_len + 2, at)?;
    let topic = utf8(r.split_to(topic_len), "topic", at)?;
    let props_len = len(i64::from(r.get_i16()), at)?;
    need(&r, props_len, at)?;
    let props = properties::decode(&utf8(r.split_to(props_len), "properties", at)?);
    let mut id = String::with_capacity(2 * (store_len + 12));
    for b in store_host
        .iter()
        .chain(commit_log_offset.to_be_bytes().iter())
    {
        id.push_str(&format!("{b:02X}"));
    }
    Ok(StoredMessage {
        topic,
        queue_id,
        queue_offset,
        commit_log_offset,
        flag,
        born_timestamp,
        store_timestamp,
        reconsume_times,
        body,
        properties: props,
        offset_msg_id: id,
    })
}

fn utf8(b: Bytes, what: &str, at: Option<i64>) -> Decoded<String> {
    String::from_utf8(b.to_vec()).map_err(|_| bad(at, format!("{what} is not UTF-8")))
}

/// Encodes messages for SEND_BATCH_MESSAGE: per message size, magic 0, CRC 0 (the broker
/// computes both), flag, body and properties.
pub fn encode_batch(messages: &[(Bytes, String)]) -> Result<Bytes> {
    let mut out = BytesMut::new();
    for (body, props) in messages {
        let plen = i16::try_from(props.len())
            .map_err(|_| Error::InvalidArgument("properties longer than 32 KiB".into()))?;
        let size = 4 + 4 + 4 + 4 + 4 + body.len() + 2 + props.len();
        let size = i32::try_from(size)
            .map_err(|_| Error::InvalidArgument("message larger than 2 GiB".into()))?;
        out.put_i32(size);
        out.put_i32(0);
        out.put_i32(0);
        out.put_i32(0);
        out.put_i32(body.len() as i32);
        out.put_slice(body);
        out.put_i16(plen);
        out.put_slice(props.as_bytes());
    }
    Ok(out.freeze())
}

#[cfg(test)]
#[path = "stored_tests.rs"]
mod tests;
