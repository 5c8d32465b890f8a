//! Checks of the plain `MsgStream`.

use std::sync::Arc;

use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};

use super::{insert, row_id, unique, within};
use crate::mq::{Client, InitialPosition, ProducerMessage};
use prost::Message as _;

use crate::msg::{MsgBase, MsgBody, MsgPack, MsgPosition, TimeTickMsg, TsMsg};
use crate::stream::{MsgStream, StreamOptions};
use crate::Error;

pub(super) fn pack(msgs: Vec<TsMsg>) -> MsgPack {
    MsgPack {
        msgs,
        ..MsgPack::default()
    }
}

pub(super) async fn producer(client: &Arc<dyn Client>, channels: &[&str]) -> MsgStream {
    let mut stream = MsgStream::new(client.clone(), StreamOptions::default());
    stream.as_producer(channels).await.expect("as_producer");
    stream
}

pub(super) async fn consumer(
    client: &Arc<dyn Client>,
    channels: &[&str],
    position: InitialPosition,
) -> MsgStream {
    let mut stream = MsgStream::new(client.clone(), StreamOptions::default());
    stream
        .as_consumer(channels, "sub", position)
        .await
        .expect("as_consumer");
    stream
}

pub(super) async fn next_msg(stream: &mut MsgStream) -> TsMsg {
    let pack = within("a pack", stream.next_pack())
        .await
        .expect("stream open")
        .expect("pack");
    assert_eq!(pack.msgs.len(), 1, "plain packs hold one message");
    assert_eq!(pack.start_positions, pack.end_positions);
    pack.msgs.into_iter().next().expect("one message")
}

/// Produce to 2 channels by hash key, consume both; positions name the right channel and id.
pub async fn plain_stream_two_channels(client: Arc<dyn Client>) {
    let (a, b) = (unique("plain-a"), unique("plain-b"));
    let channels = [a.as_str(), b.as_str()];
    let out = producer(&client, &channels).await;
    let msgs: Vec<TsMsg> = (0..10)
        .map(|i| insert(i, 100 + i as u64, i as u32))
        .collect();
    let ids = out.produce_mark(&pack(msgs)).await.expect("produce");
    assert_eq!(ids[&a].len(), 5);
    assert_eq!(ids[&b].len(), 5);
    let mut input = consumer(&client, &channels, InitialPosition::Earliest).await;
    let mut per_channel: std::collections::HashMap<String, Vec<(i64, Vec<u8>)>> =
        Default::default();
    for _ in 0..10 {
        let msg = next_msg(&mut input).await;
        let position = msg.position.clone().expect("position");
        assert_eq!(position.timestamp, msg.end_ts());
        assert_eq!(position.msg_group, "sub");
        per_channel
            .entry(position.channel_name.to_string())
            .or_default()
            .push((row_id(&msg), position.msg_id.as_bytes().to_vec()));
    }
    for (channel, parity) in [(&a, 0), (&b, 1)] {
        let got = &per_channel[channel];
        let rows: Vec<i64> = got.iter().map(|(r, _)| *r).collect();
        let expected: Vec<i64> = (0..10).filter(|i| i % 2 == parity).collect();
        assert_eq!(rows, expected, "channel {channel} in order");
        let got_ids: Vec<Vec<u8>> = got.iter().map(|(_, id)| id.clone()).collect();
        let want_ids: Vec<Vec<u8>> = ids[channel]
            .iter()
            .map(|id| id.as_bytes().to_vec())
            .collect();
        assert_eq!(got_ids, want_ids, "positions carry the produced ids");
    }
    input.close().await;
}

/// produce_mark / broadcast_mark return ids per channel; empty packs are refused there.
pub async fn marks_and_broadcast(client: Arc<dyn Client>) {
    let (a, b, c) = (unique("mark-a"), unique("mark-b"), unique("mark-c"));
    let channels = [a.as_str(), b.as_str(), c.as_str()];
    let out = producer(&client, &channels).await;
    let ids = out
        .broadcast_mark(&pack(vec![TsMsg::time_tick(5), TsMsg::time_tick(6)]))
        .await
        .expect("broadcast_mark");
    assert_eq!(ids.len(), 3);
    assert!(ids.values().all(|v| v.len() == 2 && v[0] < v[1]));
    let ids = out
        .produce_mark(&pack(vec![insert(1, 7, 4)]))
        .await
        .expect("produce_mark");
    assert_eq!(
        ids.keys().collect::<Vec<_>>(),
        vec![&b],
        "key 4 % 3 channels = channel 1"
    );
    for result in [
        out.produce_mark(&MsgPack::default()).await,
        out.broadcast_mark(&MsgPack::default()).await,
    ] {
        assert!(
            matches!(result, Err(Error::InvalidArgument(_))),
            "{result:?}"
        );
    }
    out.produce(&MsgPack::default())
        .await
        .expect("empty produce writes nothing");
    let mut input = consumer(&client, &[a.as_str()], InitialPosition::Earliest).await;
    assert!(next_msg(&mut input).await.is_time_tick());
}

