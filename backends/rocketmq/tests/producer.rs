//! The producer against a real name server and broker: queue selection, tags and keys,
//! namespaces, bad inputs.

mod support;

use msgstream_rocketmq::namespace::Namespace;
use msgstream_rocketmq::{
    Error, LitePullConsumer, MessageQueue, OutgoingMessage, Producer, QueueSelector, Selector,
};
use support::lite::{admin, bodies, broker, next, options, producer, topic};

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
