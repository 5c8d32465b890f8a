//! A decoder of the common shape of [`InsertRequest`], beside prost's.
//!
//! Inserts are most of what a data channel carries, and prost's generic decode spends more on
//! one small insert than reading it from RocksDB does: a non-inlined varint reader per field
//! over `Bytes`, and repeated fields grown one element at a time (a 4-element first allocation,
//! 128 bytes for the row blobs, a size glibc does not keep in its fast bins, so that freeing it
//! on the application's thread and allocating the next on a consumer task both take the slow
//! path). This one reads varints from a slice, sizes every vector exactly, and slices bytes
//! fields out of the payload as prost does.
//!
//! It handles only a shape it is sure of, and says `None` for anything else, which prost then
//! decodes (or rejects) as always: each field at most once (repeated fields packed, once;
//! `row_data` and `fields_data` any number of times), wire types as declared, valid UTF-8,
//! a header without properties or replication details, no unknown fields. On what it accepts it
//! returns exactly what prost returns; a property test holds it to that.

use bytes::Bytes;

use super::common::{Blob, MsgBase};
use super::dml::InsertRequest;

/// Reads a varint off the front of `buf`; `None` when malformed or truncated (prost would
/// reject it, or decide on it, itself).
#[inline(always)]
fn varint(buf: &[u8], at: &mut usize) -> Option<u64> {
    // Keys, lengths and small values: one byte.
    let first = *buf.get(*at)?;
    if first < 0x80 {
        *at += 1;
        return Some(u64::from(first));
    }
    let mut value = 0u64;
    for shift in 0..10 {
        let byte = *buf.get(*at)?;
        *at += 1;
        value |= u64::from(byte & 0x7f) << (7 * shift);
        if byte < 0x80 {
            // The tenth byte may only carry the top bit (prost rejects more).
            if shift == 9 && byte > 1 {
                return None;
            }
            return Some(value);
        }
    }
    None
}

/// The range of a length-delimited field's bytes, after its length.
#[inline(always)]
fn delimited(buf: &[u8], at: &mut usize) -> Option<std::ops::Range<usize>> {
    let len = usize::try_from(varint(buf, at)?).ok()?;
    let start = *at;
    let end = start.checked_add(len)?;
    if end > buf.len() {
        return None;
    }
    *at = end;
    Some(start..end)
}

/// A packed repeated varint field, exactly sized.
fn packed<T>(
    buf: &[u8],
    range: std::ops::Range<usize>,
    convert: impl Fn(u64) -> T,
) -> Option<Vec<T>> {
    let bytes = buf.get(range)?;
    let count = bytes.iter().filter(|b| **b < 0x80).count();
    let mut values = Vec::with_capacity(count);
    let mut at = 0;
    while at < bytes.len() {
        values.push(convert(varint(bytes, &mut at)?));
    }
    Some(values)
}

fn string(buf: &[u8], range: std::ops::Range<usize>) -> Option<String> {
    std::str::from_utf8(buf.get(range)?)
        .ok()
        .map(str::to_string)
}

/// Marks field `tag` seen; `None` if it was already (a repeat is left to prost).
#[inline(always)]
fn first_time(seen: &mut u32, tag: u64) -> Option<()> {
    let bit = 1u32 << tag;
    if *seen & bit != 0 {
        return None;
    }
    *seen |= bit;
    Some(())
}

fn header(buf: &[u8], range: std::ops::Range<usize>) -> Option<MsgBase> {
    let bytes = buf.get(range)?;
    let mut base = MsgBase::default();
    let (mut at, mut seen) = (0, 0u32);
    while at < bytes.len() {
        let key = varint(bytes, &mut at)?;
        let (tag, wire) = (key >> 3, key & 7);
        if wire != 0 || !(1..=5).contains(&tag) {
            return None;
        }
        first_time(&mut seen, tag)?;
        let value = varint(bytes, &mut at)?;
        match tag {
            1 => base.msg_type = value as i32,
            2 => base.msg_id = value as i64,
            3 => base.timestamp = value,
            4 => base.source_id = value as i64,
            _ => base.target_id = value as i64,
        }
    }
    Some(base)
}

/// A row blob: nothing, or field 1 once.
fn blob(payload: &Bytes, range: std::ops::Range<usize>) -> Option<Blob> {
    let bytes = payload.get(range.clone())?;
    if bytes.is_empty() {
        return Some(Blob::default());
    }
    let mut at = 0;
    if varint(bytes, &mut at)? != (1 << 3 | 2) {
        return None;
    }
    let value = delimited(bytes, &mut at)?;
    if at != bytes.len() {
        return None;
    }
    Some(Blob {
        value: payload.slice(range.start + value.start..range.start + value.end),
    })
}

