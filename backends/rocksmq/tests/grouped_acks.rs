//! Grouped acks (`AckWrite::Grouped`) against a real RocksDB: `ack` checks and stages, the
//! background thread writes within the interval, and closing a consumer, subscribing again,
//! closing or dropping the queue write what is staged first. A seek discards what was
//! staged before it.

use std::time::{Duration, Instant};

use msgstream::mq::{Client, Consumer, ConsumerOptions, Message, ProducerMessage};
use msgstream::Error;
use msgstream_rocksmq::{AckWrite, Rocksmq, RocksmqClient, RocksmqOptions};

fn options(dir: &tempfile::TempDir, within: Duration) -> RocksmqOptions {
    let mut options = RocksmqOptions::new(dir.path());
    options.retention_interval = None;
    options.ack_write = AckWrite::Grouped(within);
    options
}

/// A client over a queue whose topic `t` holds ten messages (ids 1..=10), and a consumer of
/// subscription `g` that received the first `received` of them.
async fn consumer_with(
    dir: &tempfile::TempDir,
    within: Duration,
    received: usize,
) -> (RocksmqClient, Box<dyn Consumer>, Vec<Message>) {
    let client = RocksmqClient::open(options(dir, within)).expect("open");
    let mut consumer = client
        .subscribe(ConsumerOptions::new("t", "g"))
        .await
        .expect("subscribe");
    let producer = client.create_producer("t").await.expect("producer");
    for i in 0..10 {
        producer
            .send(ProducerMessage::new(format!("{i}")))
            .await
            .expect("send");
    }
    let mut messages = Vec::new();
    while messages.len() < received {
        let batch = consumer
            .recv_batch(received - messages.len())
            .await
            .expect("recv");
        messages.extend(batch);
    }
    (client, consumer, messages)
}

fn position(engine: &Rocksmq) -> u64 {
    engine.committed_position("t", "g").expect("position")
}

/// Waits until the background thread has written position `expected` of `g` (no event
/// announces its writes); fails after 30 s.
async fn written(engine: &Rocksmq, expected: u64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while position(engine) != expected {
        assert!(
            Instant::now() < deadline,
            "position {expected} never written (now {})",
            position(engine)
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn the_background_thread_writes_a_grouped_ack_within_its_interval() {
    let dir = tempfile::tempdir().expect("tempdir");
    let within = Duration::from_millis(300);
    let (client, consumer, messages) = consumer_with(&dir, within, 5).await;
    let engine = client.engine().clone();
    let acked = Instant::now();
    consumer.ack(&messages[2]).await.expect("ack 3");
    consumer.ack(&messages[4]).await.expect("ack 5");
    assert_eq!(position(&engine), 0, "staged by `ack`, not written");
    // Nothing else is called: the thread alone writes the acks.
    written(&engine, 6).await;
    assert!(
        acked.elapsed() >= within,
        "written after the interval, not per ack"
    );
    // Reopened without `close`: what the thread wrote is in the database.
    drop(consumer);
    drop(client);
    drop(engine);
    let mq = Rocksmq::open(options(&dir, within)).expect("reopen");
    assert_eq!(position(&mq), 6);
}

#[tokio::test]
async fn closing_the_consumer_writes_its_grouped_acks_at_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (client, mut consumer, messages) = consumer_with(&dir, Duration::from_secs(60), 4).await;
    consumer.ack(&messages[3]).await.expect("ack");
    assert_eq!(position(client.engine()), 0, "staged");
    consumer.close().await;
    assert_eq!(position(client.engine()), 5, "written by close");
    assert!(matches!(
        consumer.ack(&messages[3]).await,
        Err(Error::Closed(_))
    ));
}

#[tokio::test]
async fn subscribing_again_starts_after_every_grouped_ack() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (client, consumer, messages) = consumer_with(&dir, Duration::from_secs(60), 3).await;
    consumer.ack(&messages[2]).await.expect("ack");
    // Dropped without `close`: its lease goes, its ack stays staged until the subscribe.
    drop(consumer);
    let mut again = client
        .subscribe(ConsumerOptions::new("t", "g"))
        .await
        .expect("subscribe again");
    let next = again.recv().await.expect("recv").expect("a message");
    assert_eq!(
        &next.payload[..],
        b"3",
        "the fourth message: nothing acked comes back"
    );
}

#[tokio::test]
async fn closing_or_dropping_the_queue_writes_grouped_acks() {
    for close in [true, false] {
        let dir = tempfile::tempdir().expect("tempdir");
        let within = Duration::from_secs(60);
        let (client, consumer, messages) = consumer_with(&dir, within, 6).await;
        consumer.ack(&messages[5]).await.expect("ack");
        if close {
            client.close().await;
        }
        drop(consumer);
        drop(client);
        let mq = Rocksmq::open(options(&dir, within)).expect("reopen");
        assert_eq!(position(&mq), 7, "close: {close}");
    }
}

#[tokio::test]
async fn a_seek_discards_the_grouped_acks_made_before_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (client, mut consumer, messages) = consumer_with(&dir, Duration::from_secs(60), 5).await;
    consumer.ack(&messages[4]).await.expect("ack");
    consumer
        .seek(&messages[1].id, true)
        .await
        .expect("seek back");
    // What the background thread would do: the staged ack from before the seek is gone.
    client.engine().flush_acks().expect("flush");
    assert_eq!(position(client.engine()), 2, "where the seek put the group");
    assert!(matches!(
        consumer.ack(&messages[4]).await,
        Err(Error::StaleDelivery(_))
    ));
    let next = consumer.recv().await.expect("recv").expect("a message");
    assert_eq!(&next.payload[..], b"1");
}

