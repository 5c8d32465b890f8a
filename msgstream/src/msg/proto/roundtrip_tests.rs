//! Property tests: whatever msgstream encodes decodes back equal, and re-encodes to the same bytes.

use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;

use super::*;
use crate::msg::{CustomMsg, DecoderRegistry, MsgBody, TsMsg};

fn text() -> impl Strategy<Value = String> {
    "\\PC{0,6}"
}

fn bytes() -> impl Strategy<Value = Vec<u8>> {
    vec(any::<u8>(), 0..6)
}

fn base(msg_type: i32) -> impl Strategy<Value = Option<MsgBase>> {
    let property = (text(), text()).prop_map(|(key, value)| Property { key, value });
    let replicate = (any::<bool>(), any::<u64>(), text()).prop_map(
        |(is_replicate, msg_timestamp, replicate_id)| ReplicateInfo {
            is_replicate,
            msg_timestamp,
            replicate_id,
        },
    );
    (
        any::<i64>(),
        any::<u64>(),
        any::<i64>(),
        any::<i64>(),
        vec(property, 0..3),
        option::of(replicate),
    )
        .prop_map(
            move |(msg_id, timestamp, source_id, target_id, properties, replicate_info)| {
                Some(MsgBase {
                    msg_type,
                    msg_id,
                    timestamp,
                    source_id,
                    target_id,
                    properties,
                    replicate_info,
                })
            },
        )
}

fn names() -> impl Strategy<Value = (String, String, String, String)> {
    (text(), text(), text(), text())
}

fn ids() -> impl Strategy<Value = (i64, i64, i64, i64)> {
    (any::<i64>(), any::<i64>(), any::<i64>(), any::<i64>())
}

fn insert() -> impl Strategy<Value = MsgBody> {
    let rows = (
        vec(any::<u64>(), 0..4),
        vec(any::<i64>(), 0..4),
        vec(
            bytes().prop_map(|value| Blob {
                value: value.into(),
            }),
            0..3,
        ),
        vec(bytes(), 0..3),
    );
    let rest = (any::<u64>(), 0..3i32, option::of(text()));
    (base(MsgType::Insert as i32), names(), ids(), rows, rest).prop_map(
        |(base, names, ids, rows, (num_rows, version, namespace))| {
            MsgBody::Insert(InsertRequest {
                base,
                shard_name: names.0,
                db_name: names.1,
                collection_name: names.2,
                partition_name: names.3,
                db_id: ids.0,
                collection_id: ids.1,
                partition_id: ids.2,
                segment_id: ids.3,
                timestamps: rows.0.into(),
                row_ids: rows.1.into(),
                row_data: rows.2.into(),
                fields_data: rows.3.into_iter().map(Into::into).collect(),
                num_rows,
                version,
                namespace,
            })
        },
    )
}

fn primary_keys() -> impl Strategy<Value = Option<Ids>> {
    option::of(prop_oneof![
        Just(Ids::default()),
        vec(any::<i64>(), 0..4).prop_map(Ids::ints),
        vec(text(), 0..4).prop_map(Ids::strings),
    ])
}

fn delete() -> impl Strategy<Value = MsgBody> {
    let rows = (
        vec(any::<i64>(), 0..4),
        vec(any::<u64>(), 0..4),
        any::<i64>(),
        primary_keys(),
    );
    (base(MsgType::Delete as i32), names(), ids(), rows, bytes()).prop_map(
        |(base, names, ids, rows, serialized_expr_plan)| {
            MsgBody::Delete(DeleteRequest {
                base,
                shard_name: names.0,
                db_name: names.1,
                collection_name: names.2,
                partition_name: names.3,
                db_id: ids.0,
                collection_id: ids.1,
                partition_id: ids.2,
                int64_primary_keys: rows.0,
                timestamps: rows.1,
                num_rows: rows.2,
                primary_keys: rows.3,
                segment_id: ids.3,
                serialized_expr_plan: serialized_expr_plan.into(),
            })
        },
    )
}

fn create_collection() -> impl Strategy<Value = MsgBody> {
    let lists = (
        vec(text(), 0..3),
        vec(text(), 0..3),
        vec(any::<i64>(), 0..3),
        vec(text(), 0..3),
    );
    let schemas = (bytes(), option::of(bytes()));
    let base = base(MsgType::CreateCollection as i32);
    (base, names(), ids(), lists, schemas).prop_map(|(base, names, ids, lists, schemas)| {
        MsgBody::CreateCollection(CreateCollectionRequest {
            base,
            db_name: names.0,
            collection_name: names.1,
            partition_name: names.2,
            db_id: ids.0,
            collection_id: ids.1,
            partition_id: ids.2,
            schema: schemas.0,
            virtual_channel_names: lists.0,
            physical_channel_names: lists.1,
            partition_ids: lists.2,
            partition_names: lists.3,
            collection_schema: schemas.1,
        })
    })
}

fn partition(msg_type: MsgType) -> impl Strategy<Value = MsgBody> {
    (base(msg_type as i32), names(), ids()).prop_map(move |(base, names, ids)| {
        let (db_name, collection_name, partition_name) = (names.0, names.1, names.2);
        let (db_id, collection_id, partition_id) = (ids.0, ids.1, ids.2);
        if msg_type == MsgType::CreatePartition {
            MsgBody::CreatePartition(CreatePartitionRequest {
                base,
                db_name,
                collection_name,
                partition_name,
                db_id,
                collection_id,
                partition_id,
            })
        } else {
            MsgBody::DropPartition(DropPartitionRequest {
                base,
                db_name,
                collection_name,
                partition_name,
                db_id,
                collection_id,
                partition_id,
            })
        }
    })
}

