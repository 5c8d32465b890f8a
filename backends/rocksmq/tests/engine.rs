//! Engine tests against a real RocksDB in a temporary directory: reopen, layout, groups, bad
//! input, closed state and the database lock.

use std::time::Duration;

use msgstream::mq::{Client, InitialPosition, ProducerMessage, Properties};
use msgstream::Error;
use msgstream_rocksmq::{Durability, Rocksmq, RocksmqClient, RocksmqOptions, FIRST_MESSAGE_ID};

fn options(dir: &tempfile::TempDir) -> RocksmqOptions {
    let mut options = RocksmqOptions::new(dir.path());
    options.retention_interval = None;
    options
}

fn messages(prefix: &str, n: usize) -> Vec<ProducerMessage> {
    (0..n)
        .map(|i| ProducerMessage::new(format!("{prefix}-{i}")))
        .collect()
}

fn payloads(batch: &[msgstream_rocksmq::StoredMessage]) -> Vec<String> {
    batch
        .iter()
        .map(|m| String::from_utf8_lossy(&m.payload).into_owned())
        .collect()
}

#[tokio::test]
async fn reopen_keeps_messages_ids_and_group_positions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mq = Rocksmq::open(options(&dir)).expect("open");
    mq.create_topic("t").expect("topic");
    let ids = mq.produce("t", messages("m", 10)).await.expect("produce");
    assert_eq!(ids, FIRST_MESSAGE_ID..FIRST_MESSAGE_ID + 10);
    mq.create_consumer_group("t", "g", InitialPosition::Earliest)
        .expect("group");
    let mut sub = mq.subscribe("t", "g").expect("subscribe");
    let half = sub.consume(5).expect("consume");
    assert_eq!(payloads(&half), ["m-0", "m-1", "m-2", "m-3", "m-4"]);
    sub.ack(half[4].id).expect("ack");
    mq.close();
    assert!(matches!(mq.topics(), Err(Error::Closed(_))));
    assert!(
        matches!(
            mq.produce("t", messages("late", 1)).await,
            Err(Error::Closed(_))
        ),
        "the writer let go of the database at close"
    );

    let mq = Rocksmq::open(options(&dir)).expect("reopen");
    assert_eq!(mq.topics().expect("topics"), ["t"]);
    assert_eq!(mq.latest_message_id("t").expect("latest"), Some(10));
    let mut sub = mq.subscribe("t", "g").expect("subscribe again");
    let rest = sub.consume(100).expect("consume rest");
    assert_eq!(payloads(&rest), ["m-5", "m-6", "m-7", "m-8", "m-9"]);
    let more = mq
        .produce("t", messages("n", 2))
        .await
        .expect("produce more");
    assert_eq!(more, 11..13, "ids continue after the old ones");
    let mut reader = mq.reader("t", 0).expect("reader");
    let all = reader.read(100).expect("read all");
    assert_eq!(
        all.iter().map(|m| m.id).collect::<Vec<_>>(),
        (1..13).collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn prefix_topics_are_independent_and_properties_round_trip() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mq = Rocksmq::open(options(&dir)).expect("open");
    mq.create_topic("a").expect("a");
    mq.create_topic("ab").expect("ab");
    let mut props = Properties::new();
    props.insert("traceparent".into(), "00-1-2-01".into());
    let with_props = ProducerMessage {
        payload: "x".into(),
        properties: props.clone(),
        timestamp: None,
    };
    mq.produce("a", vec![with_props, ProducerMessage::new("y")])
        .await
        .expect("a");
    mq.produce("ab", messages("ab", 3)).await.expect("ab");
    let a = mq.reader("a", 0).expect("reader").read(10).expect("read");
    assert_eq!(payloads(&a), ["x", "y"]);
    assert_eq!(a[0].properties, props);
    assert!(a[1].properties.is_empty());
    let ab = mq.reader("ab", 0).expect("reader").read(10).expect("read");
    assert_eq!(payloads(&ab), ["ab-0", "ab-1", "ab-2"]);
    assert_eq!(ab[0].id, FIRST_MESSAGE_ID, "ids are per topic");

    mq.destroy_topic("a").expect("destroy");
    assert!(!mq.topic_exists("a").expect("exists"));
    mq.create_topic("a").expect("again");
    assert!(mq
        .reader("a", 0)
        .expect("reader")
        .read(10)
        .expect("read")
        .is_empty());
    assert_eq!(
        mq.reader("ab", 0)
            .expect("reader")
            .read(10)
            .expect("read")
            .len(),
        3
    );
}

