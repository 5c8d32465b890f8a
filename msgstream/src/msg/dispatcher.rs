//! Decoding by header: read `MsgHeader`, then dispatch on `msg_type` to a registered decoder
//! (Milvus's `UnmarshalDispatcher`, extensible by the application).

use std::collections::HashMap;
use std::sync::Arc;

use prost::Message as _;

use super::proto::{
    decode_insert, CreateCollectionRequest, CreatePartitionRequest, DataNodeTtMsg, DeleteRequest,
    DropCollectionRequest, DropPartitionRequest, InsertRequest, MsgHeader, MsgType, TimeTickMsg,
};
use super::received::ReceivedInsert;
use super::tsmsg::{CustomMsg, MsgBody};
use crate::{Error, Result};

/// Decodes the payload of one message kind.
pub type Decoder = Arc<dyn Fn(&[u8]) -> Result<MsgBody> + Send + Sync>;

/// A registered decoder, and which of the core's own kinds it is, if it is one (a prost
/// decode of the whole message, header included, so its success implies the header decodes
/// too).
#[derive(Clone)]
struct Entry {
    decoder: Decoder,
    builtin: Option<Builtin>,
}

/// The kinds the core decodes itself.
#[derive(Clone, Copy, Debug)]
enum Builtin {
    Insert,
    Delete,
    TimeTick,
    CreateCollection,
    DropCollection,
    CreatePartition,
    DropPartition,
    DataNodeTt,
}

impl Builtin {
    /// Decodes the whole message from any buffer: from a `Bytes` payload, each `Bytes` field
    /// (row blobs, column data, delete plans) is a slice of the payload, with no allocation or
    /// copy, where a `&[u8]` costs an allocation and a copy per field.
    fn decode(self, buf: impl prost::bytes::Buf) -> Result<MsgBody> {
        Ok(match self {
            Builtin::Insert => MsgBody::Insert(InsertRequest::decode(buf)?),
            Builtin::Delete => MsgBody::Delete(DeleteRequest::decode(buf)?),
            Builtin::TimeTick => MsgBody::TimeTick(TimeTickMsg::decode(buf)?),
            Builtin::CreateCollection => {
                MsgBody::CreateCollection(CreateCollectionRequest::decode(buf)?)
            }
            Builtin::DropCollection => MsgBody::DropCollection(DropCollectionRequest::decode(buf)?),
            Builtin::CreatePartition => {
                MsgBody::CreatePartition(CreatePartitionRequest::decode(buf)?)
            }
            Builtin::DropPartition => MsgBody::DropPartition(DropPartitionRequest::decode(buf)?),
            Builtin::DataNodeTt => MsgBody::DataNodeTt(DataNodeTtMsg::decode(buf)?),
        })
    }

    /// [`Self::decode`] of a `Bytes` payload, inserts through their own decoder first (the
    /// same result, at about half the cost: see `proto::insert_fast`).
    #[inline]
    fn decode_bytes(self, payload: &bytes::Bytes) -> Result<MsgBody> {
        if let Builtin::Insert = self {
            if let Some(insert) = decode_insert(payload) {
                return Ok(MsgBody::Insert(insert));
            }
        }
        self.decode(payload.clone())
    }
}

/// Hashes the `i32` kinds of the registry: SipHash costs more than the rest of the lookup,
/// and the table holds only kinds the application registered, so there is nothing to flood.
#[derive(Clone, Copy, Default)]
struct KindHasher(u64);