/// Decodes `payload` as prost would, if it has the shape described in the module docs.
#[inline]
pub(crate) fn decode_insert(payload: &Bytes) -> Option<InsertRequest> {
    let buf: &[u8] = payload;
    let mut insert = InsertRequest::default();
    let (mut at, mut seen) = (0, 0u32);
    while at < buf.len() {
        let key = varint(buf, &mut at)?;
        let (tag, wire) = (key >> 3, key & 7);
        match (tag, wire) {
            (1..=5 | 10 | 11 | 16, 2) => {
                first_time(&mut seen, tag)?;
                let range = delimited(buf, &mut at)?;
                match tag {
                    1 => insert.base = Some(header(buf, range)?),
                    2 => insert.shard_name = string(buf, range)?,
                    3 => insert.db_name = string(buf, range)?,
                    4 => insert.collection_name = string(buf, range)?,
                    5 => insert.partition_name = string(buf, range)?,
                    10 => insert.timestamps = packed(buf, range, |v| v)?,
                    11 => insert.row_ids = packed(buf, range, |v| v as i64)?,
                    _ => insert.namespace = Some(string(buf, range)?),
                }
            }
            (12, 2) => {
                let range = delimited(buf, &mut at)?;
                if insert.row_data.capacity() == 0 {
                    insert.row_data.reserve_exact(1);
                }
                insert.row_data.push(blob(payload, range)?);
            }
            (13, 2) => {
                let range = delimited(buf, &mut at)?;
                insert.fields_data.push(payload.slice(range));
            }
            (6..=9 | 14 | 15, 0) => {
                first_time(&mut seen, tag)?;
                let value = varint(buf, &mut at)?;
                match tag {
                    6 => insert.db_id = value as i64,
                    7 => insert.collection_id = value as i64,
                    8 => insert.partition_id = value as i64,
                    9 => insert.segment_id = value as i64,
                    14 => insert.num_rows = value,
                    _ => insert.version = value as i32,
                }
            }
            _ => return None,
        }
    }
    Some(insert)
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message as _;

    fn sample() -> InsertRequest {
        InsertRequest {
            base: Some(MsgBase::new(400, 7, 99)),
            shard_name: "s".into(),
            collection_name: "c".into(),
            db_id: 3,
            segment_id: -1,
            timestamps: vec![99, u64::MAX],
            row_ids: vec![1, -5],
            row_data: vec![
                Blob {
                    value: vec![7; 64].into(),
                },
                Blob::default(),
            ],
            fields_data: vec![vec![1, 2].into(), Bytes::new()],
            num_rows: 2,
            version: 1,
            namespace: Some(String::new()),
            ..Default::default()
        }
    }

    #[test]
    fn decodes_what_prost_decodes() {
        let encoded = Bytes::from(sample().encode_to_vec());
        assert_eq!(decode_insert(&encoded), Some(sample()));
        assert_eq!(decode_insert(&Bytes::new()), Some(InsertRequest::default()));
    }

    #[test]
    fn sizes_vectors_exactly_and_slices_the_payload() {
        let encoded = Bytes::from(sample().encode_to_vec());
        let insert = decode_insert(&encoded).expect("decodes");
        assert_eq!(insert.timestamps.capacity(), 2);
        assert_eq!(insert.row_ids.capacity(), 2);
        let row = &insert.row_data[0].value;
        let inside = encoded.as_ptr_range();
        assert!(inside.contains(&row.as_ptr()), "a slice of the payload");
    }

    #[test]
    fn leaves_unusual_shapes_to_prost() {
        let encoded = sample().encode_to_vec();
        // A repeated scalar field, an unknown field, a header with properties.
        let twice = [&encoded[..], &[0x30, 0x01][..]].concat();
        assert_eq!(decode_insert(&twice.into()), None);
        let unknown = [&encoded[..], &[0x98, 0x06, 0x01][..]].concat();
        assert_eq!(decode_insert(&unknown.into()), None);
        let mut base = MsgBase::new(400, 1, 1);
        base.properties.push(crate::msg::Property {
            key: "k".into(),
            value: "v".into(),
        });
        let with_properties = InsertRequest {
            base: Some(base),
            ..Default::default()
        };
        assert_eq!(decode_insert(&with_properties.encode_to_vec().into()), None);
    }

    proptest::proptest! {
        /// Whatever it accepts, prost decodes to the same value.
        #[test]
        fn agrees_with_prost(
            bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..96),
            flips in proptest::collection::vec((0usize..256, proptest::num::u8::ANY), 0..4),
        ) {
            let valid = sample().encode_to_vec();
            let mut changed = valid.clone();
            for (at, byte) in &flips {
                if let Some(slot) = changed.get_mut(at % valid.len()) {
                    *slot = *byte;
                }
            }
            for payload in [bytes, changed] {
                let payload = Bytes::from(payload);
                if let Some(fast) = decode_insert(&payload) {
                    let slow = InsertRequest::decode(payload.clone());
                    proptest::prop_assert_eq!(Ok::<_, String>(fast), slow.map_err(|e| e.to_string()));
                }
            }
        }
    }
}
