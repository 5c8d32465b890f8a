//! Consumer groups against a real name server and broker: queue allocation and rebalancing,
//! flow control.

mod support;

use std::time::Duration;

use msgstream::testkit::within;
use msgstream_rocketmq::namespace::Namespace;
use msgstream_rocketmq::protocol::codes;
use msgstream_rocketmq::remoting::{client_id, heartbeat_body, Command, Remoting, RemotingOptions};
use msgstream_rocketmq::{
    ConsumeResult, ConsumerOptions, LitePullConsumer, MessageQueue, QueueSelector, Selector,
};
use support::lite::{admin, bodies, next, options, producer, send, topic};

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

/// The HEART_BEAT every broker connection sends (the Java client's body with a client id of its
/// own, no consumer groups) is accepted and leaves the group members alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_heartbeats_are_accepted_and_keep_group_members() {
    let admin = admin();
    let t = topic(&admin, "hb", 1).await;
    let group = support::unique("hbg");
    let c = LitePullConsumer::new(&admin, Namespace::default(), options(&group)).expect("new");
    c.subscribe(&t, Selector::All).expect("subscribe");
    c.start().await.expect("start");
    let masters = admin.name_servers().masters().await.expect("masters");
    let addr = masters.values().next().expect("a broker");
    let member = |ids: Vec<String>| ids.iter().any(|id| id == c.client_id());
    assert!(member(admin.consumer_ids(addr, &group).await.expect("ids")));
    let remoting = Remoting::new(RemotingOptions::default(), None);
    let beat =
        Command::request(codes::HEART_BEAT, []).with_body(heartbeat_body(&client_id("pool")));
    remoting
        .call(addr, beat, Duration::from_secs(3))
        .await
        .expect("the broker accepts the heartbeat");
    assert!(
        member(admin.consumer_ids(addr, &group).await.expect("ids")),
        "still a member"
    );
    c.shutdown().await.expect("shutdown");
}
