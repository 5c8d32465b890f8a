//! Records written the way other RocketMQ clients write them: a raw SEND_MESSAGE_V2 request with
//! the body and sysflag given as they are (compressed or not), and the stored record read back
//! raw by a PULL_MESSAGE, for what the decoded message does not show (its sysflag).

use std::io::Write;
use std::time::Duration;

use bytes::Bytes;
use msgstream_rocketmq::protocol::codes;
use msgstream_rocketmq::protocol::compression::Codec;
use msgstream_rocketmq::remoting::{Command, Remoting, RemotingOptions};
use msgstream_rocketmq::{Admin, MessageQueue};

const TIMEOUT: Duration = Duration::from_secs(5);

/// `body` compressed as the Java client's compressor of `codec` writes it (zlib stream, LZ4
/// frame, zstd frame).
pub fn java_compress(codec: Codec, body: &[u8]) -> Vec<u8> {
    match codec {
        Codec::Zlib => {
            let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(5));
            e.write_all(body).expect("zlib");
            e.finish().expect("zlib")
        }
        Codec::Lz4 => {
            let mut e = lz4_flex::frame::FrameEncoder::new(Vec::new());
            e.write_all(body).expect("lz4");
            e.finish().expect("lz4")
        }
        Codec::Zstd => {
            ruzstd::encoding::compress_to_vec(body, ruzstd::encoding::CompressionLevel::Fastest)
        }
    }
}

/// Bytes that compress somewhat, like real payloads: pseudo-random words of a small vocabulary.
pub fn payload(len: usize, seed: u64) -> Vec<u8> {
    const WORDS: [&str; 16] = [
        "vector",
        "insert",
        "row",
        "segment",
        "channel",
        "delete",
        "float",
        "id",
        "tick",
        "collection",
        "partition",
        "field",
        "primary",
        "key",
        "time",
        "stamp",
    ];
    let mut x = seed | 1;
    let mut out = Vec::with_capacity(len + 16);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(WORDS[(x % 16) as usize].as_bytes());
        out.push(b' ' + (x >> 60) as u8);
    }
    out.truncate(len);
    out
}

/// The master address of the broker holding `mq`.
pub async fn broker_addr(admin: &Admin, mq: &MessageQueue) -> String {
    let route = admin
        .name_servers()
        .refresh(&mq.topic)
        .await
        .expect("route");
    route
        .address(&mq.broker)
        .expect("broker address")
        .to_owned()
}

/// Stores `body` in `mq` exactly as given, with `sysflag`; returns its queue offset.
pub async fn send(admin: &Admin, mq: &MessageQueue, body: Vec<u8>, sysflag: i32) -> i64 {
    let remoting = Remoting::new(RemotingOptions::default(), None);
    let command = Command::request(
        codes::SEND_MESSAGE_V2,
        [
            ("a", "java-like-producer".to_owned()),
            ("b", mq.topic.clone()),
            ("c", "TBW102".to_owned()),
            ("d", "4".to_owned()),
            ("e", mq.queue_id.to_string()),
            ("f", sysflag.to_string()),
            ("g", "0".to_owned()),
            ("h", "0".to_owned()),
            ("i", "WAIT\u{1}true\u{2}".to_owned()),
            ("j", "0".to_owned()),
            ("k", "false".to_owned()),
            ("m", "false".to_owned()),
            ("n", mq.broker.clone()),
        ],
    )
    .with_body(Bytes::from(body));
    let addr = broker_addr(admin, mq).await;
    let response = remoting.call(&addr, command, TIMEOUT).await.expect("send");
    remoting.close();
    response.num("queueOffset").expect("queue offset")
}

/// The stored record at `offset` of `mq` as the broker returns it: (sysflag, stored body).
pub async fn stored_record(admin: &Admin, mq: &MessageQueue, offset: i64) -> (i32, Vec<u8>) {
    let remoting = Remoting::new(RemotingOptions::default(), None);
    let command = Command::request(
        codes::PULL_MESSAGE,
        [
            ("consumerGroup", "raw-reader".to_owned()),
            ("topic", mq.topic.clone()),
            ("queueId", mq.queue_id.to_string()),
            ("queueOffset", offset.to_string()),
            ("maxMsgNums", "1".to_owned()),
            ("sysFlag", "4".to_owned()),
            ("commitOffset", "0".to_owned()),
            ("suspendTimeoutMillis", "0".to_owned()),
            ("subscription", "*".to_owned()),
            ("subVersion", "0".to_owned()),
            ("expressionType", "TAG".to_owned()),
        ],
    );
    let addr = broker_addr(admin, mq).await;
    // rocketmq-rust makes an acknowledged message readable a moment later: until then the pull
    // answers OffsetOverflowOne. Pull again until it is there, within the test's bound.
    let deadline = std::time::Instant::now() + TIMEOUT;
    let response = loop {
        match remoting.call(&addr, command.clone(), TIMEOUT).await {
            Ok(response) => break response,
            Err(_) if std::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            Err(e) => panic!("pull: {e:?}"),
        }
    };
    remoting.close();
    let r = &response.body[..];
    assert!(r.len() > 100, "a record at offset {offset}");
    let sysflag = i32::from_be_bytes([r[36], r[37], r[38], r[39]]);
    // IPv4 hosts: size, magic, CRC, queue, flag (20), queue and commit-log offsets (36),
    // sysflag, born time, born host (56), store time, store host (72), reconsume times,
    // prepared offset: the body's length at 84.
    let at = 84;
    let len = i32::from_be_bytes([r[at], r[at + 1], r[at + 2], r[at + 3]]) as usize;
    (sysflag, r[at + 4..at + 4 + len].to_vec())
}
