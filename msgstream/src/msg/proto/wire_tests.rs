//! Golden bytes: every field number of the wire contract, held against hex written by hand from
//! `shared/protocols/message-model.md` (no encoder involved). Each fixture sets every field of
//! its kind, must decode to the expected value, and must re-encode to the very same bytes.

use super::*;
use crate::msg::{CustomMsg, DecoderRegistry, MsgBody, TsMsg};
use bytes::Bytes;

/// The part of a header after `msg_type`: msg_id 7 (2), timestamp 100 (3), source_id 2 (4),
/// target_id 3 (5), properties {"k": "v"} then {"e": ""} (6, in that order, the empty value
/// written as Go writes map entries), replicate_info {true, 90, "r1"} (7). 33 bytes.
macro_rules! base_rest {
    () => {
        "10 07 18 64 20 02 28 03 \
         32 06 0a 01 6b 12 01 76 \
         32 05 0a 01 65 12 00 \
         3a 08 08 01 10 5a 1a 02 72 31"
    };
}

/// shard_name "s" (2), db_name "d" (3), collection_name "c" (4), partition_name "p" (5),
/// db_id 1 (6), collection_id 2 (7), partition_id 3 (8): shared by Insert and Delete.
macro_rules! dml_names {
    () => {
        "12 01 73 1a 01 64 22 01 63 2a 01 70 30 01 38 02 40 03"
    };
}

fn hex(text: &str) -> Vec<u8> {
    let digits: Vec<u8> = text.bytes().filter(u8::is_ascii_hexdigit).collect();
    assert_eq!(digits.len() % 2, 0, "odd number of hex digits");
    digits
        .chunks(2)
        .map(|pair| {
            let text = std::str::from_utf8(pair).expect("ascii");
            u8::from_str_radix(text, 16).expect("hex digit")
        })
        .collect()
}

fn base(msg_type: MsgType) -> Option<MsgBase> {
    Some(MsgBase {
        msg_type: msg_type as i32,
        msg_id: 7,
        timestamp: 100,
        source_id: 2,
        target_id: 3,
        properties: vec![
            Property {
                key: "k".into(),
                value: "v".into(),
            },
            Property {
                key: "e".into(),
                value: String::new(),
            },
        ],
        replicate_info: Some(ReplicateInfo {
            is_replicate: true,
            msg_timestamp: 90,
            replicate_id: "r1".into(),
        }),
    })
}

/// Decodes `fixture` through the default registry, compares with `expected`, re-encodes.
fn golden(fixture: &str, expected: MsgBody) {
    let bytes = hex(fixture);
    let decoded = DecoderRegistry::default()
        .decode(&bytes)
        .expect("fixture decodes");
    assert_eq!(decoded, expected);
    assert_eq!(
        TsMsg::new(decoded).encode().as_ref(),
        &bytes[..],
        "re-encoded"
    );
}

#[test]
fn column_based_insert() {
    golden(
        concat!(
            "0a 24 08 90 03 ",
            base_rest!(),
            dml_names!(),
            "48 04",                                  // segment_id 4
            "52 03 64 c8 01",                         // timestamps [100, 200]
            "5a 0b ff ff ff ff ff ff ff ff ff 01 05", // row_ids [-1, 5]
            "62 03 0a 01 aa",                         // row_data [Blob [aa]]
            "6a 05 08 05 12 01 66 6a 00",             // fields_data: two opaque FieldData
            "70 02",                                  // num_rows 2
            "78 01",                                  // version ColumnBased
            "82 01 01 6e",                            // namespace "n" (field 16)
        ),
        MsgBody::Insert(InsertRequest {
            base: base(MsgType::Insert),
            shard_name: "s".into(),
            db_name: "d".into(),
            collection_name: "c".into(),
            partition_name: "p".into(),
            db_id: 1,
            collection_id: 2,
            partition_id: 3,
            segment_id: 4,
            timestamps: [100, 200].into(),
            row_ids: [-1, 5].into(),
            row_data: [Blob {
                value: vec![0xaa].into(),
            }]
            .into(),
            fields_data: vec![vec![0x08, 0x05, 0x12, 0x01, 0x66].into(), Bytes::new()],
            num_rows: 2,
            version: InsertDataVersion::ColumnBased as i32,
            namespace: Some("n".into()),
        }),
    );
}