fn other_kinds() -> impl Strategy<Value = MsgBody> {
    let stats = (any::<i64>(), any::<i64>()).prop_map(|(segment_id, num_rows)| SegmentStats {
        segment_id,
        num_rows,
    });
    prop_oneof![
        base(MsgType::TimeTick as i32).prop_map(|base| MsgBody::TimeTick(TimeTickMsg { base })),
        (base(MsgType::DropCollection as i32), names(), ids()).prop_map(|(base, names, ids)| {
            MsgBody::DropCollection(DropCollectionRequest {
                base,
                db_name: names.0,
                collection_name: names.1,
                db_id: ids.0,
                collection_id: ids.1,
            })
        }),
        (
            base(MsgType::DataNodeTt as i32),
            text(),
            any::<u64>(),
            vec(stats, 0..3)
        )
            .prop_map(|(base, channel_name, timestamp, segments_stats)| {
                MsgBody::DataNodeTt(DataNodeTtMsg {
                    base,
                    channel_name,
                    timestamp,
                    segments_stats,
                })
            }),
        (base(4242), bytes()).prop_map(|(base, tail)| {
            let mut payload = prost::Message::encode_to_vec(&TimeTickMsg { base: base.clone() });
            // A field 15 of the unknown kind, which only the raw payload carries.
            payload.push(0x7a);
            payload.push(u8::try_from(tail.len()).expect("short tail"));
            payload.extend(tail);
            MsgBody::Unknown(CustomMsg {
                base: base.unwrap_or_default(),
                payload: payload.into(),
            })
        }),
    ]
}

fn any_body() -> impl Strategy<Value = MsgBody> {
    prop_oneof![
        insert(),
        delete(),
        create_collection(),
        partition(MsgType::CreatePartition),
        partition(MsgType::DropPartition),
        other_kinds(),
    ]
}

proptest! {
    #[test]
    fn encoded_messages_decode_back_equal(body in any_body()) {
        let encoded = TsMsg::new(body.clone()).encode();
        let decoded = DecoderRegistry::default().decode(&encoded).expect("decodes");
        prop_assert_eq!(&decoded, &body);
        prop_assert_eq!(TsMsg::new(decoded).encode(), encoded);
    }

    #[test]
    fn positions_round_trip(
        channel_name in "\\PC{1,6}",
        msg_id in bytes(),
        msg_group in text(),
        timestamp in any::<u64>(),
        wal_name in prop_oneof![Just(0), Just(1), Just(4), Just(999), any::<i32>()],
    ) {
        let position = MsgPosition {
            channel_name: channel_name.into(),
            msg_id: crate::base::MessageId::from_backend_bytes(msg_id),
            msg_group: msg_group.into(),
            timestamp,
            wal_name,
        };
        prop_assert_eq!(MsgPosition::from_bytes(&position.to_bytes()).expect("decodes"), position);
    }

    /// The hand-written encoding of `MsgPosition` is the one prost derives for the message
    /// as it was declared before (`String` and `Vec<u8>` fields), both ways, empty fields
    /// included, and an unknown field is skipped the same way.
    #[test]
    fn positions_encode_as_the_derived_message(
        channel_name in prop_oneof![Just(String::new()), text()],
        msg_id in bytes(),
        msg_group in prop_oneof![Just(String::new()), text()],
        timestamp in prop_oneof![Just(0u64), any::<u64>()],
        wal_name in prop_oneof![Just(0), Just(999), any::<i32>()],
    ) {
        let derived = DerivedPosition {
            channel_name: channel_name.clone(),
            msg_id: msg_id.clone(),
            msg_group: msg_group.clone(),
            timestamp,
            wal_name,
        };
        let ours = MsgPosition {
            channel_name: channel_name.into(),
            msg_id: crate::base::MessageId::from_backend_bytes(msg_id),
            msg_group: msg_group.into(),
            timestamp,
            wal_name,
        };
        let bytes = prost::Message::encode_to_vec(&derived);
        prop_assert_eq!(ours.to_bytes(), bytes.clone());
        prop_assert_eq!(prost::Message::encoded_len(&ours), bytes.len());
        let decoded: MsgPosition = prost::Message::decode(&bytes[..]).expect("decodes");
        prop_assert_eq!(&decoded, &ours);
        let extended = [&bytes[..], &[0x98, 0x06, 0x01][..]].concat();
        let decoded: MsgPosition = prost::Message::decode(&extended[..]).expect("decodes");
        prop_assert_eq!(decoded, ours);
    }
}

/// `MsgPosition` as prost derived it before its names became `SharedStr`s.
#[derive(Clone, PartialEq, prost::Message)]
struct DerivedPosition {
    #[prost(string, tag = "1")]
    channel_name: String,
    #[prost(bytes = "vec", tag = "2")]
    msg_id: Vec<u8>,
    #[prost(string, tag = "3")]
    msg_group: String,
    #[prost(uint64, tag = "4")]
    timestamp: u64,
    #[prost(enumeration = "WalName", tag = "5")]
    wal_name: i32,
}
