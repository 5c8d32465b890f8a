//! The remoting frame codec: pure functions from [`Command`] to bytes and back, no I/O.
//!
//! A frame is `total_len: i32 | ser_type: u8, header_len: u24 | header | body`, big-endian, where
//! `total_len` counts everything after itself. Headers come in two forms: JSON (`ser_type` 0)
//! and the binary "ROCKETMQ" form (`ser_type` 1). We send JSON, because the rocketmq-rust server
//! always answers in JSON and requires the exact Java field set (`serializeTypeCurrentRPC`, all
//! extFields as strings); we decode both, because a Java server may be configured for binary.

use std::collections::HashMap;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Flag bit: this command is a response.
pub const FLAG_RESPONSE: i32 = 0x1;
/// Flag bit: the sender expects no response.
pub const FLAG_ONEWAY: i32 = 0x2;
/// Client version announced (V5_3_3); servers gate features such as standard-JSON routes on it.
pub const VERSION: i32 = 479;
/// The default frame-size limit, as on the servers (16 MiB).
pub const MAX_FRAME: usize = 16 * 1024 * 1024;

const SER_JSON: u8 = 0;
const SER_ROCKETMQ: u8 = 1;

/// One remoting command: a request, a response, or a oneway request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Command {
    /// Request code, or response code for responses.
    pub code: i32,
    /// Request id; a response echoes its request's.
    pub opaque: i32,
    /// [`FLAG_RESPONSE`] / [`FLAG_ONEWAY`] bits.
    pub flag: i32,
    /// Error text of responses.
    pub remark: Option<String>,
    /// The custom header: every field as a string.
    pub ext: HashMap<String, String>,
    /// Opaque body.
    pub body: Bytes,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonHeaderOut<'a> {
    code: i32,
    language: &'static str,
    version: i32,
    opaque: i32,
    flag: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    remark: Option<&'a str>,
    ext_fields: &'a HashMap<String, String>,
    #[serde(rename = "serializeTypeCurrentRPC")]
    serialize_type: &'static str,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct JsonHeaderIn {
    code: i32,
    #[serde(default)]
    opaque: i32,
    #[serde(default)]
    flag: i32,
    #[serde(default)]
    remark: Option<String>,
    #[serde(default)]
    ext_fields: Option<HashMap<String, serde_json::Value>>,
}

impl Command {
    /// A request with the given code and header fields.
    pub fn request(code: i32, ext: impl IntoIterator<Item = (&'static str, String)>) -> Self {
        Command {
            code,
            ext: ext.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
            ..Command::default()
        }
    }

    /// The same command with `body`.
    pub fn with_body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = body.into();
        self
    }

    /// A response to the request with `opaque`.
    pub fn response(code: i32, opaque: i32, remark: impl Into<String>) -> Self {
        Command {
            code,
            opaque,
            flag: FLAG_RESPONSE,
            remark: Some(remark.into()),
            ..Command::default()
        }
    }

    /// Whether this is a response (else a request from the peer).
    pub fn is_response(&self) -> bool {
        self.flag & FLAG_RESPONSE != 0
    }

    /// Whether the sender expects no answer.
    pub fn is_oneway(&self) -> bool {
        self.flag & FLAG_ONEWAY != 0
    }

    /// A header field, if present.
    pub fn field(&self, key: &str) -> Option<&str> {
        self.ext.get(key).map(String::as_str)
    }

    /// A numeric header field; missing or malformed is a protocol error naming the field.
    pub fn num<T: std::str::FromStr>(&self, key: &str) -> Result<T> {
        let raw = self
            .field(key)
            .ok_or_else(|| Error::Protocol(format!("response {} lacks field {key}", self.code)))?;
        raw.parse()
            .map_err(|_| Error::Protocol(format!("field {key} is not a number: {raw:?}")))
    }

    /// Appends the whole frame (with JSON header) to `out`.
    pub fn encode(&self, out: &mut BytesMut) -> Result<()> {
        let header = serde_json::to_vec(&JsonHeaderOut {
            code: self.code,
            language: "RUST",
            version: VERSION,
            opaque: self.opaque,
            flag: self.flag,
            remark: self.remark.as_deref(),
            ext_fields: &self.ext,
            serialize_type: "JSON",
        })
        .map_err(|e| Error::Protocol(format!("encoding a header: {e}")))?;
        self.put_frame(SER_JSON, &header, out)
    }

    /// Appends the whole frame with a binary ("ROCKETMQ") header to `out`.
    pub fn encode_binary(&self, out: &mut BytesMut) -> Result<()> {
        let mut h = BytesMut::new();
        h.put_i16(self.code_i16()?);
        h.put_u8(12); // RUST
        h.put_i16(VERSION as i16);
        h.put_i32(self.opaque);
        h.put_i32(self.flag);
        let remark = self.remark.as_deref().unwrap_or("").as_bytes();
        h.put_i32(len_i32(remark.len())?);
        h.put_slice(remark);
        let mut ext = BytesMut::new();
        for (k, v) in &self.ext {
            let klen = i16::try_from(k.len())
                .map_err(|_| Error::InvalidArgument(format!("header key {k:?} too long")))?;
            ext.put_i16(klen);
            ext.put_slice(k.as_bytes());
            ext.put_i32(len_i32(v.len())?);
            ext.put_slice(v.as_bytes());
        }
        h.put_i32(len_i32(ext.len())?);
        h.put_slice(&ext);
        self.put_frame(SER_ROCKETMQ, &h, out)
    }

