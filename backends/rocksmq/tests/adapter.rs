//! The mq adapter over a real RocksDB: ids, subscriptions, acks, seeks, readers, close.

use std::sync::Arc;
use std::time::Duration;

use msgstream::mq::{
    Capabilities, Client, ConsumerOptions, InitialPosition, MessageId, ProducerMessage,
    ReaderOptions,
};
use msgstream::Error;
use msgstream_rocksmq::{RocksmqClient, RocksmqOptions};

fn open(dir: &tempfile::TempDir) -> Arc<RocksmqClient> {
    Arc::new(RocksmqClient::open(RocksmqOptions::new(dir.path())).expect("open"))
}

async fn produce(client: &RocksmqClient, topic: &str, n: usize) -> Vec<MessageId> {
    let producer = client.create_producer(topic).await.expect("producer");
    let batch = (0..n)
        .map(|i| ProducerMessage::new(format!("{i}")))
        .collect();
    producer.send_batch(batch).await.expect("send")
}

#[tokio::test]
async fn identity_and_ids() {
    let dir = tempfile::tempdir().expect("tempdir");
    let client = open(&dir);
    assert_eq!(client.backend_name(), "rocksmq");
    assert_eq!(client.capabilities(), Capabilities::ALL);
    let ids = produce(&client, "t", 3).await;
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    assert!(client.earliest_message_id() < ids[0]);
    assert_eq!(ids[0].as_bytes().len(), 8);
    let parsed = client
        .message_id_from_bytes(ids[1].as_bytes())
        .expect("parse");
    assert_eq!(parsed, ids[1]);
    for bad in [&[][..], &[1, 2, 3][..], &[0; 9][..]] {
        assert!(matches!(
            client.message_id_from_bytes(bad),
            Err(Error::Decode(_))
        ));
    }
    assert_eq!(client.list_topics().await.expect("topics"), ["t"]);
}

#[tokio::test]
async fn subscriptions_start_resume_and_ack_cumulatively() {
    let dir = tempfile::tempdir().expect("tempdir");
    let client = open(&dir);
    produce(&client, "t", 4).await;
    let latest = ConsumerOptions::new("t", "late").with_initial_position(InitialPosition::Latest);
    let mut late = client.subscribe(latest).await.expect("late");
    let mut early = client
        .subscribe(ConsumerOptions::new("t", "early"))
        .await
        .expect("early");
    let first = early.recv().await.expect("recv").expect("message");
    assert_eq!(first.payload.as_ref(), b"0");
    let third = {
        early.recv().await.expect("recv");
        early.recv().await.expect("recv").expect("message")
    };
    early.ack(&third).await.expect("cumulative ack");
    early.close().await;
    assert!(early.recv().await.expect("closed").is_none());
    assert!(matches!(early.ack(&third).await, Err(Error::Closed(_))));

    let mut again = client
        .subscribe(ConsumerOptions::new("t", "early"))
        .await
        .expect("again");
    let next = again.recv().await.expect("recv").expect("message");
    assert_eq!(
        next.payload.as_ref(),
        b"3",
        "resumes after the acked position"
    );
    assert!(matches!(
        again.ack(&third).await,
        Err(Error::StaleDelivery(_))
    ));

    produce(&client, "t", 1).await;
    let new = late.recv().await.expect("recv").expect("message");
    assert_eq!(new.payload.as_ref(), b"0", "latest sees only new messages");
    let subs = client.list_subscriptions("t").await.expect("subscriptions");
    let lags: Vec<_> = subs.iter().map(|s| (s.name.as_str(), s.lag)).collect();
    assert_eq!(lags, [("early", Some(2)), ("late", Some(1))]);
}

