//! Decoding by header: read `MsgHeader`, then dispatch on `msg_type` to a registered decoder
//! (Milvus's `UnmarshalDispatcher`, extensible by the application).

use std::collections::HashMap;
use std::sync::Arc;

use prost::Message as _;

use super::proto::{
    CreateCollectionRequest, CreatePartitionRequest, DataNodeTtMsg, DeleteRequest,
    DropCollectionRequest, DropPartitionRequest, InsertRequest, MsgHeader, MsgType, TimeTickMsg,
};
use super::tsmsg::{CustomMsg, MsgBody};
use crate::{Error, Result};

/// Decodes the payload of one message kind.
pub type Decoder = Arc<dyn Fn(&[u8]) -> Result<MsgBody> + Send + Sync>;

/// A registered decoder, and whether it is one of the core's own (a prost decode of the whole
/// message, header included, so its success implies the header decodes too).
#[derive(Clone)]
struct Entry {
    decoder: Decoder,
    builtin: bool,
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
        };
        registry.register_builtin(MsgType::Insert as i32, |b| {
            Ok(MsgBody::Insert(InsertRequest::decode(b)?))
        });
        registry.register_builtin(MsgType::Delete as i32, |b| {
            Ok(MsgBody::Delete(DeleteRequest::decode(b)?))
        });
        registry.register_builtin(MsgType::TimeTick as i32, |b| {
            Ok(MsgBody::TimeTick(TimeTickMsg::decode(b)?))
        });
        registry.register_builtin(MsgType::CreateCollection as i32, |b| {
            Ok(MsgBody::CreateCollection(CreateCollectionRequest::decode(
                b,
            )?))
        });
        registry.register_builtin(MsgType::DropCollection as i32, |b| {
            Ok(MsgBody::DropCollection(DropCollectionRequest::decode(b)?))
        });
        registry.register_builtin(MsgType::CreatePartition as i32, |b| {
            Ok(MsgBody::CreatePartition(CreatePartitionRequest::decode(b)?))
        });
        registry.register_builtin(MsgType::DropPartition as i32, |b| {
            Ok(MsgBody::DropPartition(DropPartitionRequest::decode(b)?))
        });
        registry.register_builtin(MsgType::DataNodeTt as i32, |b| {
            Ok(MsgBody::DataNodeTt(DataNodeTtMsg::decode(b)?))
        });
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
        self.decoders.insert(
            msg_type,
            Entry {
                decoder: Arc::new(decoder),
                builtin: false,
            },
        );
    }

    fn register_builtin(
        &mut self,
        msg_type: i32,
        decoder: impl Fn(&[u8]) -> Result<MsgBody> + Send + Sync + 'static,
    ) {
        self.decoders.insert(
            msg_type,
            Entry {
                decoder: Arc::new(decoder),
                builtin: true,
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
        // Fast path: a built-in kind found by scanning for the header's `msg_type` (no header
        // decode, no allocation). A built-in decoder decodes the header as part of the whole
        // message, so when it succeeds the full path below would have chosen it too and
        // returned the same; when it fails, the full path runs and reports as it always did.
        if let Some(entry) = peek_msg_type(payload).and_then(|kind| self.decoders.get(&kind)) {
            if entry.builtin {
                if let Ok(body) = (entry.decoder)(payload) {
                    return Ok(body);
                }
            }
        }
        self.decode_in_full(payload)
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

/// Reads a varint, as protobuf encodes it; `None` when it is malformed or runs past the end.
fn read_varint(buf: &mut &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = buf.split_first()?;
        *buf = rest;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

/// The `msg_type` `MsgHeader` decoding would find, read without decoding: every top-level
/// field 1 (the header; repeated ones merge, so the last `msg_type` seen wins) scanned for
/// its field 1, the other fields skipped. `None` for no header, and for anything unusual
/// (groups, a wrong wire type, a truncated field), which the full decode then judges.
fn peek_msg_type(payload: &[u8]) -> Option<i32> {
    let mut buf = payload;
    let mut kind = None;
    while !buf.is_empty() {
        let (tag, field) = read_field(&mut buf)?;
        match (tag, field) {
            (1, Field::Bytes(header)) => {
                let mut inner = header;
                let mut header_kind = kind.unwrap_or(0);
                while !inner.is_empty() {
                    match read_field(&mut inner)? {
                        // prost reads an int32 (enumeration) varint truncated to 32 bits.
                        (1, Field::Varint(value)) => header_kind = value as i32,
                        (1, _) => return None,
                        _ => {}
                    }
                }
                kind = Some(header_kind);
            }
            (1, _) => return None,
            _ => {}
        }
    }
    kind
}

/// A field's payload, as far as [`peek_msg_type`] needs it.
enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

/// Reads one field (key and value) off `buf`; `None` for groups and malformed input.
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
            timestamps: vec![10],
            row_ids: vec![1],
            num_rows: 1,
            fields_data: vec![vec![1, 2, 3]],
            ..Default::default()
        }));
        let tick = TsMsg::time_tick(11);
        for msg in [insert, tick] {
            assert_eq!(registry.decode(&msg.encode()).expect("decodes"), msg.body);
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
    }

    #[test]
    fn the_fast_path_follows_prost_on_repeated_and_odd_headers() {
        let registry = DecoderRegistry::default();
        let insert = TsMsg::new(MsgBody::Insert(InsertRequest {
            base: Some(MsgBase::new(MsgType::Insert as i32, 7, 10)),
            timestamps: vec![10],
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
                    timestamps: vec![12, 13],
                    row_ids: vec![1, 2],
                    ..Default::default()
                }))
                .encode(),
                TsMsg::time_tick(77).encode(),
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
