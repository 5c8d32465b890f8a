//! A decoder of the common shape of [`InsertRequest`], beside prost's.
//!
//! Inserts are most of what a data channel carries, and prost's generic decode spends more on
//! one small insert than reading it from RocksDB does: a non-inlined varint reader per field
//! over `Bytes`, and repeated fields grown one element at a time (a 4-element first allocation,
//! 128 bytes for the row blobs, a size glibc does not keep in its fast bins, so that freeing it
//! on the application's thread and allocating the next on a consumer task both take the slow
//! path). This one reads varints from a slice, sizes every vector exactly (a single row stays
//! inline in its [`RowVec`], so a one-row insert allocates nothing), decodes into a request
//! the caller holds ([`decode_insert_into`]), and slices bytes fields out of the payload as
//! prost does.
//!
//! It handles only a shape it is sure of, and says `None` for anything else, which prost then
//! decodes (or rejects) as always: each field at most once (repeated fields packed, once;
//! `row_data` and `fields_data` any number of times), wire types as declared, valid UTF-8,
//! a header without properties or replication details, no unknown fields. On what it accepts it
//! returns exactly what prost returns; a property test holds it to that.

use bytes::Bytes;

use super::common::{Blob, MsgBase};
use super::insert::InsertRequest;
use crate::msg::RowVec;

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
    // Ten bytes ahead (the longest varint): read from a fixed-size array, unrolled, with no
    // bounds check per byte. Headers' ids and timestamps and the row fields are 2–9 bytes.
    if let Some(chunk) = buf.get(*at..).and_then(<[u8]>::first_chunk::<10>) {
        let mut value = u64::from(first & 0x7f);
        for (i, &byte) in chunk.iter().enumerate().skip(1) {
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte < 0x80 {
                if i == 9 && byte > 1 {
                    return None;
                }
                *at += i + 1;
                return Some(value);
            }
        }
        return None;
    }
    varint_near_end(buf, at)
}

/// [`varint`] inside a field that ends at `end` (within `buf`): read from the whole buffer, so
/// that the ten-bytes-ahead path serves short fields too (a header, a one-row column), and
/// `None` if it runs past the field, as a read of the field's bytes alone would be.
#[inline(always)]
fn varint_within(buf: &[u8], at: &mut usize, end: usize) -> Option<u64> {
    let value = varint(buf, at)?;
    (*at <= end).then_some(value)
}

