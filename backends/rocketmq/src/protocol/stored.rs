//! Stored messages as a PULL_MESSAGE response carries them (`MessageDecoder` layout), and the
//! batch encoding SEND_BATCH_MESSAGE expects.

use std::collections::BTreeMap;

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::properties;
use crate::error::{Error, Result};

const MAGIC_V1: i32 = -626_843_481;
const MAGIC_V2: i32 = -626_843_477;
const FLAG_COMPRESSED: i32 = 0x1;
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

fn need(buf: &Bytes, n: usize) -> Result<()> {
    if buf.remaining() < n {
        return Err(Error::Protocol("stored message truncated".into()));
    }
    Ok(())
}

fn len(v: i64) -> Result<usize> {
    usize::try_from(v).map_err(|_| Error::Protocol(format!("negative length {v}")))
}

/// Decodes every record of a pull response body, checking each body's CRC.
pub fn decode_all(mut body: Bytes) -> Result<Vec<StoredMessage>> {
    let mut out = Vec::new();
    while body.has_remaining() {
        need(&body, 4)?;
        let total = len(i64::from(i32::from_be_bytes([
            body[0], body[1], body[2], body[3],
        ])))?;
        if total < 4 {
            return Err(Error::Protocol(format!("record size {total}")));
        }
        need(&body, total)?;
        out.push(decode_one(body.split_to(total))?);
    }
    Ok(out)
}

fn decode_one(mut r: Bytes) -> Result<StoredMessage> {
    need(&r, 48)?;
    let _total = r.get_i32();
    let magic = r.get_i32();
    if magic != MAGIC_V1 && magic != MAGIC_V2 {
        return Err(Error::Protocol(format!("stored message magic {magic:#x}")));
    }
    let crc = r.get_i32();
    let queue_id = r.get_i32();
    let flag = r.get_i32();
    let queue_offset = r.get_i64();
    let commit_log_offset = r.get_i64();
    let sysflag = r.get_i32();
    let born_timestamp = r.get_i64();
    let born_len = if sysflag & FLAG_BORNHOST_V6 != 0 {
        16
    } else {
        4
    };
    need(&r, born_len + 4 + 8)?;
    r.advance(born_len + 4);
    let store_timestamp = r.get_i64();
    let store_len = if sysflag & FLAG_STOREHOST_V6 != 0 {
        16
    } else {
        4
    };
    need(&r, store_len + 4 + 16)?;
    let store_host = r.split_to(store_len + 4);
    let reconsume_times = r.get_i32();
    let _prepared = r.get_i64();
    let body_len = len(i64::from(r.get_i32()))?;
    need(&r, body_len)?;
    let body = r.split_to(body_len);
    if (crc32fast::hash(&body) & 0x7FFF_FFFF) as i32 != crc {
        return Err(Error::Protocol(format!(
            "body CRC mismatch at queue offset {queue_offset}"
        )));
    }
    if sysflag & FLAG_COMPRESSED != 0 {
        return Err(Error::Protocol(format!(
            "message at queue offset {queue_offset} is compressed; compressed bodies are not supported"
        )));
    }
    let topic_len = if magic == MAGIC_V2 {
        need(&r, 2)?;
        len(i64::from(r.get_i16()))?
    } else {
        need(&r, 1)?;
        usize::from(r.get_u8())
    };
    need(&r, topic_len + 2)?;
    let topic = utf8(r.split_to(topic_len), "topic")?;
    let props_len = len(i64::from(r.get_i16()))?;
    need(&r, props_len)?;
    let props = properties::decode(&utf8(r.split_to(props_len), "properties")?);
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

fn utf8(b: Bytes, what: &str) -> Result<String> {
    String::from_utf8(b.to_vec()).map_err(|_| Error::Protocol(format!("{what} is not UTF-8")))
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