/// Seek inclusive and exclusive to a stored position, in a new stream.
pub async fn plain_seek_to_stored_position(client: Arc<dyn Client>) {
    let a = unique("pseek");
    let out = producer(&client, &[a.as_str()]).await;
    out.produce(&pack((0..6).map(|i| insert(i, 10 + i as u64, 0)).collect()))
        .await
        .expect("produce");
    let mut first = consumer(&client, &[a.as_str()], InitialPosition::Earliest).await;
    let mut positions = Vec::new();
    for _ in 0..6 {
        positions.push(next_msg(&mut first).await.position.expect("position"));
    }
    first.close().await;
    let stored = MsgPosition::from_bytes(&positions[2].to_bytes()).expect("stored position");
    if !client.capabilities().seek {
        let mut again = consumer(&client, &[a.as_str()], InitialPosition::Earliest).await;
        assert!(matches!(
            again.seek_inclusive(&[stored]).await,
            Err(Error::Unsupported { .. })
        ));
        return;
    }
    let mut again = consumer(&client, &[a.as_str()], InitialPosition::Earliest).await;
    again
        .seek_inclusive(std::slice::from_ref(&stored))
        .await
        .expect("seek inclusive");
    assert_eq!(row_id(&next_msg(&mut again).await), 2);
    again.seek(&[stored]).await.expect("seek exclusive");
    assert_eq!(
        row_id(&next_msg(&mut again).await),
        3,
        "exclusive resumes right after"
    );
    assert_eq!(row_id(&next_msg(&mut again).await), 4);
}

/// A Latest subscription sees only messages produced after it.
pub async fn plain_latest_subscription(client: Arc<dyn Client>) {
    let a = unique("plast");
    let out = producer(&client, &[a.as_str()]).await;
    out.produce(&pack(vec![insert(1, 1, 0)]))
        .await
        .expect("produce");
    let mut input = consumer(&client, &[a.as_str()], InitialPosition::Latest).await;
    out.produce(&pack(vec![insert(2, 2, 0)]))
        .await
        .expect("produce");
    assert_eq!(row_id(&next_msg(&mut input).await), 2);
}

/// Empty names, no producers, unsubscribed channels and corrupt positions are clear errors.
pub async fn stream_bad_inputs(client: Arc<dyn Client>) {
    let mut stream = MsgStream::new(client.clone(), StreamOptions::default());
    assert!(matches!(
        stream.as_producer(&[""]).await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        stream
            .as_consumer(&[""], "sub", InitialPosition::Earliest)
            .await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        stream.produce(&pack(vec![insert(1, 1, 0)])).await,
        Err(Error::InvalidArgument(_))
    ));
    let a = unique("pbad");
    stream
        .as_consumer(&[a.as_str()], "sub", InitialPosition::Earliest)
        .await
        .expect("as_consumer");
    let elsewhere = MsgPosition {
        channel_name: unique("other").into(),
        msg_id: client.earliest_message_id(),
        ..MsgPosition::default()
    };
    assert!(matches!(
        stream.seek_inclusive(&[elsewhere]).await,
        Err(Error::NotSubscribed { .. })
    ));
    let corrupt = MsgPosition {
        channel_name: a.clone().into(),
        msg_id: crate::mq::MessageId::from_backend_bytes([0xde, 0xad]),
        ..MsgPosition::default()
    };
    assert!(matches!(
        stream.seek_inclusive(&[corrupt]).await,
        Err(Error::Decode(_))
    ));
    assert!(matches!(
        MsgPosition::from_bytes(&[0xff, 0xff, 0xff]),
        Err(Error::Decode(_))
    ));
    assert!(
        matches!(stream.next(&a).await, Err(Error::NotSubscribed { .. })),
        "no reader on it"
    );
    // Garbage on the channel is an error item, a kind nobody registered comes through whole,
    // and the stream goes on.
    let raw = client.create_producer(&a).await.expect("producer");
    raw.send(ProducerMessage::new(&b"\xff\xffgarbage"[..]))
        .await
        .expect("send garbage");
    let foreign = TimeTickMsg {
        base: Some(MsgBase::new(7777, 3, 8)),
    }
    .encode_to_vec();
    raw.send(ProducerMessage::new(foreign.clone()))
        .await
        .expect("send unknown kind");
    producer(&client, &[a.as_str()])
        .await
        .produce(&pack(vec![insert(9, 9, 0)]))
        .await
        .expect("produce");
    let garbage = within("an error item", stream.next_pack())
        .await
        .expect("stream open");
    assert!(
        matches!(&garbage, Err(Error::Decode(reason)) if reason.contains(a.as_str())),
        "the error names the channel: {garbage:?}"
    );
    let unknown = next_msg(&mut stream).await;
    assert!(
        matches!(unknown.body(), MsgBody::Unknown(m) if m.base.msg_type == 7777),
        "{unknown:?}"
    );
    assert_eq!(unknown.encode(), foreign);
    assert_eq!(row_id(&next_msg(&mut stream).await), 9);
}

/// The producer's trace context travels in `traceparent` and is restored on consumption.
pub async fn trace_context_round_trip(client: Arc<dyn Client>) {
    let a = unique("trace");
    let out = producer(&client, &[a.as_str()]).await;
    let sc = SpanContext::new(
        TraceId::from(0x0af7651916cd43dd8448eb211c80319c_u128),
        SpanId::from(0xb7ad6b7169203331_u64),
        TraceFlags::SAMPLED,
        true,
        TraceState::default(),
    );
    let cx = opentelemetry::Context::new().with_remote_span_context(sc.clone());
    {
        let msgs = pack(vec![insert(1, 1, 0)]);
        let fut = out.produce(&msgs);
        let _guard = cx.attach();
        fut.await.expect("produce");
    }
    let mut input = consumer(&client, &[a.as_str()], InitialPosition::Earliest).await;
    let msg = next_msg(&mut input).await;
    let restored = crate::trace::extract(&msg.properties);
    assert_eq!(restored.span().span_context().trace_id(), sc.trace_id());
    assert_eq!(restored.span().span_context().span_id(), sc.span_id());
}
