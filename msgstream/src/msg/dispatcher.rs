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

/// `msg_type` → decoder. [`DecoderRegistry::default`] knows Insert, Delete, TimeTick,
/// CreateCollection, DropCollection, CreatePartition, DropPartition and DataNodeTt;
/// applications add their own kinds. A kind without a decoder comes through as
/// [`MsgBody::Unknown`].
#[derive(Clone)]
pub struct DecoderRegistry {
    decoders: HashMap<i32, Decoder>,
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
            decoders: HashMap::new(),
        };
        registry.register(MsgType::Insert as i32, |b| {
            Ok(MsgBody::Insert(InsertRequest::decode(b)?))
        });
        registry.register(MsgType::Delete as i32, |b| {
            Ok(MsgBody::Delete(DeleteRequest::decode(b)?))
        });
        registry.register(MsgType::TimeTick as i32, |b| {
            Ok(MsgBody::TimeTick(TimeTickMsg::decode(b)?))
        });
        registry.register(MsgType::CreateCollection as i32, |b| {
            Ok(MsgBody::CreateCollection(CreateCollectionRequest::decode(
                b,
            )?))
        });
        registry.register(MsgType::DropCollection as i32, |b| {
            Ok(MsgBody::DropCollection(DropCollectionRequest::decode(b)?))
        });
        registry.register(MsgType::CreatePartition as i32, |b| {
            Ok(MsgBody::CreatePartition(CreatePartitionRequest::decode(b)?))
        });
        registry.register(MsgType::DropPartition as i32, |b| {
            Ok(MsgBody::DropPartition(DropPartitionRequest::decode(b)?))
        });
        registry.register(MsgType::DataNodeTt as i32, |b| {
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
        self.decoders.insert(msg_type, Arc::new(decoder));
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
        let base = MsgHeader::decode(payload)?
            .base
            .ok_or_else(|| Error::Decode("payload has no MsgBase at field 1".to_string()))?;
        match self.decoders.get(&base.msg_type) {
            Some(decoder) => decoder(payload),
            None => Ok(MsgBody::Unknown(CustomMsg {
                base,
                payload: payload.to_vec().into(),
            })),
        }
    }
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

    proptest::proptest! {
        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..64)) {
            let _ = DecoderRegistry::default().decode(&bytes);
        }
    }
}