#[tokio::test]
async fn seek_makes_old_deliveries_stale() {
    let dir = tempfile::tempdir().expect("tempdir");
    let client = open(&dir);
    let ids = produce(&client, "t", 5).await;
    let mut consumer = client
        .subscribe(ConsumerOptions::new("t", "g"))
        .await
        .expect("sub");
    let m0 = consumer.recv().await.expect("recv").expect("message");
    consumer.seek(&ids[3], true).await.expect("seek");
    assert!(matches!(
        consumer.ack(&m0).await,
        Err(Error::StaleDelivery(_))
    ));
    let m3 = consumer.recv().await.expect("recv").expect("message");
    assert_eq!(m3.id, ids[3]);
    consumer
        .seek(&ids[0], false)
        .await
        .expect("seek back, exclusive");
    assert_eq!(consumer.recv().await.expect("recv").expect("m").id, ids[1]);
    assert_eq!(
        consumer.latest_message_id().await.expect("latest"),
        Some(ids[4].clone())
    );
    let bad = MessageId::from_backend_bytes(vec![1]);
    assert!(matches!(
        consumer.seek(&bad, true).await,
        Err(Error::Decode(_))
    ));
}

#[tokio::test]
async fn recv_is_cancel_safe_and_ends_at_close() {
    let dir = tempfile::tempdir().expect("tempdir");
    let client = open(&dir);
    let mut consumer = client
        .subscribe(ConsumerOptions::new("t", "g"))
        .await
        .expect("sub");
    // A recv abandoned while waiting loses nothing.
    assert!(
        tokio::time::timeout(Duration::from_millis(10), consumer.recv())
            .await
            .is_err()
    );
    let ids = produce(&client, "t", 2).await;
    assert_eq!(consumer.recv().await.expect("recv").expect("m").id, ids[0]);
    assert_eq!(consumer.recv().await.expect("recv").expect("m").id, ids[1]);

    let waiting = tokio::spawn(async move { consumer.recv().await });
    tokio::task::yield_now().await;
    client.close().await;
    let ended = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("woken by close")
        .expect("join");
    assert!(matches!(ended, Ok(None)));
    assert!(matches!(
        client.create_producer("t").await,
        Err(Error::Closed(_))
    ));
    assert!(matches!(client.list_topics().await, Err(Error::Closed(_))));
}

#[tokio::test]
async fn readers_start_anywhere_and_wait() {
    let dir = tempfile::tempdir().expect("tempdir");
    let client = open(&dir);
    let ids = produce(&client, "t", 3).await;
    let options = ReaderOptions {
        topic: "t".into(),
        start: ids[1].clone(),
        inclusive: false,
    };
    let mut reader = client.create_reader(options).await.expect("reader");
    assert!(reader.has_next().await.expect("has_next"));
    assert_eq!(reader.next().await.expect("next").id, ids[2]);
    assert!(!reader.has_next().await.expect("has_next"));
    let waiting = tokio::spawn(async move {
        let message = reader.next().await;
        (reader, message)
    });
    let more = produce(&client, "t", 1).await;
    let (mut reader, message) = waiting.await.expect("join");
    assert_eq!(message.expect("woken").id, more[0]);
    reader
        .seek(&client.earliest_message_id(), true)
        .await
        .expect("seek");
    assert_eq!(reader.next().await.expect("next").id, ids[0]);
    reader.close().await;
    assert!(matches!(reader.next().await, Err(Error::Closed(_))));
}

/// `send` starts the send when called (the trait's docs): on rocksmq an uncontended send is
/// written before `send` returns, so a future dropped unpolled loses only the answer. Sends
/// awaited afterwards get the next ids, and a closed producer's send is `Error::Closed`.
#[tokio::test]
async fn a_send_is_written_when_called_and_its_future_only_carries_the_answer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let client = open(&dir);
    let producer = client.create_producer("t").await.expect("producer");
    drop(producer.send(ProducerMessage::new("unpolled")));
    let next = producer
        .send(ProducerMessage::new("awaited"))
        .await
        .expect("send");
    assert_eq!(next, MessageId::from_u64(2), "the unpolled send took id 1");
    let options = ReaderOptions {
        topic: "t".into(),
        start: client.earliest_message_id(),
        inclusive: true,
    };
    let mut reader = client.create_reader(options).await.expect("reader");
    for expected in ["unpolled", "awaited"] {
        let message = reader.next().await.expect("read");
        assert_eq!(&message.payload[..], expected.as_bytes());
    }
    producer.close().await;
    assert!(matches!(
        producer.send(ProducerMessage::new("late")).await,
        Err(Error::Closed(_))
    ));
}