impl std::hash::Hasher for KindHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 = (self.0 ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn write_i32(&mut self, kind: i32) {
        // Fibonacci hashing: spreads consecutive kinds over the top bits hashbrown uses.
        self.0 = u64::from(kind as u32).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

type Kinds = HashMap<i32, Entry, std::hash::BuildHasherDefault<KindHasher>>;

/// `msg_type` → decoder. [`DecoderRegistry::default`] knows Insert, Delete, TimeTick,
/// CreateCollection, DropCollection, CreatePartition, DropPartition and DataNodeTt;
/// applications add their own kinds. A kind without a decoder comes through as
/// [`MsgBody::Unknown`].
#[derive(Clone)]
pub struct DecoderRegistry {
    decoders: Kinds,
    /// Whether inserts decode with the built-in decoder (not replaced by the application):
    /// then a stream checks received inserts and keeps them undecoded.
    builtin_insert: bool,
}

impl std::fmt::Debug for DecoderRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut kinds: Vec<_> = self.decoders.keys().collect();
        kinds.sort();
        f.debug_struct("DecoderRegistry")
            .field("kinds", &kinds)
            .finish()
    }
}

impl Default for DecoderRegistry {
    fn default() -> Self {
        let mut registry = DecoderRegistry {
            decoders: Kinds::default(),
            builtin_insert: true,
        };
        for (kind, builtin) in [
            (MsgType::Insert, Builtin::Insert),
            (MsgType::Delete, Builtin::Delete),
            (MsgType::TimeTick, Builtin::TimeTick),
            (MsgType::CreateCollection, Builtin::CreateCollection),
            (MsgType::DropCollection, Builtin::DropCollection),
            (MsgType::CreatePartition, Builtin::CreatePartition),
            (MsgType::DropPartition, Builtin::DropPartition),
            (MsgType::DataNodeTt, Builtin::DataNodeTt),
        ] {
            registry.decoders.insert(
                kind as i32,
                Entry {
                    decoder: Arc::new(move |b: &[u8]| builtin.decode(b)),
                    builtin: Some(builtin),
                },
            );
        }
        registry
    }
}

impl DecoderRegistry {
    /// Registers (or replaces) the decoder of `msg_type`.
    pub fn register(
        &mut self,
        msg_type: i32,
        decoder: impl Fn(&[u8]) -> Result<MsgBody> + Send + Sync + 'static,
    ) {
        if msg_type == MsgType::Insert as i32 {
            self.builtin_insert = false;
        }
        self.decoders.insert(
            msg_type,
            Entry {
                decoder: Arc::new(decoder),
                builtin: None,
            },
        );
    }

    /// Registers `msg_type` as an application kind kept as [`CustomMsg`] (opaque payload).
    pub fn register_custom(&mut self, msg_type: i32) {
        self.register(msg_type, |b| {
            Ok(MsgBody::Custom(CustomMsg::from_payload(b.to_vec())?))
        });
    }

    /// Decodes a payload: header first, then the kind's decoder. Never panics. A kind without
    /// a decoder is [`MsgBody::Unknown`] (payload kept whole); garbage, a missing header and a
    /// body its kind's decoder rejects are `Error::Decode`.
    pub fn decode(&self, payload: &[u8]) -> Result<MsgBody> {
        // Fast path: the kind named by the first header, decoded at once if built in (no
        // separate header decode). A built-in decoder decodes the header (tag 1, `MsgBase`)
        // as `MsgHeader` does, repeated headers merged, and rejects whatever `MsgHeader`
        // would; so when it succeeds and its header names the kind it was chosen for, the full
        // path below would have chosen it too and returned the same. Otherwise (failure, or
        // a later header naming another kind) the full path runs and decides as it always
        // did.
        if let Some((kind, builtin)) = self.builtin_of(payload) {
            if let Ok(body) = builtin.decode(payload) {
                if names(&body, kind) {
                    return Ok(body);
                }
            }
        }
        self.decode_in_full(payload)
    }

    /// [`Self::decode`] of a payload held as `Bytes` (as consumers deliver them): the same
    /// result, with one allocation and copy less per bytes field of a built-in kind. Inserts
    /// the built-in decoder takes are not decoded here but checked and kept
    /// ([`Self::check_received_insert`]), so this is what the pump does with every other
    /// payload.
    #[inline]
    pub(crate) fn decode_bytes(&self, payload: bytes::Bytes) -> Result<MsgBody> {
        let payload = &payload;
        if let Some((kind, builtin)) = self.builtin_of(payload) {
            if let Ok(body) = builtin.decode_bytes(payload) {
                if names(&body, kind) {
                    return Ok(body);
                }
            }
        }
        self.decode_in_full(payload)
    }

