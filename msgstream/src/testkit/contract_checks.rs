//! Checks of the hardened contract: exclusive subscriptions, deleting subscriptions and
//! channels, seeks outside what a channel holds, repeated channel names, and commits.

use std::sync::Arc;

use super::{insert, recv, row_id, send_n, unique, within};
use crate::mq::{Client, ConsumerOptions, InitialPosition, ProducerMessage, ReaderOptions};
use crate::msg::{MsgPack, MsgPosition, TsMsg};
use crate::stream::{MsgStream, StreamOptions};
use crate::tt::TtMsgStream;
use crate::Error;

async fn next_row(stream: &mut MsgStream) -> i64 {
    let pack = within("a pack", stream.next_pack())
        .await
        .expect("open")
        .expect("pack");
    row_id(&pack.msgs[0])
}

fn pack(msgs: Vec<TsMsg>) -> MsgPack {
    MsgPack {
        msgs,
        ..MsgPack::default()
    }
}

/// A second live consumer of one (channel, subscription) is `SubscriptionBusy`; closing or
/// dropping the first frees it; another subscription name is independent.
pub async fn exclusive_subscriptions(client: Arc<dyn Client>) {
    let topic = unique("excl");
    send_n(&client, &topic, 1).await;
    let mut first = client
        .subscribe(ConsumerOptions::new(&topic, "sub"))
        .await
        .expect("first consumer");
    match client.subscribe(ConsumerOptions::new(&topic, "sub")).await {
        Err(Error::SubscriptionBusy {
            topic: t,
            subscription,
        }) => assert_eq!((t.as_str(), subscription.as_str()), (topic.as_str(), "sub")),
        other => panic!("expected SubscriptionBusy, got {:?}", other.map(|_| ())),
    }
    let other = client
        .subscribe(ConsumerOptions::new(&topic, "other"))
        .await
        .expect("another subscription is independent");
    first.close().await;
    let second = client
        .subscribe(ConsumerOptions::new(&topic, "sub"))
        .await
        .expect("free again after close");
    drop(second);
    drop(other);
    let mut third = client
        .subscribe(ConsumerOptions::new(&topic, "sub"))
        .await
        .expect("free again after drop");
    third.close().await;
    // A stream subscribing a busy subscription fails as a whole and holds nothing afterwards.
    let mut held = client
        .subscribe(ConsumerOptions::new(&topic, "stream-sub"))
        .await
        .expect("held");
    let free = unique("excl-free");
    let mut stream = MsgStream::new(client.clone(), StreamOptions::default());
    assert!(matches!(
        stream
            .as_consumer(
                &[free.as_str(), topic.as_str()],
                "stream-sub",
                InitialPosition::Earliest
            )
            .await,
        Err(Error::SubscriptionBusy { .. })
    ));
    held.close().await;
    let mut again = client
        .subscribe(ConsumerOptions::new(&free, "stream-sub"))
        .await
        .expect("the failed stream released what it had subscribed");
    again.close().await;
}

/// Deleting a subscription or a channel: both refuse while a consumer is live, both are
/// idempotent (a missing one is fine), and neither is listed afterwards where the backend
/// lists them. `Unsupported` where the backend says so.
pub async fn delete_subscription_and_topic(client: Arc<dyn Client>) {
    let caps = client.capabilities();
    let topic = unique("del");
    let ids = send_n(&client, &topic, 1).await;
    let mut consumer = client
        .subscribe(ConsumerOptions::new(&topic, "sub"))
        .await
        .expect("consumer");
    let first = recv(&mut consumer).await;
    assert_eq!(first.id, ids[0]);
    consumer.ack(&first).await.expect("ack");
    if caps.delete_subscriptions {
        assert!(matches!(
            client.delete_subscription(&topic, "sub").await,
            Err(Error::SubscriptionBusy { .. })
        ));
        consumer.close().await;
        client
            .delete_subscription(&topic, "sub")
            .await
            .expect("delete subscription");
        client
            .delete_subscription(&topic, "sub")
            .await
            .expect("deleting again is fine");
        client
            .delete_subscription(&topic, "never-existed")
            .await
            .expect("deleting a missing subscription is fine");
        if let Some(subscriptions) = listed(client.list_subscriptions(&topic).await) {
            assert!(
                subscriptions.iter().all(|s| s.name != "sub"),
                "{subscriptions:?}"
            );
        }
    } else {
        assert!(matches!(
            client.delete_subscription(&topic, "sub").await,
            Err(Error::Unsupported { .. })
        ));
        consumer.close().await;
    }
    if !caps.delete_topics {
        assert!(matches!(
            client.delete_topic(&topic).await,
            Err(Error::Unsupported { .. })
        ));
        return;
    }
    let mut live = client
        .subscribe(ConsumerOptions::new(&topic, "live"))
        .await
        .expect("consumer");
    assert!(matches!(
        client.delete_topic(&topic).await,
        Err(Error::SubscriptionBusy { .. })
    ));
    live.close().await;
    client.delete_topic(&topic).await.expect("delete topic");
    client
        .delete_topic(&topic)
        .await
        .expect("deleting again is fine");
    if let Some(topics) = listed(client.list_topics().await) {
        assert!(!topics.contains(&topic), "{topic} still listed");
    }
}