#[tokio::test]
async fn groups_seek_and_wake_up() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mq = Rocksmq::open(options(&dir)).expect("open");
    mq.create_topic("t").expect("topic");
    mq.produce("t", messages("old", 3)).await.expect("produce");
    mq.create_consumer_group("t", "late", InitialPosition::Latest)
        .expect("late");
    mq.create_consumer_group("t", "early", InitialPosition::Earliest)
        .expect("early");
    assert!(mq.consumer_group_exists("t", "late").expect("exists"));
    let names: Vec<_> = mq
        .consumer_groups("t")
        .expect("list")
        .into_iter()
        .map(|g| (g.name, g.lag))
        .collect();
    assert_eq!(names, [("early".to_owned(), 3), ("late".to_owned(), 0)]);

    let mut late = mq.subscribe("t", "late").expect("subscribe");
    assert!(late.consume(10).expect("nothing yet").is_empty());
    let waiter = tokio::spawn(async move {
        let batch = late.next_batch(10).await.expect("woken");
        (late, batch)
    });
    mq.produce("t", messages("new", 2)).await.expect("produce");
    let (mut late, batch) = waiter.await.expect("join");
    assert_eq!(payloads(&batch)[0], "new-0");

    late.seek(2).expect("seek backwards");
    assert_eq!(payloads(&late.consume(1).expect("consume")), ["old-1"]);
    assert_eq!(mq.committed_position("t", "late").expect("position"), 2);
    late.seek_to_latest().expect("latest");
    assert!(late.consume(10).expect("consume").is_empty());
    assert_eq!(mq.latest_message_id("t").expect("latest"), Some(5));

    mq.destroy_consumer_group("t", "late")
        .expect("destroy group");
    assert!(!mq.consumer_group_exists("t", "late").expect("exists"));
}

#[tokio::test]
async fn bad_input_is_a_typed_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mq = Rocksmq::open(options(&dir)).expect("open");
    for bad in ["", "a/b", "a b", &"x".repeat(256)] {
        assert!(
            matches!(mq.create_topic(bad), Err(Error::InvalidArgument(_))),
            "{bad:?}"
        );
    }
    assert!(matches!(
        mq.seek("nope", "g", 1),
        Err(Error::InvalidArgument(_))
    ));
    mq.create_topic("t").expect("topic");
    assert!(matches!(
        mq.seek("t", "nope", 1),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        mq.subscribe("t", "nope"),
        Err(Error::InvalidArgument(_))
    ));
    mq.create_consumer_group("t", "g", InitialPosition::Earliest)
        .expect("group");
    assert!(matches!(
        mq.create_consumer_group("t", "g", InitialPosition::Earliest),
        Err(Error::InvalidArgument(_))
    ));
    assert!(
        matches!(mq.ack("t", "g", 1), Err(Error::InvalidArgument(_))),
        "nothing produced yet"
    );
    let mut sub = mq.subscribe("t", "g").expect("subscribe");
    mq.destroy_topic("t").expect("destroy");
    assert!(matches!(sub.consume(1), Err(Error::InvalidArgument(_))));
    assert!(matches!(
        sub.next_batch(1).await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        mq.produce("t", messages("m", 1)).await,
        Err(Error::InvalidArgument(_))
    ));
}