    /// A received insert the built-in decoder takes, checked and kept undecoded (see
    /// `ReceivedInsert`); `Err` gives the payload back for [`Self::decode_bytes`] (any other
    /// kind, an insert decoder of the application's, or a shape the fast path leaves to prost).
    #[inline]
    pub(crate) fn check_received_insert(
        &self,
        payload: bytes::Bytes,
    ) -> std::result::Result<ReceivedInsert, bytes::Bytes> {
        if !self.may_be_insert(&payload) {
            return Err(payload);
        }
        ReceivedInsert::check(payload)
    }

    /// Whether `payload` may be a received insert to check ([`Self::check_received_insert`]):
    /// inserts are decoded by the built-in decoder, and its first bytes look like an insert's.
    /// Inserts are recognised by the look of their first bytes (a header whose first field is
    /// `msg_type` 400), with no kind lookup; the check accepts only one header and only fields
    /// of `InsertRequest` with their declared wire types, so when that header says Insert, the
    /// general path would have chosen the built-in Insert decoder too and returned the same.
    #[inline]
    pub(crate) fn may_be_insert(&self, payload: &[u8]) -> bool {
        self.builtin_insert && looks_like_insert(payload)
    }

    /// The kind the payload's first header names, and its decoder if that is built in.
    fn builtin_of(&self, payload: &[u8]) -> Option<(i32, Builtin)> {
        let kind = peek_msg_type(payload)?;
        Some((kind, self.decoders.get(&kind)?.builtin?))
    }

    /// The reference decode: the whole header first, then its kind's decoder.
    fn decode_in_full(&self, payload: &[u8]) -> Result<MsgBody> {
        let base = MsgHeader::decode(payload)?
            .base
            .ok_or_else(|| Error::Decode("payload has no MsgBase at field 1".to_string()))?;
        match self.decoders.get(&base.msg_type) {
            Some(entry) => (entry.decoder)(payload),
            None => Ok(MsgBody::Unknown(CustomMsg {
                base,
                payload: payload.to_vec().into(),
            })),
        }
    }
}

/// Whether `payload` starts as an encoded insert usually does: field 1 (the header), shorter
/// than 128 bytes, whose first field is `msg_type` 400. Only a hint; the decode checks.
#[inline(always)]
fn looks_like_insert(payload: &[u8]) -> bool {
    payload.first() == Some(&0x0a) && payload.get(2..5) == Some(&[0x08, 0x90, 0x03][..])
}

/// Whether the decoded header of `body` has kind `kind`.
fn names(body: &MsgBody, kind: i32) -> bool {
    body.header().is_some_and(|base| base.msg_type == kind)
}

/// Reads a varint, as protobuf encodes it; `None` when it is malformed or runs past the end.
#[inline(always)]
fn read_varint(buf: &mut &[u8]) -> Option<u64> {
    let (&first, rest) = buf.split_first()?;
    if first < 0x80 {
        *buf = rest;
        return Some(u64::from(first));
    }
    let mut value = 0u64;
    for (index, &byte) in buf.iter().enumerate().take(10) {
        value |= u64::from(byte & 0x7f) << (7 * index);
        if byte & 0x80 == 0 {
            *buf = buf.get(index + 1..)?;
            return Some(value);
        }
    }
    None
}

/// The `msg_type` of the payload's first header (top-level field 1; the last `msg_type` in
/// it, as prost reads an int32, truncated to 32 bits), read without decoding: only a guess
/// of which decoder to try, which [`DecoderRegistry::decode`] checks against the decoded
/// header. `None` for no header, and for anything unusual (groups, a wrong wire type, a
/// truncated field), which the full decode then judges.
fn peek_msg_type(payload: &[u8]) -> Option<i32> {
    let mut buf = payload;
    while !buf.is_empty() {
        match read_field(&mut buf)? {
            (1, Field::Bytes(header)) => {
                let mut inner = header;
                let mut kind = 0;
                while !inner.is_empty() {
                    match read_field(&mut inner)? {
                        (1, Field::Varint(value)) => kind = value as i32,
                        (1, _) => return None,
                        _ => {}
                    }
                }
                return Some(kind);
            }
            (1, _) => return None,
            _ => {}
        }
    }
    None
}