/// The fixture again through prost's decode (the path of shapes the fast decoder leaves to
/// it), and the per-row fields written unpacked, which proto3 readers must accept too.
#[test]
fn insert_through_prost_and_unpacked_rows() {
    use prost::Message as _;
    let packed = hex(concat!(
        "52 03 64 c8 01",
        "5a 0b ff ff ff ff ff ff ff ff ff 01 05"
    ));
    let unpacked = hex(concat!(
        "50 64 50 c8 01",                   // timestamps 100, 200 one by one
        "58 ff ff ff ff ff ff ff ff ff 01", // row_ids -1
        "58 05",                            // row_ids 5
    ));
    let expected = InsertRequest {
        timestamps: [100, 200].into(),
        row_ids: [-1, 5].into(),
        ..InsertRequest::default()
    };
    for bytes in [packed, unpacked] {
        let decoded = InsertRequest::decode(&bytes[..]).expect("decodes");
        assert_eq!(decoded, expected);
    }
    let one_row =
        InsertRequest::decode(&hex("52 01 07 5a 01 08 62 03 0a 01 aa")[..]).expect("decodes");
    assert_eq!(one_row.timestamps, [7]);
    assert_eq!(one_row.row_ids, [8]);
    assert_eq!(
        one_row.row_data,
        [Blob {
            value: vec![0xaa].into()
        }]
    );
    assert!(
        one_row.timestamps.is_inline()
            && one_row.row_ids.is_inline()
            && one_row.row_data.is_inline()
    );
}

#[test]
fn empty_namespace_is_kept() {
    golden(
        "0a 03 08 90 03 82 01 00",
        MsgBody::Insert(InsertRequest {
            base: Some(MsgBase::new(MsgType::Insert as i32, 0, 0)),
            namespace: Some(String::new()),
            ..InsertRequest::default()
        }),
    );
}

#[test]
fn delete_with_int_keys() {
    golden(
        concat!(
            "0a 24 08 91 03 ",
            base_rest!(),
            dml_names!(),
            "4a 02 0a 0b",             // int64_primary_keys [10, 11]
            "52 03 64 c8 01",          // timestamps [100, 200]
            "58 02",                   // num_rows 2
            "62 06 0a 04 0a 02 0a 0b", // primary_keys.int_id.data [10, 11]
            "68 04",                   // segment_id 4
            "72 02 01 02",             // serialized_expr_plan [01 02]
        ),
        MsgBody::Delete(DeleteRequest {
            base: base(MsgType::Delete),
            shard_name: "s".into(),
            db_name: "d".into(),
            collection_name: "c".into(),
            partition_name: "p".into(),
            db_id: 1,
            collection_id: 2,
            partition_id: 3,
            int64_primary_keys: vec![10, 11],
            timestamps: vec![100, 200],
            num_rows: 2,
            primary_keys: Some(Ids::ints(vec![10, 11])),
            segment_id: 4,
            serialized_expr_plan: vec![1, 2].into(),
        }),
    );
}

#[test]
fn delete_with_string_keys() {
    golden(
        concat!(
            "0a 24 08 91 03 ",
            base_rest!(),
            dml_names!(),
            "52 03 64 c8 01",                   // timestamps [100, 200]
            "58 02",                            // num_rows 2
            "62 09 12 07 0a 01 61 0a 02 62 63", // primary_keys.str_id.data ["a", "bc"]
            "68 04",                            // segment_id 4
            "72 02 01 02",                      // serialized_expr_plan [01 02]
        ),
        MsgBody::Delete(DeleteRequest {
            base: base(MsgType::Delete),
            shard_name: "s".into(),
            db_name: "d".into(),
            collection_name: "c".into(),
            partition_name: "p".into(),
            db_id: 1,
            collection_id: 2,
            partition_id: 3,
            timestamps: vec![100, 200],
            num_rows: 2,
            primary_keys: Some(Ids::strings(vec!["a".into(), "bc".into()])),
            segment_id: 4,
            serialized_expr_plan: vec![1, 2].into(),
            ..DeleteRequest::default()
        }),
    );
}

#[test]
fn time_tick() {
    golden(
        concat!("0a 24 08 b0 09 ", base_rest!()),
        MsgBody::TimeTick(TimeTickMsg {
            base: base(MsgType::TimeTick),
        }),
    );
}