/// A listing, or `None` where the backend cannot list (`Unsupported`); any other failure
/// fails the check.
fn listed<T>(listing: crate::Result<Vec<T>>) -> Option<Vec<T>> {
    match listing {
        Ok(items) => Some(items),
        Err(Error::Unsupported { .. }) => None,
        Err(other) => panic!("listing failed: {other}"),
    }
}

/// `Unsupported`, as a backend says for a capability it lacks.
fn unsupported<T>(result: crate::Result<T>, what: &str) {
    assert!(
        matches!(result, Err(Error::Unsupported { .. })),
        "{what}: expected Unsupported, got {:?}",
        result.map(|_| ())
    );
}

/// A deleted subscription forgets its position: subscribing again under its name starts
/// afresh, at the channel's earliest message, not after what the deleted one acked.
pub async fn deleted_subscription_starts_afresh(client: Arc<dyn Client>) {
    let topic = unique("afresh");
    if !client.capabilities().delete_subscriptions {
        unsupported(
            client.delete_subscription(&topic, "sub").await,
            "delete_subscription",
        );
        return;
    }
    let ids = send_n(&client, &topic, 3).await;
    let mut consumer = client
        .subscribe(ConsumerOptions::new(&topic, "sub"))
        .await
        .expect("consumer");
    for id in &ids[..2] {
        let msg = recv(&mut consumer).await;
        assert_eq!(&msg.id, id);
        consumer.ack(&msg).await.expect("ack");
    }
    consumer.close().await;
    client
        .delete_subscription(&topic, "sub")
        .await
        .expect("delete subscription");
    let mut fresh = client
        .subscribe(ConsumerOptions::new(&topic, "sub"))
        .await
        .expect("subscribe again");
    let again = recv(&mut fresh).await;
    assert_eq!(again.id, ids[0], "a deleted subscription starts afresh");
    fresh.close().await;
}

