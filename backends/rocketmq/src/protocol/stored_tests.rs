use super::*;
use crate::protocol::compression::{Codec, COMPRESSED_FLAG};

const LIMIT: usize = 1 << 20;

/// Builds a record the way a broker stores it.
fn record(offset: i64, body: &[u8], topic: &str, props: &str, crc: Option<i32>) -> BytesMut {
    record_with(offset, body, 0, topic, props, crc)
}

/// A record with `sysflag` (compression bits) over `body` as stored.
fn record_with(
    offset: i64,
    body: &[u8],
    sysflag: i32,
    topic: &str,
    props: &str,
    crc: Option<i32>,
) -> BytesMut {
    let mut r = BytesMut::new();
    r.put_i32(0);
    r.put_i32(MAGIC_V1);
    r.put_i32(crc.unwrap_or((crc32fast::hash(body) & 0x7FFF_FFFF) as i32));
    r.put_i32(2);
    r.put_i32(0);
    r.put_i64(offset);
    r.put_i64(1000 + offset);
    r.put_i32(sysflag);
    r.put_i64(111);
    r.put_slice(&[127, 0, 0, 1]);
    r.put_i32(5555);
    r.put_i64(222);
    r.put_slice(&[127, 0, 0, 1]);
    r.put_i32(10911);
    r.put_i32(3);
    r.put_i64(0);
    r.put_i32(body.len() as i32);
    r.put_slice(body);
    r.put_u8(topic.len() as u8);
    r.put_slice(topic.as_bytes());
    r.put_i16(props.len() as i16);
    r.put_slice(props.as_bytes());
    let total = r.len() as i32;
    r[..4].copy_from_slice(&total.to_be_bytes());
    r
}

#[test]
fn decodes_records_with_crc_and_properties() {
    let mut body = record(
        0,
        b"hello",
        "t",
        "UNIQ_KEY\u{1}K1\u{2}TAGS\u{1}a\u{2}",
        None,
    );
    body.extend_from_slice(&record(1, b"", "t", "", None));
    let msgs = decode_all(body.freeze(), LIMIT).expect("decode");
    assert_eq!(msgs.len(), 2);
    let m = &msgs[0];
    assert_eq!(
        (m.queue_id, m.queue_offset, m.commit_log_offset),
        (2, 0, 1000)
    );
    assert_eq!(
        (m.born_timestamp, m.store_timestamp, m.reconsume_times),
        (111, 222, 3)
    );
    assert_eq!((&m.body[..], m.topic.as_str()), (&b"hello"[..], "t"));
    assert_eq!((m.msg_id(), m.tag()), ("K1", Some("a")));
    assert_eq!(msgs[1].msg_id(), "7F00000100002A9F00000000000003E9");
}

#[test]
fn bad_crc_truncation_and_magic_are_errors() {
    let bad_crc = record(0, b"hello", "t", "", Some(12345));
    assert_eq!(
        decode_all(bad_crc.freeze(), LIMIT),
        Err(RecordError {
            queue_offset: Some(0),
            detail: "body CRC mismatch".into()
        })
    );
    let whole = record(0, b"hello", "t", "a\u{1}b\u{2}", None).freeze();
    for cut in 1..whole.len() {
        assert!(
            decode_all(whole.slice(..cut), LIMIT).is_err(),
            "cut at {cut}"
        );
    }
    let mut magic = record(0, b"x", "t", "", None);
    magic[4..8].copy_from_slice(&7i32.to_be_bytes());
    assert!(decode_all(magic.freeze(), LIMIT).is_err());
}

#[test]
fn batch_layout() {
    let b = encode_batch(&[(Bytes::from_static(b"ab"), "k\u{1}v\u{2}".into())]).expect("encode");
    assert_eq!(b.len(), 20 + 2 + 2 + 4);
    assert_eq!(&b[..4], &(b.len() as i32).to_be_bytes());
}

#[test]
fn compressed_bodies_are_decompressed_per_sysflag() {
    let body: Vec<u8> = (0..50_000u32).map(|i| (i % 97) as u8).collect();
    let mut all = BytesMut::new();
    let codecs = [Codec::Zlib, Codec::Lz4, Codec::Zstd];
    for (i, codec) in codecs.iter().enumerate() {
        let packed = super::super::compression::tests::java_compress(*codec, &body);
        all.extend_from_slice(&record_with(
            i as i64,
            &packed,
            codec.sysflag(),
            "t",
            "",
            None,
        ));
    }
    let legacy = super::super::compression::tests::java_compress(Codec::Zlib, &body);
    all.extend_from_slice(&record_with(3, &legacy, COMPRESSED_FLAG, "t", "", None));
    let msgs = decode_all(all.freeze(), LIMIT).expect("decode");
    assert_eq!(msgs.len(), 4);
    for m in &msgs {
        assert_eq!(&m.body[..], &body[..], "offset {}", m.queue_offset);
    }
}

#[test]
fn undecodable_compressed_records_name_their_offset() {
    let good = record(4, b"fine", "t", "", None);
    let mut unknown = good.clone();
    unknown.extend_from_slice(&record_with(5, b"x", 0x401, "t", "", None));
    let mut broken = good.clone();
    broken.extend_from_slice(&record_with(5, b"not zlib", COMPRESSED_FLAG, "t", "", None));
    let bomb = super::super::compression::zlib(&vec![0; 2 * LIMIT]).expect("zlib");
    let mut big = good.clone();
    big.extend_from_slice(&record_with(5, &bomb, COMPRESSED_FLAG, "t", "", None));
    let mut cut = good;
    cut.extend_from_slice(&[0, 0, 0]);
    for (what, body, offset) in [
        ("unknown codec", unknown, 5),
        ("not zlib", broken, 5),
        ("too large", big, 5),
        ("truncated", cut, 5),
    ] {
        let body = body.freeze();
        let err = decode_all(body.clone(), LIMIT).expect_err(what);
        assert_eq!(err.queue_offset, Some(offset), "{what}: {err}");
        // The good record before it is kept.
        let (good, bad) = decode_prefix(body, LIMIT);
        assert_eq!(good.len(), 1, "{what}");
        assert_eq!(good[0].queue_offset, 4);
        assert_eq!(bad, Some(err));
    }
}
