//! `ReceivedInsert`: an insert as a consumer received it, checked and kept as its payload until
//! someone reads its body.
//!
//! Why: inserts are most of what a data channel carries, and what a stream does with them
//! (ordering, aligning, de-duplicating, resuming) needs only their head: kind, id, row
//! timestamps, first row id. A decoded [`InsertRequest`] is about 500 bytes, written by the
//! pump, moved into its pack and dropped by the application, most of which never reads every
//! field; this is a fifth of that. Nothing is given up: the pump checks the payload with the
//! same walk the decoder takes ([`check_insert`]), so a payload that would not decode still
//! stops the stream in its place, and one that was checked decodes, on first access, to the
//! request the pump would have built.

use std::sync::OnceLock;

use bytes::Bytes;

use super::proto::{check_insert, decode_insert_into, InsertHead, InsertRequest, MsgBase, MsgType};
use super::tsmsg::{CustomMsg, MsgBody};

/// A checked insert payload, its head, and its body once decoded.
#[derive(Clone)]
pub(crate) struct ReceivedInsert {
    head: InsertHead,
    payload: Bytes,
    body: OnceLock<Box<MsgBody>>,
}

impl ReceivedInsert {
    /// Checks `payload`: `Err` gives it back when it is not an insert the built-in decoder
    /// takes (the caller decodes it in full, and reports what fails).
    #[inline]
    pub(crate) fn check(payload: Bytes) -> Result<Self, Bytes> {
        match check_insert(&payload) {
            Some(head) if head.msg_type == MsgType::Insert as i32 => Ok(ReceivedInsert {
                head,
                payload,
                body: OnceLock::new(),
            }),
            _ => Err(payload),
        }
    }

    /// Kind, id, timestamps and first row, read when the payload was checked.
    #[inline]
    pub(crate) fn head(&self) -> &InsertHead {
        &self.head
    }

    /// The payload as received.
    pub(crate) fn payload(&self) -> &Bytes {
        &self.payload
    }

    /// The body, decoded on the first call.
    pub(crate) fn body(&self) -> &MsgBody {
        self.body.get_or_init(|| self.decode())
    }

    /// Whether the body was decoded.
    #[cfg(test)]
    pub(crate) fn is_decoded(&self) -> bool {
        self.body.get().is_some()
    }

    /// The body, decoded if no one read it yet.
    pub(crate) fn into_body(self) -> MsgBody {
        match self.body.into_inner() {
            Some(body) => *body,
            None => *ReceivedInsert {
                body: OnceLock::new(),
                ..self
            }
            .decode(),
        }
    }

    /// The body the checked payload decodes to. The check and the decoder take one walk, so
    /// the decode succeeds; were they ever to disagree, the message still reaches its reader,
    /// whole and unchanged, as a kind the stream could not decode (never a panic or a loss).
    ///
    /// Decoded where it is kept, in its box: the request is not built aside and moved in.
    fn decode(&self) -> Box<MsgBody> {
        let mut body = Box::new(MsgBody::Insert(InsertRequest::default()));
        if let MsgBody::Insert(insert) = &mut *body {
            if let Some(last) = decode_insert_into(&self.payload, insert) {
                if let Some(last) = last {
                    last.fill(insert, self.payload.clone());
                }
                return body;
            }
        }
        Box::new(MsgBody::Unknown(CustomMsg {
            base: MsgBase::new(self.head.msg_type, self.head.msg_id, self.head.timestamp),
            payload: self.payload.clone(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use prost::Message as _;

    use super::*;
    use crate::msg::Blob;

    fn insert() -> InsertRequest {
        InsertRequest {
            base: Some(MsgBase::new(MsgType::Insert as i32, 7, 30)),
            shard_name: "ch".into(),
            timestamps: [20, 10].into(),
            row_ids: [5, 6].into(),
            row_data: [Blob {
                value: vec![1; 8].into(),
            }]
            .into(),
            num_rows: 2,
            ..Default::default()
        }
    }

    #[test]
    fn decodes_on_access_to_what_was_sent() {
        let received = ReceivedInsert::check(insert().encode_to_vec().into()).expect("insert");
        assert_eq!((received.head().begin_ts, received.head().end_ts), (10, 20));
        assert!(!received.is_decoded(), "nothing decoded yet");
        assert_eq!(received.body(), &MsgBody::Insert(insert()));
        assert_eq!(received.clone().into_body(), MsgBody::Insert(insert()));
    }

    /// What the design is for: a message a stream moves is small (the decoded insert alone
    /// was 376 bytes, the message 520).
    #[test]
    fn a_message_is_small_to_move() {
        assert!(std::mem::size_of::<crate::msg::TsMsg>() <= 256);
        assert!(std::mem::size_of::<ReceivedInsert>() <= 96);
    }

    #[test]
    fn other_kinds_and_garbage_are_given_back() {
        let delete_kind = InsertRequest {
            base: Some(MsgBase::new(MsgType::Delete as i32, 1, 1)),
            ..Default::default()
        }
        .encode_to_vec();
        for payload in [delete_kind, vec![0x0a, 0x05, 0x08], Vec::new()] {
            let payload = Bytes::from(payload);
            assert_eq!(ReceivedInsert::check(payload.clone()).err(), Some(payload));
        }
    }
}