/// A field's payload, as far as [`peek_msg_type`] needs it.
enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

/// Reads one field (key and value) off `buf`; `None` for groups and malformed input.
#[inline(always)]
fn read_field<'a>(buf: &mut &'a [u8]) -> Option<(u64, Field<'a>)> {
    let key = read_varint(buf)?;
    if key > u64::from(u32::MAX) || key >> 3 == 0 {
        return None;
    }
    let field = match key & 7 {
        0 => Field::Varint(read_varint(buf)?),
        1 | 5 => {
            let width = if key & 7 == 1 { 8 } else { 4 };
            *buf = buf.get(width..)?;
            Field::Fixed
        }
        2 => {
            let len = usize::try_from(read_varint(buf)?).ok()?;
            let (bytes, rest) = (buf.get(..len)?, buf.get(len..)?);
            *buf = rest;
            Field::Bytes(bytes)
        }
        _ => return None,
    };
    Some((key >> 3, field))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::{MsgBase, TsMsg};

    #[test]
    fn round_trip_known_kinds() {
        let registry = DecoderRegistry::default();
        let insert = TsMsg::new(MsgBody::Insert(InsertRequest {
            base: Some(MsgBase::new(MsgType::Insert as i32, 7, 10)),
            timestamps: [10].into(),
            row_ids: [1].into(),
            num_rows: 1,
            fields_data: vec![vec![1, 2, 3].into()],
            ..Default::default()
        }));
        let tick = TsMsg::time_tick(11);
        for msg in [insert, tick] {
            assert_eq!(
                registry.decode(&msg.encode()).expect("decodes"),
                *msg.body()
            );
        }
    }

    #[test]
    fn garbage_is_an_error_and_unknown_kinds_come_through() {
        let registry = DecoderRegistry::default();
        for garbage in [&[0xffu8, 0xff, 0xff][..], &[0x0a, 0x05, 0x08][..], &[][..]] {
            assert!(matches!(registry.decode(garbage), Err(Error::Decode(_))));
        }
        let bad_insert = [0x0a, 0x03, 0x08, 0x90, 0x03, 0x55, 1, 2, 3, 4];
        assert!(
            MsgHeader::decode(&bad_insert[..]).is_ok(),
            "header is fine, body is not"
        );
        assert!(matches!(
            registry.decode(&bad_insert),
            Err(Error::Decode(_))
        ));
        let custom = TimeTickMsg {
            base: Some(MsgBase::new(7777, 1, 1)),
        }
        .encode_to_vec();
        let unknown = registry.decode(&custom).expect("unknown kinds decode");
        assert!(
            matches!(&unknown, MsgBody::Unknown(c) if c.base.msg_type == 7777 && c.payload == custom)
        );
        assert_eq!(TsMsg::new(unknown).encode(), custom);
        let mut extended = registry.clone();
        extended.register_custom(7777);
        assert!(
            matches!(extended.decode(&custom), Ok(MsgBody::Custom(c)) if c.base.msg_type == 7777)
        );
    }

    fn same_outcome(registry: &DecoderRegistry, payload: &[u8]) {
        let fast = registry.decode(payload);
        let full = registry.decode_in_full(payload);
        assert_eq!(
            format!("{fast:?}"),
            format!("{full:?}"),
            "payload {payload:02x?}"
        );
        let from_bytes = registry.decode_bytes(bytes::Bytes::copy_from_slice(payload));
        assert_eq!(
            format!("{from_bytes:?}"),
            format!("{full:?}"),
            "payload {payload:02x?}"
        );
    }

    #[test]
    fn inserts_take_the_insert_path_unless_the_application_replaced_their_decoder() {
        let insert = TsMsg::new(MsgBody::Insert(InsertRequest {
            base: Some(MsgBase::new(MsgType::Insert as i32, 7, 10)),
            timestamps: [10].into(),
            row_ids: [1].into(),
            row_data: [crate::msg::Blob {
                value: vec![1, 2, 3].into(),
            }]
            .into(),
            num_rows: 1,
            ..Default::default()
        }))
        .encode();
        assert!(looks_like_insert(&insert));
        let registry = DecoderRegistry::default();
        same_outcome(&registry, &insert);
        let mut replaced = registry.clone();
        replaced.register_custom(MsgType::Insert as i32);
        assert!(matches!(
            replaced.decode_bytes(insert.clone()),
            Ok(MsgBody::Custom(c)) if c.payload == insert
        ));
        // A header that merely starts like an insert's but names another kind.
        let twice = [&insert[..], &TsMsg::time_tick(3).encode()[..]].concat();
        assert!(looks_like_insert(&twice));
        same_outcome(&registry, &twice);
        assert!(matches!(
            registry.decode_bytes(twice.into()),
            Ok(MsgBody::TimeTick(_))
        ));
    }

    #[test]
    fn the_fast_path_follows_prost_on_repeated_and_odd_headers() {
        let registry = DecoderRegistry::default();
        let insert = TsMsg::new(MsgBody::Insert(InsertRequest {
            base: Some(MsgBase::new(MsgType::Insert as i32, 7, 10)),
            timestamps: [10].into(),
            ..Default::default()
        }))
        .encode();
        let tick = TsMsg::time_tick(3).encode();
        // Two headers merge: the second one's kind wins, or the first's if it has none.
        let twice = [&insert[..], &tick[..]].concat();
        assert!(matches!(registry.decode(&twice), Ok(MsgBody::TimeTick(_))));
        let empty_second = [&insert[..], &[0x0a, 0x00][..]].concat();
        assert!(matches!(
            registry.decode(&empty_second),
            Ok(MsgBody::Insert(_))
        ));
        for payload in [&insert[..], &tick[..], &twice[..], &empty_second[..]] {
            same_outcome(&registry, payload);
        }
        // A kind above i32 is truncated as prost truncates it.
        let wide = [0x0a, 0x06, 0x08, 0xb0, 0x09, 0x80, 0x80, 0x10];
        same_outcome(&registry, &wide);
    }

    proptest::proptest! {
        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..64)) {
            let _ = DecoderRegistry::default().decode(&bytes);
        }

        #[test]
        fn the_fast_path_decodes_as_the_full_one(
            bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..64),
            flips in proptest::collection::vec((0usize..64, proptest::num::u8::ANY), 0..4),
        ) {
            let registry = DecoderRegistry::default();
            same_outcome(&registry, &bytes);
            // Valid messages with a few bytes changed reach the fast path far more often.
            let base = MsgBase::new(MsgType::Delete as i32, 9, 12);
            for valid in [
                TsMsg::new(MsgBody::Insert(InsertRequest {
                    base: Some(base.clone()),
                    timestamps: [12, 13].into(),
                    row_ids: [1, 2].into(),
                    ..Default::default()
                }))
                .encode(),
                TsMsg::time_tick(77).encode(),
                // An insert as inserts are: its own kind, a row blob (the insert-first path).
                TsMsg::new(MsgBody::Insert(InsertRequest {
                    base: Some(MsgBase::new(MsgType::Insert as i32, 9, 12)),
                    timestamps: [12].into(),
                    row_ids: [1].into(),
                    row_data: [crate::msg::Blob {
                        value: vec![7; 5].into(),
                    }].into(),
                    num_rows: 1,
                    ..Default::default()
                }))
                .encode(),
            ] {
                let mut changed = valid.to_vec();
                for (at, byte) in &flips {
                    if let Some(slot) = changed.get_mut(at % valid.len().max(1)) {
                        *slot = *byte;
                    }
                }
                same_outcome(&registry, &changed);
            }
        }
    }
}