#[tokio::test]
async fn close_wakes_waiters_and_releases_the_lock() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mq = Rocksmq::open(options(&dir)).expect("open");
    let second = Rocksmq::open(options(&dir));
    match second {
        Err(Error::Backend { message, .. }) => assert!(message.contains("locked"), "{message}"),
        other => panic!("expected a lock error, got {other:?}"),
    }
    mq.create_topic("t").expect("topic");
    mq.create_consumer_group("t", "g", InitialPosition::Earliest)
        .expect("group");
    let mut sub = mq.subscribe("t", "g").expect("subscribe");
    let waiter = tokio::spawn(async move { sub.next_batch(1).await });
    tokio::task::yield_now().await;
    mq.close();
    let woken = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("woken by close")
        .expect("join");
    assert!(matches!(woken, Err(Error::Closed(_))));
    assert!(matches!(
        mq.produce("t", messages("m", 1)).await,
        Err(Error::Closed(_))
    ));
    assert!(matches!(mq.run_retention(), Err(Error::Closed(_)) | Ok(_)));
    Rocksmq::open(options(&dir)).expect("the lock is released by close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_producers_get_distinct_consecutive_ids() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mq = Rocksmq::open(options(&dir)).expect("open");
    mq.create_topic("t").expect("topic");
    let tasks: Vec<_> = (0..8)
        .map(|p| {
            let mq = mq.clone();
            tokio::spawn(async move {
                let mut ranges = Vec::new();
                for _ in 0..50 {
                    ranges.push(
                        mq.produce("t", messages(&format!("p{p}"), 3))
                            .await
                            .expect("produce"),
                    );
                }
                ranges
            })
        })
        .collect();
    let mut ids = Vec::new();
    for task in tasks {
        for range in task.await.expect("join") {
            assert_eq!(range.end - range.start, 3, "consecutive within a batch");
            ids.extend(range);
        }
    }
    ids.sort_unstable();
    assert_eq!(ids, (1..=1200).collect::<Vec<_>>());
    let all = mq.reader("t", 0).expect("reader").read(2000).expect("read");
    assert_eq!(all.len(), 1200);
}

#[tokio::test]
async fn synced_durability_modes_write_and_reopen() {
    for sync in [Durability::SyncData, Durability::SyncAll] {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut options = options(&dir);
        options.sync = sync;
        let mq = Rocksmq::open(options.clone()).expect("open");
        mq.create_topic("t").expect("topic");
        assert_eq!(
            mq.produce("t", messages("m", 2)).await.expect("produce"),
            1..3
        );
        mq.close();
        let mq = Rocksmq::open(options).expect("reopen");
        assert_eq!(mq.latest_message_id("t").expect("latest"), Some(2));
    }
}

/// Under a synced mode, many producers each awaiting every single-message `send` share syncs
/// (the leader runs on a blocking thread and answers its own caller through a channel): every
/// acknowledged message is there after reopening, once, under the id it was given.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn synced_concurrent_sends_are_all_durable_under_their_ids() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut options = options(&dir);
    options.sync = Durability::SyncData;
    let client = RocksmqClient::open(options.clone()).expect("open");
    let mut tasks = Vec::new();
    for p in 0..8 {
        let producer = client.create_producer("t").await.expect("producer");
        tasks.push(tokio::spawn(async move {
            let mut sent = Vec::new();
            for i in 0..25 {
                let payload = format!("p{p}-{i}");
                let id = producer
                    .send(ProducerMessage::new(payload.clone()))
                    .await
                    .expect("send");
                sent.push((id.as_u64().expect("a rocksmq id"), payload));
            }
            sent
        }));
    }
    let mut sent = Vec::new();
    for task in tasks {
        sent.extend(task.await.expect("join"));
    }
    sent.sort_unstable();
    let ids: Vec<u64> = sent.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, (1..=200).collect::<Vec<_>>(), "distinct and dense");
    let stats = client.engine().write_stats();
    assert_eq!(stats.batches, 200);
    assert!(stats.writes <= 200, "{stats:?}");
    client.close().await;

    let mq = Rocksmq::open(options).expect("reopen");
    let stored = mq.reader("t", 0).expect("reader").read(500).expect("read");
    let stored: Vec<(u64, String)> = stored
        .iter()
        .map(|m| (m.id, String::from_utf8_lossy(&m.payload).into_owned()))
        .collect();
    assert_eq!(stored, sent);
}