/// An id past the newest message is `PastEnd` for consumers, readers and both streams, and a
/// refused stream seek leaves the stream where it was. (Ids of a longer channel stand in for
/// ids this channel has not assigned yet.)
pub async fn seek_outside_the_channel(client: Arc<dyn Client>) {
    let caps = client.capabilities();
    let (short, long) = (unique("short"), unique("long"));
    let mut out = MsgStream::new(client.clone(), StreamOptions::default());
    out.as_producer(&[short.as_str()]).await.expect("producer");
    let short_ids = out
        .produce_mark(&pack((0..3).map(|i| insert(i, 10 + i as u64, 0)).collect()))
        .await
        .expect("produce")
        .remove(&short)
        .expect("ids");
    let long_ids = send_n(&client, &long, 10).await;
    let beyond = long_ids[9].clone();
    assert!(
        beyond > short_ids[2],
        "the stand-in id is past the short channel's end"
    );
    let mut consumer = client
        .subscribe(ConsumerOptions::new(&short, "sub"))
        .await
        .expect("consumer");
    if !caps.seek {
        unsupported(consumer.seek(&beyond, true).await, "seek");
        consumer.close().await;
        return;
    }
    assert!(matches!(
        consumer.seek(&beyond, true).await,
        Err(Error::PastEnd { .. })
    ));
    consumer
        .seek(&short_ids[2], false)
        .await
        .expect("right after the newest is the end, and allowed");
    consumer.close().await;
    if caps.readers {
        let options = ReaderOptions {
            topic: short.clone(),
            start: beyond.clone(),
            inclusive: true,
        };
        assert!(matches!(
            client.create_reader(options).await.map(|_| ()),
            Err(Error::PastEnd { .. })
        ));
    } else {
        let options = ReaderOptions {
            topic: short.clone(),
            start: short_ids[0].clone(),
            inclusive: true,
        };
        unsupported(client.create_reader(options).await, "create_reader");
    }
    // A plain stream: the refused seek changes nothing, the next message is still the first.
    let mut stream = MsgStream::new(client.clone(), StreamOptions::default());
    stream
        .as_consumer(&[short.as_str()], "stream", InitialPosition::Earliest)
        .await
        .expect("as_consumer");
    let bad = MsgPosition {
        channel_name: short.clone().into(),
        msg_id: beyond.clone(),
        ..MsgPosition::default()
    };
    assert!(matches!(
        stream.seek_inclusive(std::slice::from_ref(&bad)).await,
        Err(Error::PastEnd { .. })
    ));
    let pack = within("a pack", stream.next_pack())
        .await
        .expect("open")
        .expect("pack");
    assert_eq!(row_id(&pack.msgs[0]), 0, "a refused seek moved nothing");
    stream.close().await;
    // The tt stream likewise.
    let mut tt = TtMsgStream::new(client.clone(), StreamOptions::default());
    tt.as_consumer(&[short.as_str()], "tt", InitialPosition::Earliest)
        .await
        .expect("as_consumer");
    assert!(matches!(tt.seek(&[bad]).await, Err(Error::PastEnd { .. })));
    tt.close().await;
}

/// A channel named twice, or one a stream already consumes, is `InvalidArgument`.
pub async fn repeated_channel_names(client: Arc<dyn Client>) {
    let (a, b) = (unique("twice-a"), unique("twice-b"));
    let mut stream = MsgStream::new(client.clone(), StreamOptions::default());
    let invalid = |r: crate::Result<()>| matches!(r, Err(Error::InvalidArgument(_)));
    assert!(invalid(
        stream
            .as_consumer(&[a.as_str(), a.as_str()], "sub", InitialPosition::Earliest)
            .await
    ));
    stream
        .as_consumer(&[a.as_str()], "sub", InitialPosition::Earliest)
        .await
        .expect("as_consumer");
    assert!(invalid(
        stream
            .as_consumer(&[b.as_str(), a.as_str()], "sub", InitialPosition::Earliest)
            .await
    ));
    assert!(invalid(stream.as_producer(&[b.as_str(), b.as_str()]).await));
    stream.as_producer(&[b.as_str()]).await.expect("producer");
    assert!(invalid(stream.as_producer(&[b.as_str()]).await));
    let repeated = stream.as_reader(&[b.as_str(), b.as_str()], "r").await;
    if client.capabilities().readers {
        assert!(invalid(repeated));
    } else {
        assert!(
            matches!(
                repeated,
                Err(Error::InvalidArgument(_) | Error::Unsupported { .. })
            ),
            "no readers: refused either way"
        );
    }
    stream.close().await;
    let mut tt = TtMsgStream::new(client.clone(), StreamOptions::default());
    assert!(invalid(
        tt.as_consumer(&[b.as_str(), b.as_str()], "tt", InitialPosition::Earliest)
            .await
    ));
    // An absurd buffer is refused, not a panic in the queue allocation.
    let huge = StreamOptions {
        buffer: 4611686018427387904,
        ..StreamOptions::default()
    };
    let mut tt = TtMsgStream::new(client.clone(), huge.clone());
    assert!(invalid(
        tt.as_consumer(&[b.as_str()], "tt", InitialPosition::Earliest)
            .await
    ));
    let mut plain = MsgStream::new(client.clone(), huge);
    assert!(invalid(
        plain
            .as_consumer(&[b.as_str()], "huge", InitialPosition::Earliest)
            .await
    ));
}

