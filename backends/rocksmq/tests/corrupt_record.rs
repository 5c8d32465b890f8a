//! Recovery scenario: a stored record that no longer decodes. Reading it is a typed
//! `Error::Corrupt` naming the channel and the id, and a stream over it ends with that error
//! instead of retrying (or skipping) forever.

use std::sync::Arc;

use msgstream::mq::{Client, ConsumerOptions, InitialPosition, ProducerMessage};
use msgstream::stream::StreamOptions;
use msgstream::tt::TtMsgStream;
use msgstream::Error;
use msgstream_rocksmq::{RocksmqClient, RocksmqOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_that_does_not_decode_is_corrupt_and_ends_the_stream() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut options = RocksmqOptions::new(dir.path());
    options.retention_interval = None;
    let client = RocksmqClient::connect(options.clone()).await.expect("open");
    let producer = client.create_producer("t").await.expect("producer");
    let mut message = ProducerMessage::new(&b"payload"[..]);
    message.properties.insert("k".into(), "v".into());
    let id = producer.send(message).await.expect("send");
    client.close().await;

    // Damage the properties record of that message behind the queue's back.
    let cfs = rocksdb::DB::list_cf(&rocksdb::Options::default(), dir.path()).expect("cfs");
    let db = rocksdb::DB::open_cf(&rocksdb::Options::default(), dir.path(), cfs).expect("raw");
    let properties = db.cf_handle("properties").expect("properties cf");
    let key = db
        .iterator_cf(properties, rocksdb::IteratorMode::Start)
        .next()
        .expect("a properties record")
        .expect("key")
        .0;
    db.put_cf(properties, key, b"\xff\xff\xff\xff")
        .expect("damage");
    drop(db);

    let client: Arc<dyn Client> = Arc::new(RocksmqClient::connect(options).await.expect("reopen"));
    let mut consumer = client
        .subscribe(ConsumerOptions::new("t", "g"))
        .await
        .expect("consumer");
    match consumer.recv().await {
        Err(Error::Corrupt {
            channel, id: bad, ..
        }) => assert_eq!((channel.as_str(), bad), ("t", id)),
        other => panic!("expected Corrupt, got {other:?}"),
    }
    consumer.close().await;

    let mut stream = TtMsgStream::new(client.clone(), StreamOptions::default());
    stream
        .as_consumer(&["t"], "tt", InitialPosition::Earliest)
        .await
        .expect("as_consumer");
    let first = tokio::time::timeout(std::time::Duration::from_secs(30), stream.next_pack())
        .await
        .expect("the stream reports instead of retrying forever");
    assert!(
        matches!(first, Some(Err(Error::Corrupt { .. }))),
        "{first:?}"
    );
    let end = tokio::time::timeout(std::time::Duration::from_secs(30), stream.next_pack())
        .await
        .expect("and then ends");
    assert!(end.is_none(), "{end:?}");
    stream.close().await;
    client.close().await;
}

/// A message key of the topic that is not 16 bytes, inside the range being read, is `Corrupt`;
/// keys of the next topic (the range's end) are never read as this topic's messages.
#[tokio::test]
async fn a_malformed_message_key_is_corrupt_and_the_next_topic_ends_the_range() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut options = RocksmqOptions::new(dir.path());
    options.retention_interval = None;
    let mq = msgstream_rocksmq::Rocksmq::open(options.clone()).expect("open");
    mq.create_topic("a").expect("a");
    mq.create_topic("b").expect("b");
    mq.produce(
        "a",
        vec![ProducerMessage::new("a1"), ProducerMessage::new("a2")],
    )
    .await
    .expect("a");
    mq.produce("b", vec![ProducerMessage::new("b1")])
        .await
        .expect("b");
    // Topic "a" reads everything it holds and none of "b"'s.
    let read = mq.reader("a", 0).expect("reader").read(10).expect("read");
    assert_eq!(read.iter().map(|m| m.id).collect::<Vec<_>>(), [1, 2]);
    mq.close();

    // A 17-byte key right after message 1 of topic "a" (its id 1): inside [1, 3).
    let cfs = rocksdb::DB::list_cf(&rocksdb::Options::default(), dir.path()).expect("cfs");
    let db = rocksdb::DB::open_cf(&rocksdb::Options::default(), dir.path(), cfs).expect("raw");
    let messages = db.cf_handle("messages").expect("messages cf");
    let (first, _) = db
        .iterator_cf(messages, rocksdb::IteratorMode::Start)
        .next()
        .expect("a message")
        .expect("key");
    let mut bad = first.to_vec();
    bad.push(0);
    db.put_cf(messages, &bad, b"x").expect("damage");
    drop(db);

    let mq = msgstream_rocksmq::Rocksmq::open(options).expect("reopen");
    let mut reader = mq.reader("a", 0).expect("reader");
    match reader.read(10) {
        Err(Error::Corrupt { channel, .. }) => assert_eq!(channel, "a"),
        other => panic!("expected Corrupt, got {other:?}"),
    }
    let from_b = mq.reader("b", 0).expect("reader").read(10).expect("read b");
    assert_eq!(from_b.len(), 1);
}
