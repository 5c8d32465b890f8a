//! The producer, admin and lite pull consumer against a real name server and broker.

mod support;

use std::time::Duration;

use msgstream::testkit::within;
use msgstream_rocketmq::namespace::Namespace;
use msgstream_rocketmq::{
    Admin, ConsumeFrom, ConsumeRequest, ConsumeResult, ConsumerOptions, Error, LitePullConsumer,
    MessageQueue, OutgoingMessage, Producer, QueueSelector, Selector,
};

fn admin() -> Admin {
    support::admin_for(&support::shared().namesrv)
}

async fn topic(admin: &Admin, prefix: &str, queues: u32) -> String {
    let name = support::unique(prefix).replace('.', "_");
    admin
        .create_topic(&name, queues)
        .await
        .expect("create topic");
    name
}

/// The broker the tests' topics live on (the only one of the shared cluster; its name is not
/// assumed, so an external cluster named by `MSGSTREAM_ROCKETMQ_NAMESRV` works too).
async fn broker(admin: &Admin) -> String {
    let masters = admin.name_servers().masters().await.expect("masters");
    masters.into_keys().next().expect("a broker")
}

fn producer(admin: &Admin) -> Producer {
    Producer::new(admin.clone(), "test-producer", Namespace::default(), 2)
}

async fn send(
    p: &Producer,
    topic: &str,
    bodies: impl IntoIterator<Item = String>,
    selector: &QueueSelector,
) {
    for body in bodies {
        p.send(&OutgoingMessage::new(topic, body), selector)
            .await
            .expect("send");
    }
}

fn options(group: &str) -> ConsumerOptions {
    ConsumerOptions {
        consume_from: ConsumeFrom::First,
        long_poll: Duration::from_secs(2),
        persist_interval: Duration::from_millis(200),
        rebalance_interval: Duration::from_secs(1),
        heartbeat_interval: Duration::from_secs(1),
        retry_delay_level: 1,
        ..ConsumerOptions::new(group)
    }
}

async fn next(consumer: &LitePullConsumer) -> ConsumeRequest {
    within("a batch", async {
        loop {
            if let Some(r) = consumer.poll(Duration::from_secs(1)).await.expect("poll") {
                return r;
            }
        }
    })
    .await
}