/// The plain stream acks a message only once the application asked for the next one (or
/// committed it): a restart from the subscription resumes exactly at the first message not
/// finished. With auto-commit off, only `commit` moves the subscription.
pub async fn plain_commit_semantics(client: Arc<dyn Client>) {
    let a = unique("commit");
    let mut out = MsgStream::new(client.clone(), StreamOptions::default());
    out.as_producer(&[a.as_str()]).await.expect("producer");
    out.produce(&pack((0..6).map(|i| insert(i, 10 + i as u64, 0)).collect()))
        .await
        .expect("produce");
    let manual = StreamOptions {
        auto_commit: false,
        ..StreamOptions::default()
    };
    let mut stream = MsgStream::new(client.clone(), manual.clone());
    stream
        .as_consumer(&[a.as_str()], "sub", InitialPosition::Earliest)
        .await
        .expect("as_consumer");
    let mut packs = Vec::new();
    for _ in 0..3 {
        packs.push(
            within("a pack", stream.next_pack())
                .await
                .expect("open")
                .expect("pack"),
        );
    }
    stream
        .commit(&packs[0].end_positions)
        .await
        .expect("commit the first");
    stream.close().await;
    let mut again = MsgStream::new(client.clone(), StreamOptions::default());
    again
        .as_consumer(&[a.as_str()], "sub", InitialPosition::Earliest)
        .await
        .expect("as_consumer");
    assert_eq!(
        next_row(&mut again).await,
        1,
        "resumes after the committed one"
    );
    assert_eq!(next_row(&mut again).await, 2);
    // Asking for 2 committed 1; close commits 2 as it was handed over.
    again.close().await;
    let mut third = MsgStream::new(client.clone(), StreamOptions::default());
    third
        .as_consumer(&[a.as_str()], "sub", InitialPosition::Earliest)
        .await
        .expect("as_consumer");
    assert_eq!(
        next_row(&mut third).await,
        3,
        "auto-commit: resumes after the last handed over"
    );
    third.close().await;
}

/// The tt stream commits a pack only once the application has had it: restarting from the
/// subscription after committing pack 1 of 2 yields pack 2's messages first.
pub async fn tt_commit_semantics(client: Arc<dyn Client>) {
    let (a, b) = (unique("ttc-a"), unique("ttc-b"));
    for channel in [&a, &b] {
        let mut out = TtMsgStream::new(client.clone(), StreamOptions::default());
        out.as_producer(&[channel.as_str()])
            .await
            .expect("producer");
        let msgs = vec![
            insert(1, 1, 0),
            TsMsg::time_tick(5).with_hash_keys(vec![0]),
            insert(7, 7, 0),
            TsMsg::time_tick(10).with_hash_keys(vec![0]),
            insert(12, 12, 0),
            TsMsg::time_tick(15).with_hash_keys(vec![0]),
        ];
        out.produce(&pack(msgs)).await.expect("produce");
    }
    let channels = [a.as_str(), b.as_str()];
    let manual = StreamOptions {
        auto_commit: false,
        ..StreamOptions::default()
    };
    let mut stream = TtMsgStream::new(client.clone(), manual);
    stream
        .as_consumer(&channels, "tt", InitialPosition::Earliest)
        .await
        .expect("as_consumer");
    let mut packs = Vec::new();
    for _ in 0..2 {
        packs.push(
            within("a tt pack", stream.next_pack())
                .await
                .expect("open")
                .expect("pack"),
        );
    }
    let rows = |p: &MsgPack| p.msgs.iter().map(row_id).collect::<Vec<_>>();
    assert_eq!(rows(&packs[0]), vec![1, 1]);
    assert_eq!(rows(&packs[1]), vec![7, 7]);
    stream
        .commit(&packs[0].end_positions)
        .await
        .expect("commit pack 1");
    stream.close().await;
    let mut again = TtMsgStream::new(client.clone(), StreamOptions::default());
    again
        .as_consumer(&channels, "tt", InitialPosition::Earliest)
        .await
        .expect("as_consumer");
    let first = within("a tt pack", again.next_pack())
        .await
        .expect("open")
        .expect("pack");
    assert_eq!(rows(&first), vec![7, 7], "pack 2 again, nothing of pack 1");
    // Asking for the next pack commits pack 2 (auto-commit); close commits the one handed over.
    let second = within("a tt pack", again.next_pack())
        .await
        .expect("open")
        .expect("pack");
    assert_eq!(rows(&second), vec![12, 12]);
    again.close().await;
    let mut third = TtMsgStream::new(client.clone(), StreamOptions::default());
    third
        .as_consumer(&channels, "tt", InitialPosition::Earliest)
        .await
        .expect("as_consumer");
    assert_eq!(third.stats().uncommitted, 0);
    third.close().await;
    if let Some(subs) = listed(client.list_subscriptions(&a).await) {
        let tt = subs.iter().find(|s| s.name == "tt");
        let tt = tt.unwrap_or_else(|| panic!("the tt subscription is listed: {subs:?}"));
        // A lag the backend cannot tell is `None` (the listing says so); one it tells is 0.
        if let Some(lag) = tt.lag {
            assert_eq!(lag, 0, "everything of channel a was committed");
        }
    }
}