#[tokio::test]
async fn a_grouping_interval_above_a_minute_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let refused = Rocksmq::open(options(
        &dir,
        AckWrite::MAX_GROUPING + Duration::from_millis(1),
    ));
    assert!(
        matches!(&refused, Err(Error::InvalidArgument(m)) if m.contains("grouping")),
        "{refused:?}"
    );
    Rocksmq::open(options(&dir, AckWrite::MAX_GROUPING)).expect("a minute is allowed");
}

#[tokio::test]
async fn a_failed_group_write_keeps_the_thread_writing_the_next_acks() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Longer than the longest retry pause, so that the pause after a failure is bounded by it.
    let within = Duration::from_millis(1100);
    let (client, _consumer, _messages) = consumer_with(&dir, within, 0).await;
    let engine = client.engine().clone();
    // A group that does not exist fails its write (staging does not read the record); the
    // other group's ack is written by the same write, and the error is logged, not fatal.
    engine
        .ack_as_configured("t", "ghost", 2)
        .expect("checked, staged");
    engine.ack_as_configured("t", "g", 3).expect("staged");
    written(&engine, 4).await;
    engine.ack_as_configured("t", "g", 5).expect("staged");
    written(&engine, 6).await;
}

/// Closing the queue while a consumer acks: every ack that returned `Ok` is in the reopened
/// database (close writes what is staged and refuses staging after that write), at whatever
/// moment of the acking the close lands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ack_that_returned_survives_a_concurrent_close() {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    for round in 0..12u64 {
        let dir = tempfile::tempdir().expect("tempdir");
        let within = Duration::from_secs(60);
        let client = RocksmqClient::open(options(&dir, within)).expect("open");
        let mut consumer = client
            .subscribe(ConsumerOptions::new("t", "g"))
            .await
            .expect("subscribe");
        let producer = client.create_producer("t").await.expect("producer");
        let batch = (0..2_000).map(|_| ProducerMessage::new("m")).collect();
        producer.send_batch(batch).await.expect("send");
        let mut messages = Vec::new();
        while messages.len() < 2_000 {
            messages.extend(consumer.recv_batch(2_000).await.expect("recv"));
        }
        let acked = Arc::new(AtomicU64::new(0));
        let acker = consumer.acker();
        let acking = {
            let acked = acked.clone();
            tokio::spawn(async move {
                for (n, message) in messages.iter().enumerate() {
                    if acker.ack(message).await.is_err() {
                        break;
                    }
                    acked.store(n as u64 + 1, Ordering::Release);
                }
            })
        };
        // Close once the acker is `round`/12 of the way through (an event, not a sleep).
        let close_after = 1 + round * 2_000 / 12;
        while acked.load(Ordering::Acquire) < close_after {
            tokio::task::yield_now().await;
        }
        client.engine().close();
        acking.await.expect("acking task");
        let returned = acked.load(Ordering::Acquire);
        drop(consumer);
        drop(client);
        let mq = Rocksmq::open(options(&dir, within)).expect("reopen");
        assert!(
            position(&mq) > returned,
            "round {round}: acks up to message {returned} returned Ok, the position is {}",
            position(&mq)
        );
    }
}
