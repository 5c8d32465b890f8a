//! Helpers of the producer and consumer tests: topics, producers, consumer options, polling.

use std::time::Duration;

use msgstream::testkit::within;
use msgstream_rocketmq::namespace::Namespace;
use msgstream_rocketmq::{
    Admin, ConsumeFrom, ConsumeRequest, ConsumerOptions, LitePullConsumer, OutgoingMessage,
    Producer, QueueSelector,
};

/// An admin client of the shared cluster.
pub fn admin() -> Admin {
    super::admin_for(&super::shared().namesrv)
}

pub async fn topic(admin: &Admin, prefix: &str, queues: u32) -> String {
    let name = super::unique(prefix).replace('.', "_");
    admin
        .create_topic(&name, queues)
        .await
        .expect("create topic");
    name
}

/// The broker the tests' topics live on (the only one of the shared cluster; its name is not
/// assumed, so an external cluster named by `MSGSTREAM_ROCKETMQ_NAMESRV` works too).
pub async fn broker(admin: &Admin) -> String {
    let masters = admin.name_servers().masters().await.expect("masters");
    masters.into_keys().next().expect("a broker")
}

pub fn producer(admin: &Admin) -> Producer {
    Producer::new(admin.clone(), "test-producer", Namespace::default(), 2)
}

pub async fn send(
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

pub fn options(group: &str) -> ConsumerOptions {
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

pub async fn next(consumer: &LitePullConsumer) -> ConsumeRequest {
    within("a batch", async {
        loop {
            if let Some(r) = consumer.poll(Duration::from_secs(1)).await.expect("poll") {
                return r;
            }
        }
    })
    .await
}

pub fn bodies(r: &ConsumeRequest) -> Vec<String> {
    r.messages
        .iter()
        .map(|m| String::from_utf8_lossy(&m.body).into_owned())
        .collect()
}
