//! Retention against a real RocksDB: small pages, a tiny retention age, passes run explicitly.

use std::time::Duration;

use msgstream::mq::{InitialPosition, ProducerMessage};
use msgstream_rocksmq::{Rocksmq, RocksmqOptions};

const RETENTION: Duration = Duration::from_millis(300);

/// 50-byte messages and 100-byte pages: every two messages close a page.
fn open(dir: &tempfile::TempDir, retention: Duration, size_budget: u64) -> Rocksmq {
    let mut options = RocksmqOptions::new(dir.path());
    options.retention_interval = None;
    options.page_size_bytes = 100;
    options.retention = retention;
    options.retention_size_bytes = size_budget;
    Rocksmq::open(options).expect("open")
}

async fn fill(mq: &Rocksmq, topic: &str, groups: &[&str]) {
    mq.create_topic(topic).expect("topic");
    for group in groups {
        mq.create_consumer_group(topic, group, InitialPosition::Earliest)
            .expect("group");
    }
    let batch = (0..10)
        .map(|_| ProducerMessage::new(vec![7u8; 50]))
        .collect();
    assert_eq!(mq.produce(topic, batch).await.expect("produce"), 1..11);
}

fn remaining(mq: &Rocksmq, topic: &str) -> Vec<u64> {
    let mut reader = mq.reader(topic, 0).expect("reader");
    reader
        .read(1000)
        .expect("read")
        .iter()
        .map(|m| m.id)
        .collect()
}

#[tokio::test]
async fn consumed_pages_expire_unconsumed_stay() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mq = open(&dir, RETENTION, u64::MAX);
    fill(&mq, "t", &["g"]).await;
    fill(&mq, "u", &["g"]).await;
    mq.ack("t", "g", 6).expect("ack");
    assert_eq!(
        mq.run_retention().expect("young").pages,
        0,
        "nothing is old enough yet"
    );
    tokio::time::sleep(RETENTION).await;
    let report = mq.run_retention().expect("retention");
    assert_eq!((report.pages, report.messages, report.bytes), (3, 6, 300));
    assert_eq!(remaining(&mq, "t"), [7, 8, 9, 10], "unacked pages stay");
    assert_eq!(
        remaining(&mq, "u"),
        (1..=10).collect::<Vec<_>>(),
        "topics are independent"
    );
    let mut sub = mq.subscribe("t", "g").expect("subscribe");
    assert_eq!(sub.consume(1).expect("consume")[0].id, 7);
    assert_eq!(mq.latest_message_id("t").expect("latest"), Some(10));
}

#[tokio::test]
async fn size_budget_removes_oldest_acked_pages_first() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mq = open(&dir, Duration::from_secs(3600), 250);
    fill(&mq, "s", &["fast", "slow"]).await;
    mq.ack("s", "fast", 10).expect("ack");
    mq.ack("s", "slow", 2).expect("ack");
    assert_eq!(
        mq.run_retention().expect("retention").pages,
        1,
        "only what every group acked"
    );
    assert_eq!(remaining(&mq, "s"), (3..=10).collect::<Vec<_>>());
    mq.ack("s", "slow", 10).expect("ack");
    assert_eq!(
        mq.run_retention().expect("retention").pages,
        2,
        "down to the budget"
    );
    assert_eq!(remaining(&mq, "s"), [7, 8, 9, 10]);
    assert_eq!(mq.run_retention().expect("retention").pages, 0);
}

#[tokio::test]
async fn the_open_tail_page_is_never_deleted_and_idle_groups_can_be_ignored() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut options = RocksmqOptions::new(dir.path());
    options.retention_interval = None;
    options.page_size_bytes = 100;
    options.retention = Duration::ZERO;
    options.ignore_groups_idle_for = Some(Duration::ZERO);
    let mq = Rocksmq::open(options).expect("open");
    fill(&mq, "t", &["idle"]).await;
    mq.produce("t", vec![ProducerMessage::new(vec![1u8; 10])])
        .await
        .expect("open page");
    let report = mq.run_retention().expect("retention");
    assert_eq!(
        report.pages, 5,
        "the idle group does not hold retention back"
    );
    assert_eq!(remaining(&mq, "t"), [11], "the open page stays");
}