/// Drives `stream` until it reports a capped channel, checking that no pack comes meanwhile
/// (none can be cut before the capped channel ticks).
async fn until_capped(stream: &mut TtMsgStream) {
    let deadline = tokio::time::Instant::now() + super::WAIT;
    while stream.stats().capped.is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "never capped");
        let step =
            tokio::time::timeout(std::time::Duration::from_millis(50), stream.next_pack()).await;
        assert!(
            step.is_err(),
            "no pack before the capped channel ticks: {step:?}"
        );
    }
}

/// A channel that sends without ticking is capped: the stream stops reading it at
/// `max_held_per_channel`, says so in its stats, and resumes by itself once the channel ticks.
pub async fn tt_caps_a_channel_without_ticks(client: Arc<dyn Client>) {
    let (a, b) = (unique("cap-a"), unique("cap-b"));
    let mut out = TtMsgStream::new(client.clone(), StreamOptions::default());
    out.as_producer(&[a.as_str(), b.as_str()])
        .await
        .expect("producer");
    let on = |channel: u32, msgs: Vec<TsMsg>| {
        msgs.into_iter()
            .map(|m| m.with_hash_keys(vec![channel]))
            .collect::<Vec<_>>()
    };
    out.produce(&pack(on(1, vec![TsMsg::time_tick(20)])))
        .await
        .expect("b ticks");
    out.produce(&pack(on(
        0,
        (1..=12).map(|i| insert(i, i as u64, 0)).collect(),
    )))
    .await
    .expect("a sends without ticking");
    let options = StreamOptions {
        buffer: 4,
        max_held_per_channel: 10,
        ..StreamOptions::default()
    };
    let mut stream = TtMsgStream::new(client.clone(), options);
    stream
        .as_consumer(&[a.as_str(), b.as_str()], "cap", InitialPosition::Earliest)
        .await
        .expect("as_consumer");
    until_capped(&mut stream).await;
    let capped = stream.stats().capped;
    assert_eq!(capped.len(), 1);
    assert_eq!(
        (capped[0].channel.as_str(), capped[0].held),
        (a.as_str(), 10)
    );
    out.produce(&pack(on(0, vec![TsMsg::time_tick(20)])))
        .await
        .expect("a ticks");
    let pack = within("the pack after the tick", stream.next_pack())
        .await
        .expect("open")
        .expect("pack");
    assert_eq!(
        pack.msgs.iter().map(row_id).collect::<Vec<_>>(),
        (1..=12).collect::<Vec<_>>()
    );
    assert!(stream.stats().capped.is_empty(), "resumed");
    stream.close().await;
}

