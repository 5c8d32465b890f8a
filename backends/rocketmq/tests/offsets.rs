//! What persisting offsets costs and guarantees against the real broker: a stream's commit of
//! a pack persists each queue's offset once (staged acks flushed together), a plain ack is
//! durable when it returns, and a seek whose offset cannot be persisted moves nothing.

mod support;

use std::sync::Arc;

use msgstream::mq::{
    Client, Consumer, ConsumerOptions, InitialPosition, Message, MessageId, ProducerMessage,
};
use msgstream::msg::{MsgPack, TsMsg};
use msgstream::stream::StreamOptions;
use msgstream::testkit::{insert, within};
use msgstream::tt::TtMsgStream;
use msgstream_rocketmq::{RocketMqClient, RocketMqConfig};

/// A client whose periodic persist never runs during a test: every offset sent is one the
/// test caused.
async fn client() -> RocketMqClient {
    RocketMqClient::connect(RocketMqConfig {
        persist_interval_ms: 3_600_000,
        ..support::shared().config()
    })
    .await
    .expect("connect")
}

async fn produce(client: &RocketMqClient, channel: &str, n: usize) {
    let producer = client.create_producer(channel).await.expect("producer");
    for i in 0..n {
        producer
            .send(ProducerMessage::new(format!("{i}")))
            .await
            .expect("send");
    }
}

async fn subscribe(client: &RocketMqClient, channel: &str) -> Box<dyn Consumer> {
    client
        .subscribe(
            ConsumerOptions::new(channel, "s").with_initial_position(InitialPosition::Earliest),
        )
        .await
        .expect("subscribe")
}

async fn recv(consumer: &mut Box<dyn Consumer>) -> Message {
    within("a message", consumer.recv())
        .await
        .expect("recv")
        .expect("open")
}

/// The broker's committed offset of the subscription `s` of `channel`.
async fn committed(client: &RocketMqClient, channel: &str) -> Option<i64> {
    let admin = client.admin();
    let route = admin.name_servers().refresh(channel).await.expect("route");
    let group = format!("{channel}%s");
    admin
        .query_consumer_offset(&group, &route.read_queues[0])
        .await
        .expect("query")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn staged_acks_cost_one_request_per_queue_at_the_flush() {
    let client = client().await;
    let channels = [support::unique("staged-a"), support::unique("staged-b")];
    let mut consumers = Vec::new();
    let mut received = Vec::new();
    for channel in &channels {
        produce(&client, channel, 5).await;
        let mut consumer = subscribe(&client, channel).await;
        let mut messages = Vec::new();
        for _ in 0..5 {
            messages.push(recv(&mut consumer).await);
        }
        received.push(messages);
        consumers.push(consumer);
    }
    let ackers: Vec<_> = consumers.iter().map(|c| c.acker()).collect();
    let before = client.admin().offset_updates();
    for (acker, messages) in ackers.iter().zip(&received) {
        for message in messages {
            acker.stage(message).await.expect("stage");
        }
    }
    assert_eq!(
        client.admin().offset_updates(),
        before,
        "staging sends nothing"
    );
    ackers[0].flush().await.expect("flush");
    assert_eq!(
        client.admin().offset_updates(),
        before + 2,
        "one flush sends every staged queue's offset, once each"
    );
    for channel in &channels {
        assert_eq!(
            committed(&client, channel).await,
            Some(5),
            "{channel} durable"
        );
    }
    ackers[1].flush().await.expect("flush");
    assert_eq!(
        client.admin().offset_updates(),
        before + 2,
        "nothing left to send"
    );
    // A plain ack is durable when it returns: one request of its own.
    produce(&client, &channels[0], 1).await;
    let extra = recv(&mut consumers[0]).await;
    consumers[0].ack(&extra).await.expect("ack");
    assert_eq!(client.admin().offset_updates(), before + 3);
    assert_eq!(committed(&client, &channels[0]).await, Some(6));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pack_commit_persists_each_queue_once() {
    let client = client().await;
    let shared: Arc<dyn Client> = Arc::new(client.clone());
    let channels = [support::unique("pack-a"), support::unique("pack-b")];
    for (c, channel) in channels.iter().enumerate() {
        let mut out = TtMsgStream::new(shared.clone(), StreamOptions::default());
        out.as_producer(&[channel.as_str()])
            .await
            .expect("producer");
        let mut msgs: Vec<TsMsg> = (0..4)
            .map(|i| insert(10 * c as i64 + i, 5 + i as u64, 0))
            .collect();
        msgs.push(TsMsg::time_tick(10).with_hash_keys(vec![0]));
        msgs.extend((0..4).map(|i| insert(100 + 10 * c as i64 + i, 15 + i as u64, 0)));
        msgs.push(TsMsg::time_tick(20).with_hash_keys(vec![0]));
        out.produce(&MsgPack {
            msgs,
            ..MsgPack::default()
        })
        .await
        .expect("produce");
        out.close().await;
    }
    let mut stream = TtMsgStream::new(
        shared.clone(),
        StreamOptions::default().with_auto_commit(false),
    );
    let names = [channels[0].as_str(), channels[1].as_str()];
    stream
        .as_consumer(&names, "s", InitialPosition::Earliest)
        .await
        .expect("consumer");
    for (end, offset) in [(10, 5), (20, 10)] {
        let pack = within("a pack", stream.next_pack())
            .await
            .expect("open")
            .expect("pack");
        assert_eq!((pack.end_ts, pack.msgs.len()), (end, 8));
        let before = client.admin().offset_updates();
        stream.commit(&pack.end_positions).await.expect("commit");
        assert_eq!(
            client.admin().offset_updates() - before,
            2,
            "a pack of eight messages on two queues"
        );
        for channel in &channels {
            assert_eq!(committed(&client, channel).await, Some(offset), "{channel}");
        }
    }
    stream.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seek_whose_offset_cannot_be_persisted_moves_nothing() {
    let client = client().await;
    let channel = support::unique("seek-atomic");
    produce(&client, &channel, 6).await;
    let mut consumer = subscribe(&client, &channel).await;
    for i in 0..3 {
        assert_eq!(
            &recv(&mut consumer).await.payload[..],
            i.to_string().as_bytes()
        );
    }
    // The broker forgets the group: UPDATE_CONSUMER_OFFSET is refused until a pull re-creates
    // it (the test broker creates groups on use). The consumer's fetch task pulls whenever it
    // likes, so a seek made after the deletion may still find the group: such a seek goes
    // through (back to 0), and the test reads up to 3 again and tries anew.
    let group = format!("{channel}%s");
    let mut refused = false;
    for _ in 0..20 {
        client
            .admin()
            .delete_group(&group)
            .await
            .expect("delete group");
        match consumer.seek(&MessageId::from_u64(0), true).await {
            Err(_) => {
                refused = true;
                break;
            }
            Ok(()) => {
                for i in 0..3 {
                    assert_eq!(
                        &recv(&mut consumer).await.payload[..],
                        i.to_string().as_bytes()
                    );
                }
            }
        }
    }
    assert!(refused, "no seek was refused in 20 attempts");
    // Buffered before the seek, then fetched after it: 3 to 6, nothing from 0 again.
    client
        .create_producer(&channel)
        .await
        .expect("producer")
        .send(ProducerMessage::new("6"))
        .await
        .expect("send");
    for i in 3..7 {
        assert_eq!(
            &recv(&mut consumer).await.payload[..],
            i.to_string().as_bytes(),
            "the consumer reads on where it was"
        );
    }
    consumer.close().await;
}
