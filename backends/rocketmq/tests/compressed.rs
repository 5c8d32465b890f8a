//! Compressed records against the real broker: what Java 4.x/5.x producers write (zlib by the
//! compressed bit, and the 5.x LZ4 / ZSTD / ZLIB type bits) is consumed byte-identical, and
//! what our producer writes is laid out as Java consumers read it.

mod support;

use msgstream::mq::{Client, ConsumerOptions, InitialPosition, ProducerMessage};
use msgstream::testkit::within;
use msgstream_rocketmq::protocol::compression::{Codec, COMPRESSED_FLAG};
use msgstream_rocketmq::{RocketMqClient, RocketMqConfig};
use support::raw;

async fn connect(config: RocketMqConfig) -> RocketMqClient {
    RocketMqClient::connect(config).await.expect("connect")
}

/// The channel's queue, for the raw requests.
async fn queue_of(client: &RocketMqClient, channel: &str) -> msgstream_rocketmq::MessageQueue {
    let route = client
        .admin()
        .name_servers()
        .refresh(channel)
        .await
        .expect("route");
    route.read_queues[0].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_compressed_records_are_consumed_byte_identical() {
    let client = connect(support::shared().config()).await;
    let channel = support::unique("java-compressed");
    client.create_producer(&channel).await.expect("channel");
    let mq = queue_of(&client, &channel).await;
    let admin = client.admin();
    let layouts = [
        ("4.x zlib", Codec::Zlib, COMPRESSED_FLAG),
        ("5.x zlib", Codec::Zlib, Codec::Zlib.sysflag()),
        ("5.x lz4", Codec::Lz4, Codec::Lz4.sysflag()),
        ("5.x zstd", Codec::Zstd, Codec::Zstd.sysflag()),
    ];
    let mut sent = Vec::new();
    for (i, (what, codec, sysflag)) in layouts.iter().enumerate() {
        for len in [10 * 1024, 1024 * 1024] {
            let body = raw::payload(len, (i * 7 + len) as u64);
            let packed = raw::java_compress(*codec, &body);
            assert!(packed.len() < body.len(), "{what} compresses");
            raw::send(admin, &mq, packed, *sysflag).await;
            sent.push((*what, body));
        }
    }
    let mut consumer = client
        .subscribe(
            ConsumerOptions::new(&channel, "s").with_initial_position(InitialPosition::Earliest),
        )
        .await
        .expect("subscribe");
    for (what, body) in &sent {
        let message = within("a compressed message", consumer.recv())
            .await
            .expect("recv")
            .expect("open");
        assert_eq!(message.payload.len(), body.len(), "{what}");
        assert!(message.payload[..] == body[..], "{what}: byte-identical");
    }
    consumer.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_producer_compresses_over_the_threshold_as_java_4_does() {
    let client = connect(support::shared().config()).await;
    let channel = support::unique("our-compressed");
    let producer = client.create_producer(&channel).await.expect("producer");
    let mq = queue_of(&client, &channel).await;
    let bodies = [
        raw::payload(4096, 1),
        raw::payload(4097, 2),
        raw::payload(10 * 1024, 3),
        raw::payload(1024 * 1024, 4),
    ];
    for body in &bodies {
        producer
            .send(ProducerMessage::new(body.clone()))
            .await
            .expect("send");
    }
    // As stored: the threshold's body as it is, the larger ones a zlib stream under the bit
    // every 4.x and 5.x consumer inflates by.
    for (offset, body) in bodies.iter().enumerate() {
        let (sysflag, stored) = raw::stored_record(client.admin(), &mq, offset as i64).await;
        if body.len() <= 4096 {
            assert_eq!((sysflag & 0x701, &stored), (0, body), "offset {offset}");
        } else {
            assert_eq!(sysflag & 0x701, COMPRESSED_FLAG, "offset {offset}");
            let mut inflated = Vec::new();
            std::io::Read::read_to_end(
                &mut flate2::read::ZlibDecoder::new(&stored[..]),
                &mut inflated,
            )
            .expect("a zlib stream");
            assert!(
                inflated == *body && stored.len() < body.len(),
                "offset {offset}"
            );
        }
    }
    let mut consumer = client
        .subscribe(
            ConsumerOptions::new(&channel, "s").with_initial_position(InitialPosition::Earliest),
        )
        .await
        .expect("subscribe");
    for body in &bodies {
        let message = within("a message", consumer.recv())
            .await
            .expect("recv")
            .expect("open");
        assert!(message.payload[..] == body[..], "byte-identical");
    }
    // Compression off: stored as sent.
    let plain = connect(RocketMqConfig {
        compress_over_bytes: 0,
        ..support::shared().config()
    })
    .await;
    let producer = plain.create_producer(&channel).await.expect("producer");
    let id = producer
        .send(ProducerMessage::new(bodies[3].clone()))
        .await
        .expect("send");
    let offset = id.as_u64().expect("offset") as i64;
    let (sysflag, stored) = raw::stored_record(client.admin(), &mq, offset).await;
    assert_eq!((sysflag & 0x701, stored.len()), (0, bodies[3].len()));
    // Over the size limit: refused before sending.
    let small = connect(RocketMqConfig {
        max_message_bytes: 1000,
        ..support::shared().config()
    })
    .await;
    let producer = small.create_producer(&channel).await.expect("producer");
    assert!(matches!(
        producer.send(ProducerMessage::new(vec![0; 1001])).await,
        Err(msgstream::Error::InvalidArgument(_))
    ));
}