    fn code_i16(&self) -> Result<i16> {
        i16::try_from(self.code)
            .map_err(|_| Error::InvalidArgument(format!("code {} does not fit i16", self.code)))
    }

    fn put_frame(&self, ser: u8, header: &[u8], out: &mut BytesMut) -> Result<()> {
        if header.len() > 0xFF_FFFF {
            return Err(Error::InvalidArgument("header longer than 16 MiB".into()));
        }
        let total = 4 + header.len() + self.body.len();
        out.reserve(4 + total);
        out.put_i32(len_i32(total)?);
        out.put_u32((u32::from(ser) << 24) | header.len() as u32);
        out.put_slice(header);
        out.put_slice(&self.body);
        Ok(())
    }

    /// Decodes one frame without its leading length word (`frame` = everything it counted).
    pub fn decode(mut frame: Bytes) -> Result<Command> {
        if frame.len() < 4 {
            return Err(Error::Protocol(format!("frame of {} bytes", frame.len())));
        }
        let word = frame.get_u32();
        let (ser, hlen) = ((word >> 24) as u8, (word & 0xFF_FFFF) as usize);
        if hlen > frame.len() {
            return Err(Error::Protocol(format!(
                "header length {hlen} exceeds the {} bytes of the frame",
                frame.len()
            )));
        }
        let header = frame.split_to(hlen);
        let mut command = match ser {
            SER_JSON => decode_json(&header)?,
            SER_ROCKETMQ => decode_binary(header)?,
            other => return Err(Error::Protocol(format!("serialize type {other}"))),
        };
        command.body = frame;
        Ok(command)
    }
}

/// Splits one whole frame off the front of `buf`, if it holds one. Checks the announced length
/// against `limit` before anything is allocated for it.
pub fn split_frame(buf: &mut BytesMut, limit: usize) -> Result<Option<Bytes>> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let len = frame_len(&buf[..4], limit)?;
    if buf.len() < 4 + len {
        buf.reserve(4 + len - buf.len());
        return Ok(None);
    }
    buf.advance(4);
    Ok(Some(buf.split_to(len).freeze()))
}

/// The length announced by a frame's first four bytes, checked against `limit`.
pub fn frame_len(word: &[u8], limit: usize) -> Result<usize> {
    let raw = i32::from_be_bytes([word[0], word[1], word[2], word[3]]);
    let len = usize::try_from(raw)
        .map_err(|_| Error::Protocol(format!("negative frame length {raw}")))?;
    if len > limit {
        return Err(Error::FrameTooLarge { len, limit });
    }
    if len < 4 {
        return Err(Error::Protocol(format!("frame length {len} below 4")));
    }
    Ok(len)
}

fn len_i32(len: usize) -> Result<i32> {
    i32::try_from(len).map_err(|_| Error::InvalidArgument(format!("{len} bytes is too long")))
}

fn decode_json(header: &[u8]) -> Result<Command> {
    let h: JsonHeaderIn =
        serde_json::from_slice(header).map_err(|e| Error::Protocol(format!("JSON header: {e}")))?;
    let ext = h
        .ext_fields
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| match v {
            serde_json::Value::String(s) => (k, s),
            other => (k, other.to_string()),
        })
        .collect();
    Ok(Command {
        code: h.code,
        opaque: h.opaque,
        flag: h.flag,
        remark: h.remark,
        ext,
        body: Bytes::new(),
    })
}

fn need(buf: &Bytes, n: usize, what: &str) -> Result<()> {
    if buf.remaining() < n {
        return Err(Error::Protocol(format!(
            "binary header truncated in {what}"
        )));
    }
    Ok(())
}

fn take_string(buf: &mut Bytes, len: usize, what: &str) -> Result<String> {
    need(buf, len, what)?;
    String::from_utf8(buf.split_to(len).to_vec())
        .map_err(|_| Error::Protocol(format!("{what} is not UTF-8")))
}

fn take_len(buf: &mut Bytes, what: &str) -> Result<usize> {
    need(buf, 4, what)?;
    usize::try_from(buf.get_i32()).map_err(|_| Error::Protocol(format!("negative {what} length")))
}

fn decode_binary(mut h: Bytes) -> Result<Command> {
    need(&h, 13, "fixed fields")?;
    let code = i32::from(h.get_i16());
    // Language (u8) and version (i16) are informational.
    h.advance(3);
    let opaque = h.get_i32();
    let flag = h.get_i32();
    let rlen = take_len(&mut h, "remark")?;
    let remark = take_string(&mut h, rlen, "remark")?;
    let elen = take_len(&mut h, "extFields")?;
    need(&h, elen, "extFields")?;
    let mut e = h.split_to(elen);
    let mut ext = HashMap::new();
    while e.has_remaining() {
        need(&e, 2, "ext key length")?;
        let klen = usize::try_from(e.get_i16())
            .map_err(|_| Error::Protocol("negative ext key length".into()))?;
        let key = take_string(&mut e, klen, "ext key")?;
        let vlen = take_len(&mut e, "ext value")?;
        ext.insert(key, take_string(&mut e, vlen, "ext value")?);
    }
    Ok(Command {
        code,
        opaque,
        flag,
        remark: (!remark.is_empty()).then_some(remark),
        ext,
        body: Bytes::new(),
    })
}

#[cfg(test)]
#[path = "codec_tests.rs"]
mod tests;
