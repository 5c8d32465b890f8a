//! Arbitrary bytes from the wire are errors, never panics: frame splitting, command decoding
//! (both header forms), stored messages, routes and properties.

use bytes::{BufMut, Bytes, BytesMut};
use msgstream_rocketmq::protocol::route::TopicRoute;
use msgstream_rocketmq::protocol::{properties, stored};
use msgstream_rocketmq::remoting::codec::{split_frame, Command, MAX_FRAME};
use proptest::prelude::*;

proptest! {
    #[test]
    fn frames_and_commands(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let mut buf = BytesMut::from(&bytes[..]);
        while let Ok(Some(frame)) = split_frame(&mut buf, MAX_FRAME) {
            let _ = Command::decode(frame);
        }
        let _ = Command::decode(Bytes::from(bytes));
    }

    #[test]
    fn headers_of_either_form(ser in 0u8..3, header in proptest::collection::vec(any::<u8>(), 0..256)) {
        let mut frame = BytesMut::new();
        frame.put_u32((u32::from(ser) << 24) | header.len() as u32);
        frame.put_slice(&header);
        let _ = Command::decode(frame.freeze());
    }

    #[test]
    fn stored_messages_routes_and_properties(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = stored::decode_all(Bytes::from(bytes.clone()), 1 << 20);
        let _ = TopicRoute::parse("t", &bytes);
        let _ = properties::decode(&String::from_utf8_lossy(&bytes));
    }
}
