//! The mq adapter against a real name server and broker: what is specific to RocketMQ (ids,
//! batches, listings with lag, resuming in another client, namespaces).

mod support;

use msgstream::mq::{Client, ConsumerOptions, InitialPosition, MessageId, ProducerMessage};
use msgstream::testkit::within;
use msgstream::Error;
use msgstream_rocketmq::{RocketMqClient, RocketMqConfig};

async fn connect(config: RocketMqConfig) -> RocketMqClient {
    RocketMqClient::connect(config).await.expect("connect")
}

async fn produce(client: &RocketMqClient, topic: &str, n: usize) -> Vec<MessageId> {
    let producer = client.create_producer(topic).await.expect("producer");
    let mut ids = Vec::new();
    for i in 0..n {
        ids.push(
            producer
                .send(ProducerMessage::new(format!("{i}")))
                .await
                .expect("send"),
        );
    }
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_batches_and_garbage() {
    let client = connect(support::shared().config()).await;
    let topic = support::unique("ids.dotted");
    let ids = produce(&client, &topic, 2).await;
    assert_eq!(ids[0], MessageId::from_u64(0));
    let producer = client.create_producer(&topic).await.expect("producer");
    let batch = (0..3)
        .map(|i| ProducerMessage::new(format!("b{i}")))
        .collect();
    let more = producer.send_batch(batch).await.expect("batch");
    assert_eq!(more, (2..5).map(MessageId::from_u64).collect::<Vec<_>>());
    for bad in [&[][..], &[1, 2, 3][..], &[0; 9][..], &[0xFF; 8][..]] {
        assert!(matches!(
            client.message_id_from_bytes(bad),
            Err(Error::Decode(_))
        ));
    }
    let mut consumer = client
        .subscribe(ConsumerOptions::new(&topic, "g"))
        .await
        .expect("sub");
    let bad = MessageId::from_backend_bytes(vec![1]);
    assert!(matches!(
        consumer.seek(&bad, true).await,
        Err(Error::Decode(_))
    ));
    let beyond = MessageId::from_u64(1000);
    assert!(matches!(
        consumer.seek(&beyond, true).await,
        Err(Error::PastEnd { .. })
    ));
    let topics = client.list_topics().await.expect("topics");
    assert!(topics.contains(&topic), "{topics:?} lacks {topic}");
    assert!(topics.iter().all(|t| !t.contains('%')), "{topics:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acked_position_survives_and_subscriptions_list_with_lag() {
    let client = connect(support::shared().config()).await;
    let topic = support::unique("resume");
    produce(&client, &topic, 5).await;
    let mut consumer = client
        .subscribe(ConsumerOptions::new(&topic, "early"))
        .await
        .expect("sub");
    let _late = client
        .subscribe(
            ConsumerOptions::new(&topic, "late").with_initial_position(InitialPosition::Latest),
        )
        .await
        .expect("late");
    for _ in 0..3 {
        let m = within("recv", consumer.recv())
            .await
            .expect("recv")
            .expect("message");
        consumer.ack(&m).await.expect("ack");
    }
    assert!(
        matches!(
            client
                .subscribe(ConsumerOptions::new(&topic, "early"))
                .await,
            Err(Error::SubscriptionBusy { .. })
        ),
        "a second live consumer of one subscription is refused"
    );
    consumer.close().await;
    let other = connect(support::shared().config()).await;
    let mut again = other
        .subscribe(ConsumerOptions::new(&topic, "early"))
        .await
        .expect("again");
    let m = within("recv", again.recv())
        .await
        .expect("recv")
        .expect("message");
    assert_eq!(
        m.payload.as_ref(),
        b"3",
        "a new client resumes after the acked position"
    );
    let subs = client
        .list_subscriptions(&topic)
        .await
        .expect("subscriptions");
    let lags: Vec<_> = subs.iter().map(|s| (s.name.as_str(), s.lag)).collect();
    assert_eq!(lags, [("early", Some(2)), ("late", Some(0))]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaces_isolate() {
    let cluster = support::shared();
    let a = connect(RocketMqConfig {
        namespace: "nsa".into(),
        ..cluster.config()
    })
    .await;
    let b = connect(RocketMqConfig {
        namespace: "nsb".into(),
        ..cluster.config()
    })
    .await;
    let topic = support::unique("isolated");
    produce(&a, &topic, 1).await;
    produce(&b, &topic, 2).await;
    let mut from_b = b
        .subscribe(ConsumerOptions::new(&topic, "g"))
        .await
        .expect("sub");
    let first = within("recv", from_b.recv())
        .await
        .expect("recv")
        .expect("m");
    assert_eq!(
        (first.id.as_u64(), first.payload.as_ref()),
        (Some(0), &b"0"[..])
    );
    let latest = from_b.latest_message_id().await.expect("latest");
    assert_eq!(
        latest,
        Some(MessageId::from_u64(1)),
        "b's channel holds only b's two messages"
    );
    assert!(a.list_topics().await.expect("topics").contains(&topic));
    let plain = connect(cluster.config()).await;
    assert!(!plain.list_topics().await.expect("topics").contains(&topic));
}
