use super::*;

fn sample() -> Command {
    let mut c = Command::request(11, [("topic", "t".to_owned()), ("queueId", "0".to_owned())])
        .with_body(&b"payload"[..]);
    c.opaque = 7;
    c.remark = Some("why".into());
    c
}

fn roundtrip(encode: fn(&Command, &mut BytesMut) -> Result<()>) {
    let command = sample();
    let mut buf = BytesMut::new();
    encode(&command, &mut buf).expect("encode");
    let frame = split_frame(&mut buf, MAX_FRAME)
        .expect("split")
        .expect("whole frame");
    assert!(buf.is_empty());
    assert_eq!(Command::decode(frame).expect("decode"), command);
}

#[test]
fn json_and_binary_headers_round_trip() {
    roundtrip(Command::encode);
    roundtrip(Command::encode_binary);
}

#[test]
fn json_header_has_what_the_rust_server_requires() {
    let mut buf = BytesMut::new();
    sample().encode(&mut buf).expect("encode");
    let hlen = (u32::from_be_bytes([buf[4], buf[5], buf[6], buf[7]]) & 0xFF_FFFF) as usize;
    let header: serde_json::Value =
        serde_json::from_slice(&buf[8..8 + hlen]).expect("header is JSON");
    assert_eq!(header["serializeTypeCurrentRPC"], "JSON");
    assert_eq!(header["extFields"]["queueId"], "0", "values are strings");
    assert_eq!(buf[4], 0, "serialize type JSON");
}

#[test]
fn server_json_with_numbers_and_nulls_decodes() {
    let header = br#"{"code":0,"flag":1,"opaque":3,"remark":null,"language":"RUST","version":474,"extFields":{"offset":"5","n":7}}"#;
    let mut frame = BytesMut::new();
    frame.put_u32(header.len() as u32);
    frame.put_slice(header);
    frame.put_slice(b"body");
    let c = Command::decode(frame.freeze()).expect("decode");
    assert!(c.is_response());
    assert_eq!((c.opaque, c.remark.as_deref()), (3, None));
    assert_eq!(c.num::<i64>("offset").expect("offset"), 5);
    assert_eq!(c.field("n"), Some("7"));
    assert_eq!(&c.body[..], b"body");
    assert!(matches!(c.num::<i64>("missing"), Err(Error::Protocol(_))));
}

#[test]
fn partial_frames_wait_for_more() {
    let mut whole = BytesMut::new();
    sample().encode(&mut whole).expect("encode");
    let mut buf = BytesMut::new();
    for (i, byte) in whole.iter().enumerate() {
        assert!(
            split_frame(&mut buf, MAX_FRAME).expect("ok").is_none(),
            "at {i}"
        );
        buf.put_u8(*byte);
    }
    assert!(split_frame(&mut buf, MAX_FRAME).expect("ok").is_some());
}

#[test]
fn oversized_negative_and_truncated_frames_are_errors() {
    let mut buf = BytesMut::new();
    buf.put_i32(MAX_FRAME as i32 + 1);
    assert!(matches!(
        split_frame(&mut buf, MAX_FRAME),
        Err(Error::FrameTooLarge { .. })
    ));
    let mut neg = BytesMut::new();
    neg.put_i32(-5);
    assert!(matches!(
        split_frame(&mut neg, MAX_FRAME),
        Err(Error::Protocol(_))
    ));
    // Header length larger than the frame.
    let mut bad = BytesMut::new();
    bad.put_u32(100);
    assert!(matches!(
        Command::decode(bad.freeze()),
        Err(Error::Protocol(_))
    ));
    // Binary header cut anywhere is an error, never a panic.
    let mut whole = BytesMut::new();
    sample().encode_binary(&mut whole).expect("encode");
    let frame = split_frame(&mut whole, MAX_FRAME)
        .expect("ok")
        .expect("frame");
    let hlen = (u32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]) & 0xFF_FFFF) as usize;
    for cut in 0..hlen {
        let mut f = BytesMut::new();
        f.put_u32((1 << 24) | cut as u32);
        f.put_slice(&frame[4..4 + cut]);
        assert!(Command::decode(f.freeze()).is_err(), "cut at {cut}");
    }
    assert!(matches!(
        Command::decode(Bytes::from_static(b"ab")),
        Err(Error::Protocol(_))
    ));
    let mut garbage = BytesMut::new();
    garbage.put_u32(3);
    garbage.put_slice(b"{{{");
    assert!(matches!(
        Command::decode(garbage.freeze()),
        Err(Error::Protocol(_))
    ));
}