#[test]
fn create_collection() {
    golden(
        concat!(
            "0a 23 08 64 ",
            base_rest!(),
            "12 01 64 1a 01 63 22 01 70", // db_name "d", collectionName "c", partitionName "p"
            "28 01 30 02 38 03",          // dbID 1, collectionID 2, partitionID 3
            "42 03 0a 01 63",             // schema (deprecated bytes)
            "4a 02 76 30 4a 02 76 31",    // virtualChannelNames ["v0", "v1"]
            "52 02 70 30",                // physicalChannelNames ["p0"]
            "5a 03 03 ac 02",             // partitionIDs [3, 300]
            "62 01 70",                   // partitionNames ["p"]
            "6a 03 0a 01 63",             // collection_schema (opaque CollectionSchema)
        ),
        MsgBody::CreateCollection(CreateCollectionRequest {
            base: base(MsgType::CreateCollection),
            db_name: "d".into(),
            collection_name: "c".into(),
            partition_name: "p".into(),
            db_id: 1,
            collection_id: 2,
            partition_id: 3,
            schema: vec![0x0a, 0x01, 0x63],
            virtual_channel_names: vec!["v0".into(), "v1".into()],
            physical_channel_names: vec!["p0".into()],
            partition_ids: vec![3, 300],
            partition_names: vec!["p".into()],
            collection_schema: Some(vec![0x0a, 0x01, 0x63]),
        }),
    );
}

#[test]
fn drop_collection() {
    golden(
        concat!(
            "0a 23 08 65 ",
            base_rest!(),
            "12 01 64 1a 01 63", // db_name "d", collectionName "c"
            "20 01 28 02",       // dbID 1, collectionID 2
        ),
        MsgBody::DropCollection(DropCollectionRequest {
            base: base(MsgType::DropCollection),
            db_name: "d".into(),
            collection_name: "c".into(),
            db_id: 1,
            collection_id: 2,
        }),
    );
}

/// db_name "d" (2), collection_name "c" (3), partition_name "p" (4), dbID 1 (5),
/// collectionID 2 (6), partitionID 3 (7).
const PARTITION_FIELDS: &str = "12 01 64 1a 01 63 22 01 70 28 01 30 02 38 03";

#[test]
fn create_and_drop_partition() {
    golden(
        &format!("0a 24 08 c8 01 {} {PARTITION_FIELDS}", base_rest!()),
        MsgBody::CreatePartition(CreatePartitionRequest {
            base: base(MsgType::CreatePartition),
            db_name: "d".into(),
            collection_name: "c".into(),
            partition_name: "p".into(),
            db_id: 1,
            collection_id: 2,
            partition_id: 3,
        }),
    );
    golden(
        &format!("0a 24 08 c9 01 {} {PARTITION_FIELDS}", base_rest!()),
        MsgBody::DropPartition(DropPartitionRequest {
            base: base(MsgType::DropPartition),
            db_name: "d".into(),
            collection_name: "c".into(),
            partition_name: "p".into(),
            db_id: 1,
            collection_id: 2,
            partition_id: 3,
        }),
    );
}

#[test]
fn data_node_tt() {
    golden(
        concat!(
            "0a 24 08 b8 09 ",
            base_rest!(),
            "12 02 63 68",       // channel_name "ch"
            "18 64",             // timestamp 100
            "22 04 08 04 10 02", // segments_stats [{4, 2}
            "22 02 08 05",       //                 {5, 0}]
        ),
        MsgBody::DataNodeTt(DataNodeTtMsg {
            base: base(MsgType::DataNodeTt),
            channel_name: "ch".into(),
            timestamp: 100,
            segments_stats: vec![
                SegmentStats {
                    segment_id: 4,
                    num_rows: 2,
                },
                SegmentStats {
                    segment_id: 5,
                    num_rows: 0,
                },
            ],
        }),
    );
}

#[test]
fn unknown_kind_keeps_every_byte() {
    // msg_type 7777, then fields no msgstream type knows (2: "x", 99: 1).
    let fixture = "0a 03 08 e1 3c 12 01 78 98 06 01";
    golden(
        fixture,
        MsgBody::Unknown(CustomMsg {
            base: MsgBase::new(7777, 0, 0),
            payload: hex(fixture).into(),
        }),
    );
}

#[test]
fn position_with_wal_name() {
    // channel_name "ch" (1), msg_id [00 01] (2), msg_group "g" (3), timestamp 100 (4),
    // WAL_name Test = 999 (5).
    let bytes = hex("0a 02 63 68 12 02 00 01 1a 01 67 20 64 28 e7 07");
    let position = MsgPosition::from_bytes(&bytes).expect("position decodes");
    assert_eq!(
        position,
        MsgPosition {
            channel_name: "ch".into(),
            msg_id: crate::base::MessageId::from_backend_bytes([0, 1]),
            msg_group: "g".into(),
            timestamp: 100,
            wal_name: WalName::Test as i32,
        }
    );
    assert_eq!(position.to_bytes(), bytes);
}
