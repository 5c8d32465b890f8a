//! A topic's size estimate (the admin page's size column): RocksDB's approximate size of the
//! topic's key ranges in table files, so each topic counts its own messages only.

use msgstream::mq::{Client, ProducerMessage};
use msgstream_rocksmq::{Rocksmq, RocksmqClient, RocksmqOptions};

/// Bytes that do not compress, so the stored size is close to the payload size.
fn noise(len: usize, mut state: u64) -> Vec<u8> {
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

#[tokio::test]
async fn each_topic_counts_its_own_stored_bytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut options = RocksmqOptions::new(dir.path());
    options.retention_interval = None;
    let mq = Rocksmq::open(options.clone()).expect("open");
    for topic in ["a", "b", "c"] {
        mq.create_topic(topic).expect("topic");
    }
    let batch = (0..256)
        .map(|i| ProducerMessage::new(noise(4096, i + 1)))
        .collect();
    mq.produce("b", batch).await.expect("produce");
    mq.close();

    // Reopening flushes the recovered log into a table, where sizes are estimated.
    let client = RocksmqClient::from(Rocksmq::open(options).expect("reopen"));
    let stored = client.topic_size_bytes("b").await.expect("size of b");
    assert!(
        (900 * 1024..=1200 * 1024).contains(&stored),
        "1 MiB of payloads: {stored} bytes"
    );
    for empty in ["a", "c"] {
        assert_eq!(
            client.topic_size_bytes(empty).await.expect("size"),
            0,
            "{empty}"
        );
    }
    match client.topic_size_bytes("missing").await {
        Err(msgstream::Error::UnknownChannel { channel }) => assert_eq!(channel, "missing"),
        other => panic!("expected UnknownChannel, got {other:?}"),
    }
    client.close().await;
}
