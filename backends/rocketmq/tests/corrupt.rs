//! A record that cannot be decoded ends the consumer's stream with a typed error within
//! seconds, naming the channel and the message, instead of a pull retried forever: a body whose
//! compression is broken, and bytes changed in the broker's commit log on disk.

mod support;

use std::io::{Read, Seek, SeekFrom, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use msgstream::mq::{
    Client, Consumer, ConsumerOptions, InitialPosition, MessageId, ProducerMessage,
};
use msgstream::msg::{MsgBody, MsgPack};
use msgstream::stream::{MsgStream, StreamOptions};
use msgstream::testkit::{insert, row_id, within};
use msgstream::Error;
use msgstream_rocketmq::protocol::compression::{Codec, COMPRESSED_FLAG};
use msgstream_rocketmq::RocketMqClient;
use support::raw;

/// Receives until an error, within a few seconds; returns the messages before it and the error.
async fn until_error(consumer: &mut Box<dyn Consumer>) -> (Vec<Vec<u8>>, Error) {
    let started = Instant::now();
    let mut received = Vec::new();
    loop {
        match tokio::time::timeout(Duration::from_secs(10), consumer.recv()).await {
            Ok(Ok(Some(message))) => received.push(message.payload.to_vec()),
            Ok(Ok(None)) => panic!("the consumer closed instead of failing"),
            Ok(Err(error)) => {
                assert!(
                    started.elapsed() < Duration::from_secs(10),
                    "within seconds"
                );
                return (received, error);
            }
            Err(_) => panic!("no error within 10 s: the pull is retried instead"),
        }
    }
}

fn subscription(channel: &str) -> ConsumerOptions {
    ConsumerOptions::new(channel, "s").with_initial_position(InitialPosition::Earliest)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undecodable_compressed_bodies_end_the_stream() {
    let client = RocketMqClient::connect(support::shared().config())
        .await
        .expect("connect");
    let admin = client.admin();
    for (what, sysflag, body) in [
        (
            "not zlib",
            COMPRESSED_FLAG,
            b"this is not a zlib stream".to_vec(),
        ),
        ("unknown codec", COMPRESSED_FLAG | (5 << 8), vec![1, 2, 3]),
        (
            "truncated lz4",
            Codec::Lz4.sysflag(),
            raw::java_compress(Codec::Lz4, &raw::payload(100_000, 9))[..2000].to_vec(),
        ),
        (
            "too large once inflated",
            Codec::Zstd.sysflag(),
            raw::java_compress(Codec::Zstd, &vec![0; 5 * 1024 * 1024]),
        ),
    ] {
        let channel = support::unique("corrupt-body");
        let producer = client.create_producer(&channel).await.expect("producer");
        producer
            .send(ProducerMessage::new("before"))
            .await
            .expect("send");
        let route = admin.name_servers().refresh(&channel).await.expect("route");
        raw::send(admin, &route.read_queues[0], body, sysflag).await;
        producer
            .send(ProducerMessage::new("after"))
            .await
            .expect("send");
        let mut consumer = client.subscribe(subscription(&channel)).await.expect("sub");
        let (received, error) = until_error(&mut consumer).await;
        assert_eq!(received, vec![b"before".to_vec()], "{what}");
        match &error {
            Error::Corrupt { channel: c, id, .. } => {
                assert_eq!((c, id), (&channel, &MessageId::from_u64(1)), "{what}");
            }
            other => panic!("{what}: {other:?}"),
        }
        assert!(error.is_permanent());
        // It stays failed (no hang, no skip) until a seek past it.
        assert!(matches!(consumer.recv().await, Err(Error::Corrupt { .. })));
        consumer
            .seek(&MessageId::from_u64(1), false)
            .await
            .expect("seek past it");
        let next = within("the message after", consumer.recv())
            .await
            .expect("recv")
            .expect("open");
        assert_eq!(&next.payload[..], b"after", "{what}");
        consumer.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_byte_changed_in_the_commit_log_ends_the_stream() {
    let cluster = support::Cluster::start();
    let store = cluster.store_dir(0).expect("own cluster");
    let client = RocketMqClient::connect(cluster.config())
        .await
        .expect("connect");
    let channel = support::unique("corrupt-log");
    let client: Arc<dyn Client> = Arc::new(client);
    let marker = support::unique("flip-me");
    let mut marked = insert(2, 2, 0);
    if let MsgBody::Insert(mut rows) = marked.body().clone() {
        rows.collection_name = marker.clone();
        marked.set_body(MsgBody::Insert(rows));
    }
    let mut out = MsgStream::new(client.clone(), StreamOptions::default());
    out.as_producer(&[channel.as_str()])
        .await
        .expect("producer");
    out.produce(&MsgPack {
        msgs: vec![insert(1, 1, 0), marked, insert(3, 3, 0)],
        ..MsgPack::default()
    })
    .await
    .expect("produce");
    flip_byte_of(&store.join("commitlog"), marker.as_bytes());
    let mut stream = MsgStream::new(client, StreamOptions::default());
    stream
        .as_consumer(&[channel.as_str()], "s", InitialPosition::Earliest)
        .await
        .expect("consumer");
    let started = Instant::now();
    let mut rows = Vec::new();
    let error = loop {
        match within("a pack or the error", stream.next_pack()).await {
            Some(Ok(pack)) => rows.extend(pack.msgs.iter().map(row_id)),
            Some(Err(error)) => break error,
            None => panic!("the stream ended without the error"),
        }
    };
    assert_eq!(rows, vec![1], "the message before it is delivered");
    assert!(
        matches!(&error, Error::Corrupt { channel: c, id, .. } if *c == channel && *id == MessageId::from_u64(1)),
        "{error:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(
        within("the end", stream.next_pack()).await.is_none(),
        "the stream ends at the error"
    );
    stream.close().await;
}

/// Changes one byte of the only occurrence of `needle` in the files of `dir`, as a disk error
/// would (the broker maps these files: it reads the change).
fn flip_byte_of(dir: &std::path::Path, needle: &[u8]) {
    for entry in std::fs::read_dir(dir).expect("commit log dir") {
        let path = entry.expect("entry").path();
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .expect("open");
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).expect("read");
        if let Some(at) = bytes.windows(needle.len()).position(|w| w == needle) {
            file.seek(SeekFrom::Start(at as u64)).expect("seek");
            file.write_all(&[bytes[at] ^ 0x20]).expect("write");
            file.sync_all().expect("sync");
            return;
        }
    }
    panic!(
        "{} not found in {}",
        String::from_utf8_lossy(needle),
        dir.display()
    );
}