/// A late message inside a long run (one the stream moves into its aligner as a block) is
/// reported, the rest of the run follows in the next pack, and the run's tick counts once: a
/// channel capped afterwards resumes at its next tick (a tick counted twice would leave the
/// stream waiting for one more).
pub async fn tt_late_message_in_a_long_run(client: Arc<dyn Client>) {
    let a = unique("late-run");
    let mut out = TtMsgStream::new(client.clone(), StreamOptions::default());
    out.as_producer(&[a.as_str()]).await.expect("producer");
    let on_a = |msgs: Vec<TsMsg>| {
        msgs.into_iter()
            .map(|m| m.with_hash_keys(vec![0]))
            .collect::<Vec<_>>()
    };
    out.produce(&pack(on_a(vec![TsMsg::time_tick(10)])))
        .await
        .expect("first tick");
    let options = StreamOptions {
        max_held_per_channel: 40,
        ..StreamOptions::default()
    };
    let mut stream = TtMsgStream::new(client.clone(), options);
    stream
        .as_consumer(&[a.as_str()], "late", InitialPosition::Earliest)
        .await
        .expect("as_consumer");
    let first = within("the first pack", stream.next_pack())
        .await
        .expect("open")
        .expect("pack");
    assert_eq!((first.begin_ts, first.end_ts, first.msgs.len()), (0, 10, 0));
    // 11..=44 with a message at 5 in the middle (below the pack already cut), a tick at 50,
    // then 45 messages with no tick: more than the channel may hold.
    let mut msgs: Vec<TsMsg> = (11..=44).map(|i| insert(i, i as u64, 0)).collect();
    msgs.insert(10, insert(5, 5, 0));
    msgs.push(TsMsg::time_tick(50));
    msgs.extend((51..=95).map(|i| insert(i, i as u64, 0)));
    out.produce(&pack(on_a(msgs))).await.expect("the long run");
    match within("the late message", stream.next_pack())
        .await
        .expect("open")
    {
        Err(Error::LateMessage { timestamp, .. }) => assert_eq!(timestamp, 5),
        other => panic!("expected the late message, got {other:?}"),
    }
    let pack_50 = within("the pack up to 50", stream.next_pack())
        .await
        .expect("open")
        .expect("pack");
    assert_eq!((pack_50.begin_ts, pack_50.end_ts), (10, 50));
    assert_eq!(
        pack_50.msgs.iter().map(row_id).collect::<Vec<_>>(),
        (11..=44).collect::<Vec<_>>()
    );
    until_capped(&mut stream).await;
    out.produce(&pack(on_a(vec![TsMsg::time_tick(100)])))
        .await
        .expect("the next tick");
    let pack_100 = within("the pack after the cap", stream.next_pack())
        .await
        .expect("open")
        .expect("pack");
    assert_eq!(
        pack_100.msgs.iter().map(row_id).collect::<Vec<_>>(),
        (51..=95).collect::<Vec<_>>()
    );
    stream.close().await;
}

/// A consumer task that panics (here in an application decoder) ends the stream with an error
/// naming the channel, instead of leaving `next_pack` waiting forever.
pub async fn stream_ends_when_a_decoder_panics(client: Arc<dyn Client>) {
    const BOOM: i32 = 9001;
    let a = unique("panic");
    let mut out = MsgStream::new(client.clone(), StreamOptions::default());
    out.as_producer(&[a.as_str()]).await.expect("producer");
    let custom = crate::msg::MsgBase::new(BOOM, 1, 5);
    let payload = prost::Message::encode_to_vec(&crate::msg::MsgHeader { base: Some(custom) });
    let body = crate::msg::CustomMsg::from_payload(payload).expect("custom");
    out.produce(&pack(vec![
        TsMsg::new(crate::msg::MsgBody::Custom(body)).with_hash_keys(vec![0])
    ]))
    .await
    .expect("produce");
    let mut registry = crate::msg::DecoderRegistry::default();
    registry.register(BOOM, |_| panic!("decoder bug"));
    let options = StreamOptions {
        registry: Arc::new(registry),
        ..StreamOptions::default()
    };
    let mut plain = MsgStream::new(client.clone(), options.clone());
    plain
        .as_consumer(&[a.as_str()], "plain", InitialPosition::Earliest)
        .await
        .expect("as_consumer");
    match within("the panic report", plain.next_pack()).await {
        Some(Err(e)) => assert!(e.to_string().contains("panicked"), "{e}"),
        other => panic!("expected the panic as an error item, got {other:?}"),
    }
    assert!(
        within("the end", plain.next_pack()).await.is_none(),
        "the stream ended"
    );
    plain.close().await;
    let mut tt = TtMsgStream::new(client.clone(), options);
    tt.as_consumer(&[a.as_str()], "tt", InitialPosition::Earliest)
        .await
        .expect("as_consumer");
    match within("the panic report", tt.next_pack()).await {
        Some(Err(e)) => assert!(e.to_string().contains(&a), "{e}"),
        other => panic!("expected the panic as an error item, got {other:?}"),
    }
    assert!(within("the end", tt.next_pack()).await.is_none());
    tt.close().await;
}