/// [`varint`] within ten bytes of the end of `buf`, a byte at a time.
fn varint_near_end(buf: &[u8], at: &mut usize) -> Option<u64> {
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

/// A packed repeated varint field into `out` (an empty one), exactly sized: a single value
/// (one row) inline. Written in place, as [`header_into`] is: returned by value, the vector
/// was stored word by word and reloaded as one 16-byte move, which stalled on store
/// forwarding (the two hottest instructions of the insert decode under `perf`).
fn packed_into<T>(
    buf: &[u8],
    range: std::ops::Range<usize>,
    convert: impl Fn(u64) -> T,
    out: &mut RowVec<T>,
) -> Option<()> {
    buf.get(range.clone())?;
    let (mut at, end) = (range.start, range.end);
    if at == end {
        return Some(());
    }
    // One row, the usual insert: one varint filling the field, kept inline, and no count.
    let first = varint_within(buf, &mut at, end)?;
    if at == end {
        out.push(convert(first));
        return Some(());
    }
    let rest = buf.get(at..end)?;
    *out = RowVec::with_capacity(1 + rest.iter().filter(|b| **b < 0x80).count());
    out.push(convert(first));
    while at < end {
        out.push(convert(varint_within(buf, &mut at, end)?));
    }
    Some(())
}

/// Every value of a packed repeated varint field, for [`check_insert`]: accepts exactly what
/// [`packed_into`] accepts (the same reads, in the same order).
#[inline(always)]
fn packed_each(buf: &[u8], range: std::ops::Range<usize>, mut each: impl FnMut(u64)) -> Option<()> {
    buf.get(range.clone())?;
    let (mut at, end) = (range.start, range.end);
    while at < end {
        each(varint_within(buf, &mut at, end)?);
    }
    Some(())
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

/// Decodes a header into `base` (a default one), in place: returned by value, the 100-byte
/// header was written field by field and read back whole, a store-forwarding stall that
/// took a sixth of the whole decode's time.
fn header_into(buf: &[u8], range: std::ops::Range<usize>, base: &mut MsgBase) -> Option<()> {
    buf.get(range.clone())?;
    let (mut at, end, mut seen) = (range.start, range.end, 0u32);
    while at < end {
        let key = varint_within(buf, &mut at, end)?;
        let (tag, wire) = (key >> 3, key & 7);
        if wire != 0 || !(1..=5).contains(&tag) {
            return None;
        }
        first_time(&mut seen, tag)?;
        let value = varint_within(buf, &mut at, end)?;
        match tag {
            1 => base.msg_type = value as i32,
            2 => base.msg_id = value as i64,
            3 => base.timestamp = value,
            4 => base.source_id = value as i64,
            _ => base.target_id = value as i64,
        }
    }
    Some(())
}

/// A row blob: nothing, or field 1 once. Returns where its value lies in `buf` (`None` for
/// an empty blob).
fn blob_value(buf: &[u8], range: std::ops::Range<usize>) -> Option<Option<std::ops::Range<usize>>> {
    let bytes = buf.get(range.clone())?;
    if bytes.is_empty() {
        return Some(None);
    }
    let mut at = 0;
    if varint(bytes, &mut at)? != (1 << 3 | 2) {
        return None;
    }
    let value = delimited(bytes, &mut at)?;
    if at != bytes.len() {
        return None;
    }
    Some(Some(range.start + value.start..range.start + value.end))
}

/// The last bytes field of an insert (a row blob or a column), left empty by
/// [`decode_insert_parts`] for the caller to fill.
///
/// A caller that owns the payload fills it with the payload itself, narrowed to the field:
/// for the usual one-row insert the message then keeps the payload's reference instead of
/// taking a second one and dropping the first, two atomic operations less per message on a
/// count that every message of the same read shares.
#[derive(Debug)]
pub(crate) struct LastBytes {
    field: BytesField,
    range: std::ops::Range<usize>,
}

#[derive(Debug, Clone, Copy)]
enum BytesField {
    Row(usize),
    Column(usize),
}

impl LastBytes {
    /// Fills the field with `payload` (the whole payload the insert was decoded from),
    /// narrowed to the field's bytes.
    pub(crate) fn fill(self, insert: &mut InsertRequest, mut payload: Bytes) {
        payload.truncate(self.range.end);
        bytes::Buf::advance(&mut payload, self.range.start);
        let slot = match self.field {
            BytesField::Row(index) => insert.row_data.get_mut(index).map(|row| &mut row.value),
            BytesField::Column(index) => insert.fields_data.get_mut(index),
        };
        if let Some(slot) = slot {
            *slot = payload;
        }
    }
}

/// Decodes `payload` as prost would, if it has the shape described in the module docs; every
/// bytes field a slice of `payload`.
pub(crate) fn decode_insert(payload: &Bytes) -> Option<InsertRequest> {
    let (mut insert, last) = decode_insert_parts(payload)?;
    if let Some(last) = last {
        last.fill(&mut insert, payload.clone());
    }
    Some(insert)
}

/// [`decode_insert`], with the last bytes field (if any) left empty and described by the
/// returned [`LastBytes`], for the caller to fill.
#[inline]
pub(crate) fn decode_insert_parts(payload: &Bytes) -> Option<(InsertRequest, Option<LastBytes>)> {
    let mut insert = InsertRequest::default();
    let last = decode_insert_into(payload, &mut insert)?;
    Some((insert, last))
}

/// [`decode_insert_parts`] into `insert`, which must be a default one, where the caller wants
/// the message to end up, so that the 400-byte request is not moved through the return values
/// of each layer. On `None` (a shape left to prost) `insert` holds whatever was decoded
/// before: the caller discards it.
#[inline]
pub(crate) fn decode_insert_into(
    payload: &Bytes,
    insert: &mut InsertRequest,
) -> Option<Option<LastBytes>> {
    let mut decoder = Decoder {
        insert,
        payload,
        last: None,
    };
    walk(payload, &mut decoder)?;
    Some(decoder.last)
}

/// What a consumer must know of an insert without decoding it: the header's kind, id and
/// timestamp, the row timestamps' range and the first row id (its de-duplication identity).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct InsertHead {
    /// The header's `msg_type`.
    pub(crate) msg_type: i32,
    /// The header's `msg_id`.
    pub(crate) msg_id: i64,
    /// The header's timestamp.
    pub(crate) timestamp: u64,
    /// Earliest row timestamp, the header's with no rows (as `MsgBody::begin_ts`).
    pub(crate) begin_ts: u64,
    /// Latest row timestamp, the header's with no rows (as `MsgBody::end_ts`).
    pub(crate) end_ts: u64,
    /// The first row id, 0 with none.
    pub(crate) first_row: i64,
}

/// Checks that [`decode_insert`] takes `payload`, and reads its [`InsertHead`], without
/// building the request: no vector, string or slice of the payload is made. One walk decides
/// for both (only what each field is handed to differs), so a payload checked here decodes
/// there, to a request with this head; `None` exactly where `decode_insert` says `None`, or
/// the payload has no header.
pub(crate) fn check_insert(payload: &[u8]) -> Option<InsertHead> {
    let mut checker = Checker::default();
    walk(payload, &mut checker)?;
    let base = checker.base?;
    let (begin_ts, end_ts) = checker.rows.unwrap_or((base.timestamp, base.timestamp));
    Some(InsertHead {
        msg_type: base.msg_type,
        msg_id: base.msg_id,
        timestamp: base.timestamp,
        begin_ts,
        end_ts,
        first_row: checker.first_row.unwrap_or_default(),
    })
}

/// What [`walk`] hands an insert's fields to, once each field's shape was checked.
trait InsertFields {
    /// The header (field 1), whose bytes lie at `range`.
    fn header(&mut self, buf: &[u8], range: std::ops::Range<usize>) -> Option<()>;
    /// A string field (2–5, or the namespace, 16), valid UTF-8.
    fn string(&mut self, tag: u64, value: &str);
    /// The packed timestamps (10) or row ids (11), at `range`.
    fn packed(&mut self, tag: u64, buf: &[u8], range: std::ops::Range<usize>) -> Option<()>;
    /// A row blob (12), its value's range (`None` for an empty blob).
    fn row(&mut self, value: Option<std::ops::Range<usize>>);
    /// A column (13), at `range`.
    fn column(&mut self, range: std::ops::Range<usize>);
    /// A varint scalar (6–9, 14, 15).
    fn scalar(&mut self, tag: u64, value: u64);
}

/// Reads the fields of an insert of the shape described in the module docs, handing each to
/// `fields`; `None` for any other shape.
#[inline(always)]
fn walk(buf: &[u8], fields: &mut impl InsertFields) -> Option<()> {
    let (mut at, mut seen) = (0, 0u32);
    while at < buf.len() {
        let key = varint(buf, &mut at)?;
        let (tag, wire) = (key >> 3, key & 7);
        match (tag, wire) {
            (1..=5 | 10 | 11 | 16, 2) => {
                first_time(&mut seen, tag)?;
                let range = delimited(buf, &mut at)?;
                match tag {
                    1 => fields.header(buf, range)?,
                    10 | 11 => fields.packed(tag, buf, range)?,
                    _ => fields.string(tag, std::str::from_utf8(buf.get(range)?).ok()?),
                }
            }
            (12, 2) => {
                let range = delimited(buf, &mut at)?;
                fields.row(blob_value(buf, range)?);
            }
            (13, 2) => {
                let range = delimited(buf, &mut at)?;
                fields.column(range);
            }
            (6..=9 | 14 | 15, 0) => {
                first_time(&mut seen, tag)?;
                let value = varint(buf, &mut at)?;
                fields.scalar(tag, value);
            }
            _ => return None,
        }
    }
    Some(())
}

/// Builds the request: every bytes field a slice of the payload but the last, left to the
/// caller (see [`LastBytes`]).
struct Decoder<'a> {
    insert: &'a mut InsertRequest,
    payload: &'a Bytes,
    last: Option<LastBytes>,
}

