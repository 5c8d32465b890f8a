//! Checks of the mq traits themselves.

use std::sync::Arc;

use bytes::Bytes;

use super::{recv, send_n, unique, within};
use crate::mq::{
    Client, ConsumerOptions, InitialPosition, Message, ProducerMessage, ReaderOptions,
};
use crate::Error;

fn body(msg: &Message) -> String {
    String::from_utf8_lossy(&msg.payload).into_owned()
}

/// Ids of one producer increase; a consumer sees messages in order with their properties.
pub async fn produce_consume_in_order(client: Arc<dyn Client>) {
    let topic = unique("order");
    let ids = send_n(&client, &topic, 20).await;
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids increase: {ids:?}");
    let mut consumer = client
        .subscribe(ConsumerOptions::new(&topic, "g"))
        .await
        .expect("subscribe");
    assert_eq!(
        (consumer.topic(), consumer.subscription()),
        (topic.as_str(), "g")
    );
    for (i, id) in ids.iter().enumerate() {
        let msg = recv(&mut consumer).await;
        assert_eq!(body(&msg), format!("m{i}"));
        assert_eq!(&msg.id, id);
        assert_eq!(msg.properties.get("i"), Some(&i.to_string()));
        let round = client
            .message_id_from_bytes(&msg.id.to_bytes())
            .expect("id bytes");
        assert_eq!(round, msg.id);
        consumer.ack(&msg).await.expect("ack");
    }
    consumer.close().await;
    assert!(consumer.recv().await.expect("closed recv").is_none());
}

/// Unacked messages come again after re-subscribing; acked ones do not.
pub async fn ack_and_redelivery(client: Arc<dyn Client>) {
    let topic = unique("redeliver");
    send_n(&client, &topic, 5).await;
    let mut consumer = client
        .subscribe(ConsumerOptions::new(&topic, "g"))
        .await
        .expect("subscribe");
    let mut got = Vec::new();
    for _ in 0..5 {
        got.push(recv(&mut consumer).await);
    }
    consumer.ack(&got[0]).await.expect("ack 0");
    consumer.ack(&got[1]).await.expect("ack 1");
    consumer.close().await;
    assert!(
        matches!(consumer.ack(&got[2]).await, Err(Error::Closed(_))),
        "ack after close says why"
    );
    let mut again = client
        .subscribe(ConsumerOptions::new(&topic, "g"))
        .await
        .expect("re-subscribe");
    assert_eq!(
        body(&recv(&mut again).await),
        "m2",
        "first unacked message is delivered again"
    );
}

/// Acks staged through two consumers' ackers and then flushed are durable: re-subscribed, each
/// subscription resumes at its first message not staged (the streams commit a pack this way).
pub async fn staged_acks(client: Arc<dyn Client>) {
    let (a, b) = (unique("staged-a"), unique("staged-b"));
    send_n(&client, &a, 3).await;
    send_n(&client, &b, 3).await;
    let mut on_a = client
        .subscribe(ConsumerOptions::new(&a, "g"))
        .await
        .expect("subscribe a");
    let mut on_b = client
        .subscribe(ConsumerOptions::new(&b, "g"))
        .await
        .expect("subscribe b");
    let (mut from_a, mut from_b) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        from_a.push(recv(&mut on_a).await);
        from_b.push(recv(&mut on_b).await);
    }
    let (acks_a, acks_b) = (on_a.acker(), on_b.acker());
    // Each message, not just the last: acks are cumulative only on strictly ordered backends.
    for message in &from_a[..2] {
        acks_a.stage(message).await.expect("stage on a");
    }
    acks_b.stage(&from_b[0]).await.expect("stage on b");
    acks_a.flush().await.expect("flush a");
    acks_b.flush().await.expect("flush b");
    on_a.close().await;
    on_b.close().await;
    for (topic, first) in [(&a, "m2"), (&b, "m1")] {
        let mut again = client
            .subscribe(ConsumerOptions::new(topic, "g"))
            .await
            .expect("re-subscribe");
        assert_eq!(
            body(&recv(&mut again).await),
            first,
            "{topic}: resumes after the flushed acks"
        );
        again.close().await;
    }
}

/// A new Latest subscription sees only later messages; Earliest sees everything.
pub async fn earliest_and_latest(client: Arc<dyn Client>) {
    let topic = unique("initial");
    send_n(&client, &topic, 3).await;
    let mut latest = client
        .subscribe(
            ConsumerOptions::new(&topic, "late").with_initial_position(InitialPosition::Latest),
        )
        .await
        .expect("subscribe latest");
    let producer = client.create_producer(&topic).await.expect("producer");
    producer
        .send(ProducerMessage::new(&b"new"[..]))
        .await
        .expect("send");
    assert_eq!(body(&recv(&mut latest).await), "new");
    let mut earliest = client
        .subscribe(ConsumerOptions::new(&topic, "early"))
        .await
        .expect("subscribe earliest");
    assert_eq!(body(&recv(&mut earliest).await), "m0");
}