/// The rest of Milvus's stream interface: produce switched off and on, `check_topic_valid`, a
/// borrowing `futures::Stream` of packs, and the tt stream's latest id and readers.
pub async fn stream_interface_extras(client: Arc<dyn Client>) {
    use futures::StreamExt;
    let a = unique("extras");
    let mut out = TtMsgStream::new(client.clone(), StreamOptions::default());
    out.as_producer(&[a.as_str()]).await.expect("producer");
    out.enable_produce(false);
    assert!(matches!(
        out.produce(&pack(vec![insert(1, 1, 0)])).await,
        Err(Error::ProduceDisabled)
    ));
    out.enable_produce(true);
    let ticks = vec![
        insert(1, 1, 0),
        TsMsg::time_tick(5).with_hash_keys(vec![0]),
        insert(7, 7, 0),
        TsMsg::time_tick(10).with_hash_keys(vec![0]),
    ];
    let ids = out
        .produce_mark(&pack(ticks))
        .await
        .expect("produce")
        .remove(&a)
        .expect("ids");
    match client.list_topics().await {
        Ok(_) => {
            out.check_topic_valid(&a).await.expect("exists");
            assert!(matches!(
                out.check_topic_valid(&unique("never-made")).await,
                Err(Error::UnknownChannel { .. })
            ));
        }
        Err(Error::Unsupported { .. }) => assert!(matches!(
            out.check_topic_valid(&a).await,
            Err(Error::Unsupported { .. })
        )),
        Err(other) => panic!("list_topics: {other}"),
    }
    let mut stream = TtMsgStream::new(client.clone(), StreamOptions::default());
    stream
        .as_consumer(&[a.as_str()], "extras", InitialPosition::Earliest)
        .await
        .expect("as_consumer");
    let first = within("a pack", stream.packs().next())
        .await
        .expect("open")
        .expect("pack");
    assert_eq!(first.end_ts, 5);
    let second = within("a pack", stream.packs().next())
        .await
        .expect("open")
        .expect("pack");
    assert_eq!(second.msgs.iter().map(row_id).collect::<Vec<_>>(), vec![7]);
    if client.capabilities().latest_id {
        assert_eq!(
            stream.latest_message_id(&a).await.expect("latest"),
            ids.last().cloned()
        );
    }
    if client.capabilities().readers {
        stream.as_reader(&[a.as_str()], "r").await.expect("reader");
        assert!(stream.has_next(&a).await.expect("has_next"));
        let msg = within("a read", stream.next(&a)).await.expect("next");
        assert_eq!(row_id(&msg), 1);
    }
    stream.close().await;
}

/// The plain stream stamps a message's position with its `begin_ts`, as Milvus does (a
/// two-row insert written as one message: begin 5, end 9).
pub async fn plain_positions_carry_begin_ts(client: Arc<dyn Client>) {
    use crate::msg::{InsertRequest, MsgBase, MsgBody, MsgType};
    let a = unique("begin-ts");
    let two_rows = TsMsg::new(MsgBody::Insert(InsertRequest {
        base: Some(MsgBase::new(MsgType::Insert as i32, 1, 9)),
        timestamps: [5, 9].into(),
        row_ids: [1, 2].into(),
        num_rows: 2,
        ..Default::default()
    }));
    let producer = client.create_producer(&a).await.expect("producer");
    producer
        .send(ProducerMessage::new(two_rows.encode()))
        .await
        .expect("send");
    let mut stream = MsgStream::new(client.clone(), StreamOptions::default());
    stream
        .as_consumer(&[a.as_str()], "sub", InitialPosition::Earliest)
        .await
        .expect("as_consumer");
    let pack = within("a pack", stream.next_pack())
        .await
        .expect("open")
        .expect("pack");
    assert_eq!((pack.begin_ts, pack.end_ts), (5, 9));
    assert_eq!(pack.end_positions[0].timestamp, 5, "Milvus's BeginTs");
    stream.close().await;
}