/// A cursor waiting for the next message is woken by every write, also when it starts waiting
/// just as the write publishes (writes skip the wake-up when nobody waits, so the two must not
/// miss each other).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_reader_never_misses_a_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mq = Rocksmq::open(options(&dir)).expect("open");
    mq.create_topic("t").expect("topic");
    let mut reader = mq.reader("t", 0).expect("reader");
    let waiter = tokio::spawn(async move {
        let mut seen = 0u64;
        while seen < 2000 {
            let batch = tokio::time::timeout(Duration::from_secs(10), reader.next_batch(1))
                .await
                .expect("woken within 10 s")
                .expect("read");
            seen += batch.len() as u64;
            assert_eq!(batch.last().map(|m| m.id), Some(seen));
        }
    });
    for i in 0..2000 {
        mq.produce("t", messages("m", 1)).await.expect("produce");
        if i % 3 == 0 {
            tokio::task::yield_now().await;
        }
    }
    waiter.await.expect("the reader saw every message");
}

/// A cursor reuses its read buffer once the messages of the last read are gone; payloads still
/// held must never see the next read's bytes.
#[tokio::test]
async fn held_payloads_survive_later_reads_into_a_reused_buffer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mq = Rocksmq::open(options(&dir)).expect("open");
    mq.create_topic("t").expect("topic");
    // Payloads of growing size, so later reads also outgrow the buffer mid-read.
    let batch: Vec<_> = (0..300)
        .map(|i| ProducerMessage::new(format!("{i:04}-{}", "x".repeat(i))))
        .collect();
    let expected: Vec<String> = batch
        .iter()
        .map(|m| String::from_utf8_lossy(&m.payload).into_owned())
        .collect();
    mq.produce("t", batch).await.expect("produce");
    mq.create_consumer_group("t", "g", InitialPosition::Earliest)
        .expect("group");
    let mut sub = mq.subscribe("t", "g").expect("subscribe");

    let held = sub.consume(50).expect("first read");
    let dropped = sub.consume(50).expect("second read");
    drop(dropped);
    let mut rest = Vec::new();
    loop {
        let batch = sub.consume(64).expect("later read");
        if batch.is_empty() {
            break;
        }
        rest.extend(payloads(&batch));
    }
    assert_eq!(payloads(&held), expected[..50]);
    assert_eq!(rest, expected[100..]);

    sub.seek(FIRST_MESSAGE_ID).expect("seek back");
    let again = sub.consume(1000).expect("read all again");
    assert_eq!(payloads(&again), expected);
    assert_eq!(payloads(&held), expected[..50], "held payloads are intact");
}

/// Reads skip the properties column family for topics without properties; the first message
/// with properties, mid-life or before a reopen, must still be read with them.
#[tokio::test]
async fn properties_appearing_later_and_after_reopen_are_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mq = Rocksmq::open(options(&dir)).expect("open");
    mq.create_topic("t").expect("topic");
    mq.create_topic("plain").expect("topic");
    mq.produce("t", messages("m", 3))
        .await
        .expect("plain messages");
    mq.produce("plain", messages("p", 2)).await.expect("plain");
    let mut reader = mq.reader("t", 0).expect("reader");
    assert!(reader
        .read(10)
        .expect("read")
        .iter()
        .all(|m| m.properties.is_empty()));
    let mut props = Properties::new();
    props.insert("k".into(), "v".into());
    let tagged = ProducerMessage {
        payload: "tagged".into(),
        properties: props.clone(),
        timestamp: None,
    };
    mq.produce("t", vec![ProducerMessage::new("before"), tagged])
        .await
        .expect("a message with properties");
    let later = reader.read(10).expect("read the new ones");
    assert_eq!(payloads(&later), ["before", "tagged"]);
    assert!(later[0].properties.is_empty());
    assert_eq!(later[1].properties, props, "the existing cursor sees them");
    mq.close();

    let mq = Rocksmq::open(options(&dir)).expect("reopen");
    let all = mq.reader("t", 0).expect("reader").read(10).expect("read");
    assert_eq!(all.len(), 5);
    assert_eq!(all[4].properties, props, "recovered at open");
    assert!(all[..4].iter().all(|m| m.properties.is_empty()));
    let plain = mq
        .reader("plain", 0)
        .expect("reader")
        .read(10)
        .expect("read");
    assert_eq!(payloads(&plain), ["p-0", "p-1"]);
}
