//! The spool's format, without I/O: the magic, and records framed as
//! `u32 len ‖ u32 crc32(body) ‖ body` (see the module docs of `spool`).

use bytes::{Buf, BufMut, Bytes, BytesMut};
use msgstream::{Error, Result};

use super::Spooled;

pub(super) const MAGIC: &[u8; 8] = b"MSNQSPL1";
pub(super) const HEADER: u64 = MAGIC.len() as u64;
const MESSAGE: u8 = 1;
const ACK: u8 = 2;
/// Record framing: length and checksum.
pub(super) const FRAME: usize = 8;
/// A message body's fixed part: kind, seq, nsq id, offset, raw size.
const MESSAGE_FIXED: usize = 1 + 8 + 16 + 8 + 4;

/// A decoded record body.
pub(super) enum Record {
    Message(Spooled),
    Ack(u64),
}

/// The record `body` holds; `None` for an unknown kind or a wrong length.
pub(super) fn decode(body: &[u8]) -> Option<Record> {
    let mut rest = body;
    match *rest.first()? {
        MESSAGE if rest.len() >= MESSAGE_FIXED => {
            rest.advance(1);
            let seq = rest.get_u64();
            let mut nsq_id = [0u8; 16];
            rest.copy_to_slice(&mut nsq_id);
            let offset = rest.get_u64();
            let raw_size = rest.get_u32();
            Some(Record::Message(Spooled {
                seq,
                nsq_id,
                position: (offset != u64::MAX).then_some((offset, raw_size)),
                body: Bytes::copy_from_slice(rest),
            }))
        }
        ACK if rest.len() == 9 => {
            rest.advance(1);
            Some(Record::Ack(rest.get_u64()))
        }
        _ => None,
    }
}

/// The framed record of message `seq`.
pub(super) fn framed_message(
    seq: u64,
    nsq_id: &[u8; 16],
    position: Option<(u64, u32)>,
    body: &[u8],
) -> Result<BytesMut> {
    let (offset, raw_size) = position.unwrap_or((u64::MAX, 0));
    let mut record = BytesMut::with_capacity(FRAME + MESSAGE_FIXED + body.len());
    record.put_slice(&[0; FRAME]);
    record.put_u8(MESSAGE);
    record.put_u64(seq);
    record.put_slice(nsq_id);
    record.put_u64(offset);
    record.put_u32(raw_size);
    record.put_slice(body);
    let body_len = record.len() - FRAME;
    let crc = crc32fast::hash(&record[FRAME..]);
    let len = u32::try_from(body_len).map_err(|_| {
        Error::InvalidArgument(format!("a {body_len}-byte message is too large to spool"))
    })?;
    record[..4].copy_from_slice(&len.to_be_bytes());
    record[4..FRAME].copy_from_slice(&crc.to_be_bytes());
    Ok(record)
}

/// The framed ack records of `seqs`, in order.
pub(super) fn framed_acks(seqs: &[u64]) -> BytesMut {
    let mut records = BytesMut::with_capacity(seqs.len() * (FRAME + 9));
    for seq in seqs {
        let mut body = [0u8; 9];
        body[0] = ACK;
        body[1..].copy_from_slice(&seq.to_be_bytes());
        records.put_u32(9);
        records.put_u32(crc32fast::hash(&body));
        records.put_slice(&body);
    }
    records
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_record_decodes_to_what_was_framed() {
        let id = *b"0123456789 \nabcd";
        for position in [Some((7, 42)), None] {
            let record = framed_message(3, &id, position, b"body").expect("framed");
            let (len, crc) = (&record[..4], &record[4..FRAME]);
            assert_eq!(len, &((record.len() - FRAME) as u32).to_be_bytes());
            assert_eq!(crc, &crc32fast::hash(&record[FRAME..]).to_be_bytes());
            match decode(&record[FRAME..]) {
                Some(Record::Message(m)) => assert_eq!(
                    m,
                    Spooled {
                        seq: 3,
                        nsq_id: id,
                        position,
                        body: Bytes::from_static(b"body"),
                    }
                ),
                _ => panic!("not a message record"),
            }
        }
    }

    #[test]
    fn ack_records_decode_in_order_and_unknown_kinds_are_refused() {
        let records = framed_acks(&[5, 9]);
        let acks: Vec<u64> = records
            .chunks(FRAME + 9)
            .map(|r| match decode(&r[FRAME..]) {
                Some(Record::Ack(seq)) => seq,
                _ => panic!("not an ack record"),
            })
            .collect();
        assert_eq!(acks, [5, 9]);
        assert!(decode(&[9, 0, 0]).is_none());
        assert!(decode(&[ACK, 0]).is_none(), "an ack of the wrong length");
        assert!(decode(&[]).is_none());
    }
}
