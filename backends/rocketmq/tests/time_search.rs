//! Seeking by time against the real broker: the broker's search by store time
//! (`SEARCH_OFFSET_BY_TIMESTAMP`) is what finds the start, and the answer is exact; without
//! hybrid timestamps it is `Unsupported`.

mod support;

use msgstream::mq::time::{hybrid_from_unix_ms, hybrid_physical_ms};
use msgstream::mq::{Client, MessageId, ProducerMessage, TimePosition, Timestamps};
use msgstream::msg::TsMsg;
use msgstream::testkit::unique;
use msgstream::Error;
use msgstream_rocketmq::{RocketMqClient, RocketMqConfig};

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .expect("clock after 1970")
}

async fn client(timestamps: Timestamps) -> RocketMqClient {
    RocketMqClient::connect(RocketMqConfig {
        timestamps,
        ..support::shared().config()
    })
    .await
    .expect("connect")
}

/// Sends five ticks stamped with the clock now; returns their ids and the last timestamp.
async fn round(client: &RocketMqClient, channel: &str, after: u64) -> (Vec<MessageId>, u64) {
    let producer = client.create_producer(channel).await.expect("producer");
    let (mut ids, mut ts) = (Vec::new(), after);
    for _ in 0..5 {
        ts = hybrid_from_unix_ms(now_ms()).max(ts + 1);
        let message = ProducerMessage::new(TsMsg::time_tick(ts).encode()).with_timestamp(ts);
        ids.push(producer.send(message).await.expect("send"));
    }
    (ids, ts)
}

/// Waits (on the clock itself) until it reads a later millisecond than `ms`.
fn clock_past(ms: u64) {
    while now_ms() <= ms {
        std::thread::yield_now();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_broker_search_skips_what_was_stored_before_the_time() {
    let client = client(Timestamps::Hybrid { clock_slack_ms: 0 }).await;
    assert!(client.capabilities().seek_time);
    let channel = unique("time");
    let (first, last) = round(&client, &channel, 0).await;
    // Every message of the first round was stored at or before this millisecond.
    clock_past(hybrid_physical_ms(last).max(now_ms()));
    let (second, _) = round(&client, &channel, last).await;
    let target = timestamp_at(&client, &channel, &second[0]).await;
    let bound = client
        .time_lower_bound(&channel, target)
        .await
        .expect("bound");
    assert!(
        bound > first[4] && bound <= second[0],
        "the search skipped the first round: {bound:?} (first round ends at {:?})",
        first[4]
    );
    let at = client
        .message_id_at_time(&channel, target)
        .await
        .expect("at");
    assert_eq!(
        at,
        TimePosition {
            id: second[0].clone(),
            inclusive: true
        }
    );
}

/// The timestamp of the message at `id`, read back.
async fn timestamp_at(client: &RocketMqClient, channel: &str, id: &MessageId) -> u64 {
    let mut reader = client
        .create_reader(msgstream::mq::ReaderOptions {
            topic: channel.to_owned(),
            start: id.clone(),
            inclusive: true,
        })
        .await
        .expect("reader");
    let message = reader.next().await.expect("next");
    msgstream::mq::message_timestamp(&message.payload).expect("a tick")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opaque_timestamps_cannot_be_searched() {
    let client = client(Timestamps::Opaque).await;
    assert!(!client.capabilities().seek_time);
    let result = client.time_lower_bound(&unique("opaque"), 42).await;
    assert!(
        matches!(result, Err(Error::Unsupported { .. })),
        "{result:?}"
    );
}
