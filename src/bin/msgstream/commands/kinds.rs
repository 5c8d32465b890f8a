//! The message kinds a user can write with `produce` and read back with `consume`: how one
//! payload becomes an Insert, a Delete or a custom message, and how a consumed message is
//! described again (kind, keys, payload).
//!
//! Both directions live here so that what `produce` writes is exactly what `consume` shows.

use clap::ValueEnum;
use msgstream_facade::msgstream::msg::{
    Blob, CustomMsg, DeleteRequest, IdField, Ids, InsertRequest, MsgBase, MsgBody, MsgType, TsMsg,
};
use prost::Message as _;
use serde::Deserialize;

/// The `msg_type` of custom messages written by `produce`: outside Milvus's kinds, so a Milvus
/// reader treats them as unknown instead of misreading them.
pub const CUSTOM_MSG_TYPE: i32 = 9000;

/// How many payload characters a human-readable line shows before cutting.
const PREVIEW_CHARS: usize = 40;

/// What a message written by `produce` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// One row whose data is the payload.
    Insert,
    /// Deletes the row whose primary key is the payload (an integer, else a string key).
    Delete,
    /// An application message: the header plus the payload as bytes at field 2.
    Custom,
}

/// A custom message on the wire: field 1 is the header every reader decodes first, field 2
/// the user's bytes.
#[derive(Clone, PartialEq, prost::Message)]
struct CustomPayload {
    #[prost(message, optional, tag = "1")]
    base: Option<MsgBase>,
    #[prost(bytes = "vec", tag = "2")]
    payload: Vec<u8>,
}

/// Builds the message `produce` writes for one input record; `Err` says what is wrong with the
/// payload (a delete key must be text).
pub fn build(kind: Kind, id: i64, ts: u64, key: u32, payload: Vec<u8>) -> Result<TsMsg, String> {
    let body = match kind {
        Kind::Insert => MsgBody::Insert(InsertRequest {
            base: Some(MsgBase::new(MsgType::Insert as i32, id, ts)),
            timestamps: [ts].into(),
            row_ids: [id].into(),
            row_data: [Blob {
                value: payload.into(),
            }]
            .into(),
            num_rows: 1,
            ..Default::default()
        }),
        Kind::Delete => {
            let text = String::from_utf8(payload).map_err(|_| {
                "a delete's payload is its primary key and must be text".to_string()
            })?;
            let keys = match text.parse::<i64>() {
                Ok(pk) => Ids::ints(vec![pk]),
                Err(_) => Ids::strings(vec![text]),
            };
            MsgBody::Delete(DeleteRequest {
                base: Some(MsgBase::new(MsgType::Delete as i32, id, ts)),
                timestamps: vec![ts],
                primary_keys: Some(keys),
                num_rows: 1,
                ..Default::default()
            })
        }
        Kind::Custom => {
            let message = CustomPayload {
                base: Some(MsgBase::new(CUSTOM_MSG_TYPE, id, ts)),
                payload,
            };
            let custom = CustomMsg::from_payload(message.encode_to_vec())
                .map_err(|e| format!("cannot encode the custom message: {e}"))?;
            MsgBody::Custom(custom)
        }
    };
    Ok(TsMsg::new(body).with_hash_keys(vec![key]))
}

/// A consumed message as `consume` describes it.
pub struct Described {
    /// `insert`, `delete`, `timetick`, `custom`, or `type=N` for other kinds.
    pub kind: String,
    /// The payload: an insert's first row, a delete's key, a custom message's bytes (the whole
    /// encoding for kinds `produce` does not write).
    pub payload: Vec<u8>,
    /// The row keys: an insert's row ids, a delete's primary keys (routing hash keys are not
    /// carried on the wire, so a consumer cannot show them).
    pub keys: Vec<String>,
}