impl Decoder<'_> {
    /// A bytes field that turns out not to be the last is filled with a slice at once.
    #[inline(always)]
    fn bytes_field(&mut self, field: BytesField, range: std::ops::Range<usize>) {
        if let Some(previous) = self.last.replace(LastBytes { field, range }) {
            previous.fill(self.insert, self.payload.clone());
        }
    }
}

impl InsertFields for Decoder<'_> {
    #[inline(always)]
    fn header(&mut self, buf: &[u8], range: std::ops::Range<usize>) -> Option<()> {
        header_into(buf, range, self.insert.base.insert(MsgBase::default()))
    }

    #[inline(always)]
    fn string(&mut self, tag: u64, value: &str) {
        let value = value.to_string();
        match tag {
            2 => self.insert.shard_name = value,
            3 => self.insert.db_name = value,
            4 => self.insert.collection_name = value,
            5 => self.insert.partition_name = value,
            _ => self.insert.namespace = Some(value),
        }
    }

    #[inline(always)]
    fn packed(&mut self, tag: u64, buf: &[u8], range: std::ops::Range<usize>) -> Option<()> {
        match tag {
            10 => packed_into(buf, range, |v| v, &mut self.insert.timestamps),
            _ => packed_into(buf, range, |v| v as i64, &mut self.insert.row_ids),
        }
    }

    #[inline(always)]
    fn row(&mut self, value: Option<std::ops::Range<usize>>) {
        self.insert.row_data.push(Blob::default());
        if let Some(value) = value.filter(|value| !value.is_empty()) {
            let row = BytesField::Row(self.insert.row_data.len() - 1);
            self.bytes_field(row, value);
        }
    }

    #[inline(always)]
    fn column(&mut self, range: std::ops::Range<usize>) {
        self.insert.fields_data.push(Bytes::new());
        if !range.is_empty() {
            let column = BytesField::Column(self.insert.fields_data.len() - 1);
            self.bytes_field(column, range);
        }
    }

    #[inline(always)]
    fn scalar(&mut self, tag: u64, value: u64) {
        match tag {
            6 => self.insert.db_id = value as i64,
            7 => self.insert.collection_id = value as i64,
            8 => self.insert.partition_id = value as i64,
            9 => self.insert.segment_id = value as i64,
            14 => self.insert.num_rows = value,
            _ => self.insert.version = value as i32,
        }
    }
}