/// Seek inclusive and exclusive; acks of deliveries before the seek are refused.
pub async fn seek_inclusive_and_exclusive(client: Arc<dyn Client>) {
    let topic = unique("seek");
    let ids = send_n(&client, &topic, 10).await;
    let mut consumer = client
        .subscribe(ConsumerOptions::new(&topic, "g"))
        .await
        .expect("subscribe");
    let first = recv(&mut consumer).await;
    let result = consumer.seek(&ids[3], true).await;
    if !client.capabilities().seek {
        assert!(
            matches!(result, Err(Error::Unsupported { .. })),
            "{result:?}"
        );
        return;
    }
    result.expect("seek inclusive");
    assert_eq!(body(&recv(&mut consumer).await), "m3");
    assert!(
        matches!(consumer.ack(&first).await, Err(Error::StaleDelivery(_))),
        "ack of a delivery from before the seek must say so"
    );
    consumer.seek(&ids[3], false).await.expect("seek exclusive");
    let msg = recv(&mut consumer).await;
    assert_eq!(body(&msg), "m4");
    consumer.ack(&msg).await.expect("ack after seek");
    consumer.seek(&ids[8], true).await.expect("seek forward");
    assert_eq!(body(&recv(&mut consumer).await), "m8");
}

/// Readers read from any id, inclusive or exclusive, and say whether more is there.
pub async fn readers(client: Arc<dyn Client>) {
    let topic = unique("reader");
    let ids = send_n(&client, &topic, 5).await;
    let options = ReaderOptions {
        topic: topic.clone(),
        start: client.earliest_message_id(),
        inclusive: true,
    };
    let result = client.create_reader(options.clone()).await;
    if !client.capabilities().readers {
        assert!(matches!(result, Err(Error::Unsupported { .. })));
        return;
    }
    let mut reader = result.expect("reader");
    for i in 0..5 {
        let msg = within("reader next", reader.next()).await.expect("next");
        assert_eq!(body(&msg), format!("m{i}"));
    }
    assert!(!reader.has_next().await.expect("has_next"));
    reader.seek(&ids[1], false).await.expect("seek");
    assert!(reader.has_next().await.expect("has_next"));
    assert_eq!(
        body(&within("next", reader.next()).await.expect("next")),
        "m2"
    );
    let mut from = client
        .create_reader(ReaderOptions {
            start: ids[3].clone(),
            inclusive: true,
            ..options
        })
        .await
        .expect("reader");
    assert_eq!(
        body(&within("next", from.next()).await.expect("next")),
        "m3"
    );
    from.close().await;
    assert!(from.next().await.is_err(), "closed reader");
}

/// The newest id, or none for an empty channel.
pub async fn latest_message_id(client: Arc<dyn Client>) {
    let topic = unique("latest");
    let consumer = client
        .subscribe(ConsumerOptions::new(&topic, "g"))
        .await
        .expect("subscribe");
    let result = consumer.latest_message_id().await;
    if !client.capabilities().latest_id {
        assert!(matches!(result, Err(Error::Unsupported { .. })));
        return;
    }
    assert_eq!(result.expect("latest"), None, "empty channel");
    let ids = send_n(&client, &topic, 3).await;
    assert_eq!(
        consumer.latest_message_id().await.expect("latest"),
        ids.last().cloned()
    );
}

/// Bad names, garbage ids and use after close are typed errors.
pub async fn bad_inputs(client: Arc<dyn Client>) {
    for bad in ["", "a/b", "with space"] {
        assert!(
            matches!(
                client.create_producer(bad).await,
                Err(Error::InvalidArgument(_))
            ),
            "{bad:?}"
        );
        assert!(matches!(
            client.subscribe(ConsumerOptions::new(bad, "g")).await,
            Err(Error::InvalidArgument(_))
        ));
    }
    assert!(matches!(
        client
            .subscribe(ConsumerOptions::new(unique("ok"), ""))
            .await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        client.message_id_from_bytes(&[1, 2, 3]),
        Err(Error::Decode(_))
    ));
    let topic = unique("closing");
    let producer = client.create_producer(&topic).await.expect("producer");
    producer.close().await;
    assert!(matches!(
        producer
            .send(ProducerMessage::new(Bytes::from_static(b"x")))
            .await,
        Err(Error::Closed(_))
    ));
    client.close().await;
    assert!(matches!(
        client.create_producer(&topic).await,
        Err(Error::Closed(_))
    ));
}