/// Describes `msg` for people and for JSON.
pub fn describe(msg: &TsMsg) -> Described {
    let keys = match msg.body() {
        MsgBody::Insert(m) => m.row_ids.iter().map(i64::to_string).collect(),
        MsgBody::Delete(m) => delete_keys(m),
        _ => Vec::new(),
    };
    let (kind, payload) = match msg.body() {
        MsgBody::Insert(m) => (
            "insert".to_string(),
            m.row_data
                .first()
                .map(|b| b.value.to_vec())
                .unwrap_or_default(),
        ),
        MsgBody::Delete(m) => (
            "delete".to_string(),
            delete_keys(m)
                .first()
                .cloned()
                .unwrap_or_default()
                .into_bytes(),
        ),
        MsgBody::TimeTick(_) => ("timetick".to_string(), Vec::new()),
        MsgBody::Custom(m) | MsgBody::Unknown(m) if m.base.msg_type == CUSTOM_MSG_TYPE => {
            let payload = CustomPayload::decode(m.payload.as_ref())
                .map(|c| c.payload)
                .unwrap_or_else(|_| m.payload.to_vec());
            ("custom".to_string(), payload)
        }
        other => (format!("type={}", msg.msg_type()), body_bytes(other, msg)),
    };
    Described {
        kind,
        payload,
        keys,
    }
}

fn delete_keys(m: &DeleteRequest) -> Vec<String> {
    match m
        .primary_keys
        .as_ref()
        .and_then(|ids| ids.id_field.as_ref())
    {
        Some(IdField::IntId(ids)) => ids.data.iter().map(i64::to_string).collect(),
        Some(IdField::StrId(ids)) => ids.data.clone(),
        None => m.int64_primary_keys.iter().map(i64::to_string).collect(),
    }
}

fn body_bytes(body: &MsgBody, msg: &TsMsg) -> Vec<u8> {
    match body {
        MsgBody::Custom(m) | MsgBody::Unknown(m) => m.payload.to_vec(),
        _ => msg.encode().to_vec(),
    }
}

/// The payload for a human: quoted text (cut after a few dozen characters), or a byte count and
/// the first bytes in hex when it is not UTF-8.
pub fn preview(payload: &[u8]) -> String {
    match std::str::from_utf8(payload) {
        Ok(text) => {
            let mut shown: String = text.chars().take(PREVIEW_CHARS).collect();
            if shown.len() < text.len() {
                shown.push('…');
            }
            format!("{shown:?}")
        }
        Err(_) => {
            let hex: String = payload
                .iter()
                .take(16)
                .map(|b| format!("{b:02x}"))
                .collect();
            let more = if payload.len() > 16 { "…" } else { "" };
            format!("<{} bytes: {hex}{more}>", payload.len())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use msgstream_facade::msgstream::msg::DecoderRegistry;

    fn round_trip(kind: Kind, payload: &[u8]) -> Described {
        let msg = build(kind, 7, 42, 3, payload.to_vec()).expect("build");
        assert_eq!((msg.end_ts(), msg.hash_keys.clone()), (42, vec![3]));
        let body = DecoderRegistry::default()
            .decode(&msg.encode())
            .expect("decode");
        describe(&TsMsg::new(body))
    }

    #[test]
    fn what_produce_writes_consume_shows_again() {
        let insert = round_trip(Kind::Insert, b"hello");
        assert_eq!(
            (insert.kind.as_str(), insert.payload.as_slice()),
            ("insert", &b"hello"[..])
        );
        let delete = round_trip(Kind::Delete, b"12");
        assert_eq!(
            (delete.kind.as_str(), delete.payload.as_slice()),
            ("delete", &b"12"[..])
        );
        let delete = round_trip(Kind::Delete, b"user-1");
        assert_eq!(delete.payload, b"user-1");
        let custom = round_trip(Kind::Custom, &[0, 159, 146]);
        assert_eq!(
            (custom.kind.as_str(), custom.payload.as_slice()),
            ("custom", &[0, 159, 146][..])
        );
        assert!(build(Kind::Delete, 1, 1, 1, vec![0xff]).is_err());
    }

    #[test]
    fn previews_cut_long_text_and_show_bytes_as_hex() {
        assert_eq!(preview(b"hi"), "\"hi\"");
        assert_eq!(preview(&[b'a'; 50]), format!("\"{}…\"", "a".repeat(40)));
        assert_eq!(preview(&[0xff, 0]), "<2 bytes: ff00>");
    }
}