/// Notes the [`InsertHead`]'s parts and nothing else.
#[derive(Default)]
struct Checker {
    base: Option<MsgBase>,
    /// The lowest and highest row timestamp, `None` with no rows.
    rows: Option<(u64, u64)>,
    first_row: Option<i64>,
}

impl InsertFields for Checker {
    #[inline(always)]
    fn header(&mut self, buf: &[u8], range: std::ops::Range<usize>) -> Option<()> {
        header_into(buf, range, self.base.insert(MsgBase::default()))
    }

    #[inline(always)]
    fn string(&mut self, _tag: u64, _value: &str) {}

    #[inline(always)]
    fn packed(&mut self, tag: u64, buf: &[u8], range: std::ops::Range<usize>) -> Option<()> {
        let (rows, first_row) = (&mut self.rows, &mut self.first_row);
        packed_each(buf, range, |value| {
            if tag == 10 {
                let (low, high) = rows.get_or_insert((value, value));
                (*low, *high) = ((*low).min(value), (*high).max(value));
            } else {
                first_row.get_or_insert(value as i64);
            }
        })
    }

    #[inline(always)]
    fn row(&mut self, _value: Option<std::ops::Range<usize>>) {}

    #[inline(always)]
    fn column(&mut self, _range: std::ops::Range<usize>) {}