fn bodies(r: &ConsumeRequest) -> Vec<String> {
    r.messages
        .iter()
        .map(|m| String::from_utf8_lossy(&m.body).into_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn order_on_one_queue_and_resume_after_ack() {
    let admin = admin();
    let t = topic(&admin, "order", 1).await;
    let p = producer(&admin);
    send(
        &p,
        &t,
        (0..50).map(|i| i.to_string()),
        &QueueSelector::RoundRobin,
    )
    .await;
    let group = support::unique("g");
    let c = LitePullConsumer::new(&admin, Namespace::default(), options(&group)).expect("new");
    c.subscribe(&t, Selector::All).expect("subscribe");
    c.start().await.expect("start");
    let mut seen = Vec::new();
    while seen.len() < 30 {
        let r = next(&c).await;
        seen.extend(bodies(&r));
        c.ack(&r, ConsumeResult::Success).await.expect("ack");
    }
    assert_eq!(
        seen,
        (0..seen.len()).map(|i| i.to_string()).collect::<Vec<_>>()
    );
    let mq = MessageQueue::new(&t, &broker(&admin).await, 0);
    assert_eq!(
        c.current_offset(&mq).await.expect("offset"),
        Some(seen.len() as i64)
    );
    c.shutdown().await.expect("shutdown persists");
    assert!(matches!(
        c.poll(Duration::ZERO).await,
        Err(Error::Closed(_))
    ));
    assert_eq!(
        admin.query_consumer_offset(&group, &mq).await.expect("q"),
        Some(seen.len() as i64)
    );
    let again = LitePullConsumer::new(&admin, Namespace::default(), options(&group)).expect("new");
    again.subscribe(&t, Selector::All).expect("subscribe");
    again.start().await.expect("start");
    let r = next(&again).await;
    assert_eq!(
        bodies(&r)[0],
        seen.len().to_string(),
        "resumes at the persisted offset"
    );
    again.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_later_redelivers_then_dead_letters() {
    let admin = admin();
    let t = topic(&admin, "retry", 1).await;
    send(
        &producer(&admin),
        &t,
        ["x".to_owned()],
        &QueueSelector::RoundRobin,
    )
    .await;
    let group = support::unique("rg");
    let c = LitePullConsumer::new(
        &admin,
        Namespace::default(),
        ConsumerOptions {
            max_reconsume_times: 2,
            ..options(&group)
        },
    )
    .expect("new");
    c.subscribe(&t, Selector::All).expect("subscribe");
    c.start().await.expect("start");
    for round in 0..=2 {
        let r = next(&c).await;
        let m = &r.messages[0];
        assert_eq!((m.body.as_ref(), m.topic.as_str()), (&b"x"[..], t.as_str()));
        assert_eq!(m.reconsume_times, round, "delivery {round}");
        c.ack(&r, ConsumeResult::RetryLater)
            .await
            .expect("retry later");
        c.request_rebalance();
    }
    let dlq = MessageQueue::new(format!("%DLQ%{group}"), &broker(&admin).await, 0);
    let dead = within("the dead letter", async {
        loop {
            match c.pull_from(&dlq, 0, 8).await {
                Ok(o) if !o.messages.is_empty() => return o.messages,
                _ => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    })
    .await;
    assert_eq!(dead[0].body.as_ref(), b"x");
    c.shutdown().await.expect("shutdown");
}

/// When CONSUMER_SEND_MSG_BACK fails (here: it names a commit-log offset the broker does not
/// hold), the message itself is re-sent to the group's retry topic. rocketmq-rust 1.0.0 files
/// such a send under `%DLQ%` at once (its `handle_retry_and_dlq` tests the rebalance-lock
/// condition the other way round from Java), so the copy is looked for in both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_later_falls_back_to_resending() {
    let admin = admin();
    let t = topic(&admin, "resend", 1).await;
    let mut m = OutgoingMessage::new(&t, "y");
    m.properties.insert("k".into(), "v".into());
    producer(&admin)
        .send(&m, &QueueSelector::RoundRobin)
        .await
        .expect("send");
    let group = support::unique("fg");
    let c = LitePullConsumer::new(&admin, Namespace::default(), options(&group)).expect("new");
    c.subscribe(&t, Selector::All).expect("subscribe");
    c.start().await.expect("start");
    let mut r = next(&c).await;
    r.messages[0].commit_log_offset = i64::MAX / 2;
    c.ack(&r, ConsumeResult::RetryLater)
        .await
        .expect("retry later");
    let copy = within("the re-sent copy", async {
        loop {
            for prefix in ["%RETRY%", "%DLQ%"] {
                let q = MessageQueue::new(format!("{prefix}{group}"), &broker(&admin).await, 0);
                if let Ok(o) = c.pull_from(&q, 0, 1).await {
                    if let Some(m) = o.messages.into_iter().next() {
                        return m;
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    assert_eq!(
        (copy.body.as_ref(), copy.topic.as_str()),
        (&b"y"[..], t.as_str())
    );
    assert_eq!(copy.properties.get("k").map(String::as_str), Some("v"));
    assert_eq!(copy.reconsume_times, 1);
    c.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn assign_pull_from_seek_and_timestamps() {
    let admin = admin();
    let t = topic(&admin, "seek", 2).await;
    let p = producer(&admin);
    let q0 = MessageQueue::new(&t, &broker(&admin).await, 0);
    send(
        &p,
        &t,
        (0..5).map(|i| i.to_string()),
        &QueueSelector::Queue(q0.clone()),
    )
    .await;
    // Store timestamps are milliseconds: keep them apart from the search point on both sides.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let middle = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("now")
        .as_millis() as i64;
    tokio::time::sleep(Duration::from_millis(20)).await;
    send(
        &p,
        &t,
        (5..10).map(|i| i.to_string()),
        &QueueSelector::Queue(q0.clone()),
    )
    .await;
    let group = support::unique("sg");
    let c = LitePullConsumer::new(&admin, Namespace::default(), options(&group)).expect("new");
    assert!(matches!(
        c.subscribe(&t, Selector::All)
            .and_then(|()| c.assign(vec![])),
        Err(Error::IllegalState(_))
    ));
    let c = LitePullConsumer::new(&admin, Namespace::default(), options(&group)).expect("new");
    let queues = c.fetch_queues(&t).await.expect("queues");
    assert_eq!(queues.len(), 2);
    c.assign(vec![q0.clone()]).expect("assign");
    c.start().await.expect("start");

    let pulled = c.pull_from(&q0, 3, 4).await.expect("pull_from");
    assert_eq!(pulled.messages.len(), 4);
    assert_eq!(
        (pulled.messages[0].queue_offset, pulled.next_offset),
        (3, 7)
    );
    assert_eq!(
        c.current_offset(&q0).await.expect("offset"),
        Some(0),
        "pull_from moves nothing"
    );
    let (_, again) = c.pull(2).await.expect("pull");
    assert_eq!(again.messages[0].queue_offset, 0);

    assert_eq!(c.offset_for_timestamp(&q0, middle).await.expect("ts"), 5);
    c.seek(&q0, 8).await.expect("seek");
    assert_eq!(bodies(&next(&c).await)[0], "8");
    c.seek_to_begin(&q0).await.expect("begin");
    assert_eq!(bodies(&next(&c).await)[0], "0");
    c.seek_to_end(&q0).await.expect("end");
    assert!(c
        .poll(Duration::from_millis(300))
        .await
        .expect("poll")
        .is_none());
    assert!(matches!(
        c.seek(&q0, 11).await,
        Err(Error::InvalidArgument(_))
    ));
    let q1 = MessageQueue::new(&t, &broker(&admin).await, 1);
    assert!(matches!(c.seek(&q1, 0).await, Err(Error::IllegalState(_))));
    let bad = MessageQueue::new(&t, &broker(&admin).await, 9);
    assert!(matches!(
        c.pull_from(&bad, 0, 1).await,
        Err(Error::NoSuchQueue { .. })
    ));
    c.pause(std::slice::from_ref(&q0));
    send(
        &p,
        &t,
        ["late".to_owned()],
        &QueueSelector::Queue(q0.clone()),
    )
    .await;
    assert!(
        c.poll(Duration::from_millis(500))
            .await
            .expect("poll")
            .is_none(),
        "paused"
    );
    c.resume(std::slice::from_ref(&q0));
    assert_eq!(bodies(&next(&c).await), ["late"]);
    c.shutdown().await.expect("shutdown");
}

/// With one buffered batch per queue and in total, fetching waits for `poll` and loses nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flow_control_bounds_buffering_without_loss() {
    let admin = admin();
    let t = topic(&admin, "flow", 4).await;
    let p = producer(&admin);
    send(
        &p,
        &t,
        (0..40).map(|i| i.to_string()),
        &QueueSelector::RoundRobin,
    )
    .await;
    let tight = ConsumerOptions {
        pull_batch: 2,
        queue_buffer: 1,
        total_buffer: 1,
        ..options(&support::unique("flow-g"))
    };
    let c = LitePullConsumer::new(&admin, Namespace::default(), tight).expect("new");
    c.subscribe(&t, Selector::All).expect("subscribe");
    c.start().await.expect("start");
    let mut got = Vec::new();
    while got.len() < 40 {
        let r = next(&c).await;
        assert!(r.messages.len() <= 2, "batches are bounded by pull_batch");
        got.extend(bodies(&r));
        c.ack(&r, ConsumeResult::Success).await.expect("ack");
    }
    got.sort_by_key(|b| b.parse::<u32>().expect("number"));
    assert_eq!(
        got,
        (0..40).map(|i| i.to_string()).collect::<Vec<_>>(),
        "each once"
    );
    assert!(c
        .poll(Duration::from_millis(300))
        .await
        .expect("poll")
        .is_none());
    c.shutdown().await.expect("shutdown");
}

/// A joining consumer is noticed through the brokers' NOTIFY_CONSUMER_IDS_CHANGED alone (the
/// periodic rebalance is far beyond the test's duration). rocketmq-rust 1.0.0 sends no
/// notification when a consumer unregisters, so a leaving one is noticed by the periodic
/// rebalance, which the test triggers instead of waiting for its interval.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_consumers_split_queues_and_rebalance_on_notification() {
    let admin = admin();
    let t = topic(&admin, "split", 4).await;
    let group = support::unique("gg");
    let notified_only = ConsumerOptions {
        rebalance_interval: Duration::from_secs(3600),
        heartbeat_interval: Duration::from_secs(3600),
        ..options(&group)
    };
    let a = LitePullConsumer::new(&admin, Namespace::default(), notified_only.clone()).expect("a");
    let b = LitePullConsumer::new(&admin, Namespace::default(), notified_only).expect("b");
    a.subscribe(&t, Selector::All).expect("subscribe");
    a.start().await.expect("start a");
    let split = |c: &LitePullConsumer| c.assignment().iter().filter(|q| q.topic == t).count();
    assert_eq!(split(&a), 4, "alone, a holds every queue");
    b.subscribe(&t, Selector::All).expect("subscribe");
    b.start().await.expect("start b");
    within("an even split", async {
        while split(&a) != 2 || split(&b) != 2 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    let mut all: Vec<MessageQueue> = a
        .assignment()
        .into_iter()
        .chain(b.assignment())
        .filter(|q| q.topic == t)
        .collect();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 4, "every queue is held exactly once");
    b.shutdown().await.expect("b leaves");
    within("a takes over", async {
        while split(&a) != 4 {
            a.request_rebalance();
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await;
    let p = producer(&admin);
    send(
        &p,
        &t,
        (0..8).map(|i| i.to_string()),
        &QueueSelector::RoundRobin,
    )
    .await;
    let mut got = Vec::new();
    while got.len() < 8 {
        got.extend(bodies(&next(&a).await));
    }
    got.sort();
    assert_eq!(got, (0..8).map(|i| i.to_string()).collect::<Vec<_>>());
    a.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consume_from_last_and_timestamp_and_oneway_sends() {
    let admin = admin();
    let t = topic(&admin, "from", 1).await;
    let p = producer(&admin);
    let q0 = QueueSelector::RoundRobin;
    send(&p, &t, ["old0".to_owned(), "old1".to_owned()], &q0).await;
    // Store timestamps are milliseconds: keep them apart from the search point on both sides.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let middle = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("now")
        .as_millis() as i64;
    tokio::time::sleep(Duration::from_millis(20)).await;
    send(&p, &t, ["mid".to_owned()], &q0).await;
    let start = |from: ConsumeFrom| {
        let admin = admin.clone();
        let t = t.clone();
        async move {
            let c = LitePullConsumer::new(
                &admin,
                Namespace::default(),
                ConsumerOptions {
                    consume_from: from,
                    ..options(&support::unique("cf"))
                },
            )
            .expect("new");
            c.subscribe(&t, Selector::All).expect("subscribe");
            c.start().await.expect("start");
            c
        }
    };
    let last = start(ConsumeFrom::Last).await;
    let stamp = start(ConsumeFrom::Timestamp(middle)).await;
    assert_eq!(bodies(&next(&stamp).await)[0], "mid");
    p.send_oneway(&OutgoingMessage::new(&t, "new"), &q0)
        .await
        .expect("oneway");
    assert_eq!(
        bodies(&next(&last).await),
        ["new"],
        "from last: only what came after start"
    );
    for c in [last, stamp] {
        c.shutdown().await.expect("shutdown");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaces_tags_and_bad_inputs() {
    let admin = admin();
    let ns = Namespace::new("tns");
    let t = support::unique("nst");
    admin.create_topic(&ns.wrap(&t), 1).await.expect("create");
    let p = Producer::new(admin.clone(), "p", ns.clone(), 2);
    for (body, tag) in [("a", "A"), ("b", "B"), ("c", "A")] {
        let m = OutgoingMessage {
            tag: Some(tag.into()),
            keys: vec![format!("key-{body}"), "shared".into()],
            ..OutgoingMessage::new(&t, body)
        };
        p.send(&m, &QueueSelector::ByKey("k".into()))
            .await
            .expect("send");
    }
    let c =
        LitePullConsumer::new(&admin, ns.clone(), options(&support::unique("ng"))).expect("new");
    c.subscribe(&t, Selector::parse("A || Z"))
        .expect("subscribe");
    c.start().await.expect("start");
    let mut got = Vec::new();
    while got.len() < 2 {
        let r = next(&c).await;
        assert!(
            r.messages.iter().all(|m| m.topic == t),
            "namespace stripped"
        );
        for m in &r.messages {
            let keys = m.properties.get("KEYS").map(String::as_str);
            let body = String::from_utf8_lossy(&m.body).into_owned();
            assert_eq!(keys, Some(format!("key-{body} shared").as_str()));
            assert_eq!(m.tag(), Some("A"));
        }
        got.extend(bodies(&r));
    }
    assert_eq!(got, ["a", "c"]);
    c.shutdown().await.expect("shutdown");
    let plain = LitePullConsumer::new(&admin, Namespace::default(), options("g")).expect("new");
    plain.subscribe(&t, Selector::All).expect("subscribe");
    assert!(
        matches!(plain.start().await, Err(Error::TopicNotFound(_))),
        "no namespace, no route"
    );
    let unknown = support::unique("missing");
    assert!(matches!(
        producer(&admin)
            .send(
                &OutgoingMessage::new(&unknown, "x"),
                &QueueSelector::RoundRobin
            )
            .await,
        Err(Error::TopicNotFound(_))
    ));
    let bad_queue = QueueSelector::Queue(MessageQueue::new(ns.wrap(&t), &broker(&admin).await, 7));
    assert!(matches!(
        p.send(&OutgoingMessage::new(&t, "x"), &bad_queue).await,
        Err(Error::NoSuchQueue { .. })
    ));
    assert!(matches!(
        LitePullConsumer::new(&admin, Namespace::default(), options("")),
        Err(Error::InvalidArgument(_))
    ));
}

/// Keyed sends stay on one queue (the one Java's hash selector picks); explicit queues are
/// honoured; round robin visits every queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_selection() {
    let admin = admin();
    let t = topic(&admin, "select", 4).await;
    let p = producer(&admin);
    let mut keyed = std::collections::BTreeSet::new();
    for i in 0..6 {
        let sent = p
            .send(
                &OutgoingMessage::new(&t, format!("k{i}")),
                &QueueSelector::ByKey("order-7".into()),
            )
            .await
            .expect("send");
        keyed.insert(sent.queue.queue_id);
    }
    let expected = msgstream_rocketmq::protocol::java_hash("order-7").unsigned_abs() % 4;
    assert_eq!(keyed.into_iter().collect::<Vec<_>>(), [expected as i32]);
    let q2 = MessageQueue::new(&t, &broker(&admin).await, 2);
    let sent = p
        .send(
            &OutgoingMessage::new(&t, "x"),
            &QueueSelector::Queue(q2.clone()),
        )
        .await
        .expect("send");
    assert_eq!(sent.queue, q2);
    let mut visited = std::collections::BTreeSet::new();
    for i in 0..4 {
        let sent = p
            .send(
                &OutgoingMessage::new(&t, format!("r{i}")),
                &QueueSelector::RoundRobin,
            )
            .await
            .expect("send");
        visited.insert(sent.queue.queue_id);
    }
    assert_eq!(visited.len(), 4);
}