#[tokio::test]
async fn scheduled_pass_runs_in_the_background() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut options = RocksmqOptions::new(dir.path());
    options.page_size_bytes = 100;
    options.retention = Duration::ZERO;
    options.retention_interval = Some(Duration::from_millis(20));
    let mq = Rocksmq::open(options).expect("open");
    fill(&mq, "t", &[]).await;
    let mut reader = mq.reader("t", 0).expect("reader");
    let mut progress = mq.watch_retention();
    // Every scheduled pass is announced, with running totals: await the one that removed the
    // five closed pages (the open tail page has none: all ten messages went).
    let seen = tokio::time::timeout(
        Duration::from_secs(20),
        progress.wait_for(|p| p.total.pages == 5),
    )
    .await
    .expect("a scheduled pass removed the closed pages within 20 s")
    .map(|p| *p)
    .expect("the retention thread is running");
    assert!(seen.passes >= 1);
    assert_eq!(seen.failures, 0);
    assert_eq!(seen.total.messages, 10);
    assert!(remaining(&mq, "t").is_empty());
    assert!(reader.read(10).expect("read").is_empty());
    mq.close();
}

#[tokio::test]
async fn ids_and_pages_are_recovered_at_reopen_even_with_every_message_deleted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mq = open(&dir, Duration::ZERO, u64::MAX);
    fill(&mq, "t", &[]).await;
    assert_eq!(mq.run_retention().expect("retention").pages, 5);
    assert!(
        remaining(&mq, "t").is_empty(),
        "every page was closed, so every page went"
    );
    mq.close();

    let mq = open(&dir, Duration::ZERO, u64::MAX);
    assert_eq!(mq.latest_message_id("t").expect("latest"), Some(10));
    let one = vec![ProducerMessage::new(vec![7u8; 50])];
    assert_eq!(mq.produce("t", one.clone()).await.expect("produce"), 11..12);
    mq.close();

    // The open page (one 50-byte message) is recovered: one more message closes it.
    let mq = open(&dir, Duration::ZERO, u64::MAX);
    assert_eq!(mq.produce("t", one).await.expect("produce"), 12..13);
    assert_eq!(mq.run_retention().expect("retention").pages, 1);
    assert!(remaining(&mq, "t").is_empty());
}

/// A seek (consumer, reader) below what retention left is `BelowRetention` naming the oldest id
/// still held, found at run time; never a silent continue at later data.
#[tokio::test]
async fn seeks_below_the_retention_floor_are_refused() {
    use msgstream::mq::{Client, ConsumerOptions, MessageId, ReaderOptions};
    let dir = tempfile::tempdir().expect("tempdir");
    let mq = open(&dir, Duration::from_secs(3600), 0);
    fill(&mq, "t", &["g"]).await;
    mq.ack("t", "g", 6).expect("ack");
    assert_eq!(mq.run_retention().expect("retention").messages, 6);
    let client = msgstream_rocksmq::RocksmqClient::from(mq.clone());
    let mut consumer = client
        .subscribe(ConsumerOptions::new("t", "g"))
        .await
        .expect("consumer");
    match consumer.seek(&MessageId::from_u64(3), true).await {
        Err(msgstream::Error::BelowRetention {
            channel,
            id,
            oldest,
        }) => {
            assert_eq!(channel, "t");
            assert_eq!(id, MessageId::from_u64(3));
            assert_eq!(oldest, Some(MessageId::from_u64(7)));
        }
        other => panic!("expected BelowRetention, got {other:?}"),
    }
    consumer
        .seek(&MessageId::from_u64(6), false)
        .await
        .expect("right after the floor is held");
    let reader = client
        .create_reader(ReaderOptions {
            topic: "t".into(),
            start: MessageId::from_u64(2),
            inclusive: true,
        })
        .await;
    assert!(matches!(
        reader.map(|_| ()),
        Err(msgstream::Error::BelowRetention { .. })
    ));
    // A position Milvus's rocksmq wrote (little-endian id 5) is refused loudly, never a seek to a
    // wrong place: read big-endian it is far past the end.
    let milvus = MessageId::from_backend_bytes(5u64.to_le_bytes());
    assert!(matches!(
        consumer.seek(&milvus, true).await,
        Err(msgstream::Error::PastEnd { .. })
    ));
    consumer.close().await;
    mq.close();
}
