//! The lite pull consumer against a real name server and broker: polling, acks and retries,
//! offsets, seeks, pausing, consume-from-where.

mod support;

use std::time::Duration;

use msgstream::testkit::within;
use msgstream_rocketmq::namespace::Namespace;
use msgstream_rocketmq::{
    ConsumeFrom, ConsumeResult, ConsumerOptions, Error, LitePullConsumer, MessageQueue,
    OutgoingMessage, QueueSelector, Selector,
};
use support::lite::{admin, bodies, broker, next, options, producer, send, topic};

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