    #[inline(always)]
    fn scalar(&mut self, _tag: u64, _value: u64) {}
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
            timestamps: [99, u64::MAX].into(),
            row_ids: [1, -5].into(),
            row_data: [
                Blob {
                    value: vec![7; 64].into(),
                },
                Blob::default(),
            ]
            .into(),
            fields_data: vec![vec![1, 2].into(), Bytes::new()],
            num_rows: 2,
            version: 1,
            namespace: Some(String::new()),
            ..Default::default()
        }
    }

    /// The head of a decoded insert, as the body's own accessors give it.
    fn head_of(insert: &InsertRequest) -> InsertHead {
        let base = insert.base.clone().unwrap_or_default();
        let body = crate::msg::MsgBody::Insert(insert.clone());
        InsertHead {
            msg_type: base.msg_type,
            msg_id: base.msg_id,
            timestamp: base.timestamp,
            begin_ts: body.begin_ts(),
            end_ts: body.end_ts(),
            first_row: insert.row_ids.first().copied().unwrap_or_default(),
        }
    }

    #[test]
    fn the_check_reads_the_head_without_decoding() {
        let encoded = Bytes::from(sample().encode_to_vec());
        let head = check_insert(&encoded).expect("an insert");
        assert_eq!(head, head_of(&sample()));
        assert_eq!(
            (head.begin_ts, head.end_ts, head.first_row),
            (99, u64::MAX, 1)
        );
        // No rows: the header's timestamp; no header: nothing a stream can place.
        let no_rows = InsertRequest {
            base: Some(MsgBase::new(400, 3, 42)),
            ..Default::default()
        };
        let head = check_insert(&no_rows.encode_to_vec()).expect("an insert");
        assert_eq!((head.begin_ts, head.end_ts, head.first_row), (42, 42, 0));
        assert_eq!(check_insert(&[]), None);
        // A string that is not UTF-8 fails both.
        let mut bad = InsertRequest {
            shard_name: "é".into(),
            ..sample()
        }
        .encode_to_vec();
        let at = bad
            .iter()
            .position(|b| *b == 0xc3)
            .expect("the name's first byte");
        bad[at] = 0xff;
        assert_eq!(check_insert(&bad), None);
        assert_eq!(decode_insert(&bad.into()), None);
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
        // One row, the usual insert: every per-row field inline, nothing allocated.
        let one_row = InsertRequest {
            timestamps: vec![5].into(),
            row_ids: vec![6].into(),
            row_data: vec![Blob {
                value: vec![9; 16].into(),
            }]
            .into(),
            ..Default::default()
        };
        let insert = decode_insert(&one_row.encode_to_vec().into()).expect("decodes");
        assert_eq!(insert, one_row);
        assert!(insert.timestamps.is_inline());
        assert!(insert.row_ids.is_inline());
        assert!(insert.row_data.is_inline());
    }

    /// The decode of a caller that owns the payload: the last bytes field is the payload.
    fn owned(payload: Bytes) -> InsertRequest {
        let (mut insert, last) = decode_insert_parts(&payload).expect("decodes");
        if let Some(last) = last {
            last.fill(&mut insert, payload);
        }
        insert
    }

    #[test]
    fn an_owned_payload_becomes_the_last_bytes_field() {
        let encoded = Bytes::from(sample().encode_to_vec());
        let (_, last) = decode_insert_parts(&encoded).expect("decodes");
        // `sample` ends with an empty column: the last field with bytes is column 0.
        assert!(matches!(
            last,
            Some(LastBytes {
                field: BytesField::Column(0),
                ..
            })
        ));
        let inside = encoded.as_ptr_range();
        let insert = owned(encoded.clone());
        assert_eq!(insert, sample());
        assert!(inside.contains(&insert.fields_data[0].as_ptr()));
        assert!(inside.contains(&insert.row_data[0].value.as_ptr()));
        // One row blob and nothing else, the usual insert: the row is the last field.
        let one_row = InsertRequest {
            row_data: [Blob {
                value: vec![9; 16].into(),
            }]
            .into(),
            ..Default::default()
        };
        let (_, last) = decode_insert_parts(&one_row.encode_to_vec().into()).expect("decodes");
        assert!(matches!(
            last,
            Some(LastBytes {
                field: BytesField::Row(0),
                ..
            })
        ));
        assert_eq!(owned(one_row.encode_to_vec().into()), one_row);
        assert!(decode_insert_parts(&Bytes::new())
            .expect("decodes")
            .1
            .is_none());
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

    #[test]
    fn a_varint_running_past_its_field_is_refused() {
        // The header's last varint (the timestamp, 99) loses its end, so it runs on into the
        // next field's key; and so does a one-row timestamps field into the row ids'.
        let mut header = sample().encode_to_vec();
        assert_eq!(
            &header[..9],
            &[0x0a, 7, 0x08, 0x90, 0x03, 0x10, 7, 0x18, 99]
        );
        header[8] |= 0x80;
        let one_row = InsertRequest {
            timestamps: [5].into(),
            row_ids: [6].into(),
            ..Default::default()
        };
        let mut packed = one_row.encode_to_vec();
        assert_eq!(&packed[..4], &[0x52, 1, 5, 0x5a]);
        packed[2] |= 0x80;
        for payload in [header, packed] {
            let payload = Bytes::from(payload);
            assert!(InsertRequest::decode(payload.clone()).is_err());
            assert_eq!(decode_insert(&payload), None);
        }
    }

    proptest::proptest! {
        /// Both paths of `varint` (ten bytes ahead, and near the end) read what prost reads,
        /// and consume as many bytes, on any bytes; and any value round-trips.
        #[test]
        fn varint_agrees_with_prost(
            bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..14),
            value in proptest::num::u64::ANY,
            tail in 0usize..12,
        ) {
            let mut encoded = Vec::new();
            prost::encoding::encode_varint(value, &mut encoded);
            encoded.resize(encoded.len() + tail, 0xff);
            for input in [&bytes[..], &encoded[..]] {
                let mut at = 0;
                let ours = varint(input, &mut at);
                let mut rest = input;
                let theirs = prost::encoding::decode_varint(&mut rest).ok();
                proptest::prop_assert_eq!(ours, theirs);
                if ours.is_some() {
                    proptest::prop_assert_eq!(at, input.len() - rest.len());
                }
            }
            let mut at = 0;
            proptest::prop_assert_eq!(varint(&encoded, &mut at), Some(value));
        }

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
                // The check accepts what the decoder decodes with a header, and reads its head.
                let decoded = decode_insert(&payload).filter(|insert| insert.base.is_some());
                proptest::prop_assert_eq!(check_insert(&payload), decoded.as_ref().map(head_of));
                if let Some(fast) = decode_insert(&payload) {
                    let slow = InsertRequest::decode(payload.clone());
                    proptest::prop_assert_eq!(Ok::<_, String>(fast.clone()), slow.map_err(|e| e.to_string()));
                    proptest::prop_assert_eq!(owned(payload), fast);
                }
            }
        }
    }
}
