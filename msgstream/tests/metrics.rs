//! The streams' own events reach the OpenTelemetry instruments: a tt stream that stops reading a
//! channel for not ticking counts one stall (`msgstream.tt.stalls`), and a receive retried
//! after a transient backend error counts one retry (`msgstream.retries`, operation
//! `receive`). Its own test binary: the instruments bind to the global provider on first use,
//! so the provider is installed once, before anything records, and each test counts only its
//! own channels.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use msgstream::mem::MemoryClient;
use msgstream::mq::{Client, InitialPosition};
use msgstream::msg::{MsgBody, MsgPack, TsMsg};
use msgstream::stream::{MsgStream, StreamOptions};
use msgstream::testkit::faults::{Call, FaultyClient};
use msgstream::testkit::metrics::recorded;
use msgstream::testkit::{insert, unique};
use msgstream::tt::TtMsgStream;
use msgstream::Error;

/// Sum of counter `name` over the data points having attribute `key` = `value`.
fn counted(name: &str, key: &str, value: &str) -> u64 {
    recorded().counter(name, key, value)
}

/// Waits (10 s at most) until `check` holds.
async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    tokio::time::timeout(Duration::from_secs(10), async {
        while !check() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("timed out waiting for: {what}"));
}

async fn produce(client: &Arc<dyn Client>, channel: &str, msgs: Vec<TsMsg>) {
    let mut out = MsgStream::new(client.clone(), StreamOptions::default());
    out.as_producer(&[channel]).await.expect("producer");
    out.produce(&MsgPack {
        msgs,
        ..MsgPack::default()
    })
    .await
    .expect("produce");
    out.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_channel_capped_for_not_ticking_counts_one_stall() {
    recorded();
    let client: Arc<dyn Client> = Arc::new(MemoryClient::new());
    let (ticking, silent) = (unique("ticking"), unique("silent"));
    produce(
        &client,
        &ticking,
        vec![TsMsg::time_tick(100).with_hash_keys(vec![0])],
    )
    .await;
    produce(
        &client,
        &silent,
        (1..=8).map(|i| insert(i, i as u64, 0)).collect(),
    )
    .await;
    let mut stream = TtMsgStream::new(
        client.clone(),
        StreamOptions::default().with_max_held_per_channel(4),
    );
    stream
        .as_consumer(
            &[ticking.as_str(), silent.as_str()],
            "stalls",
            InitialPosition::Earliest,
        )
        .await
        .expect("consumer");
    assert_eq!(counted("msgstream.tt.stalls", "channel", &silent), 0);
    let waiting = tokio::spawn(async move {
        let pack = stream.next_pack().await.expect("open").expect("pack");
        (stream, pack)
    });
    eventually("the silent channel was capped", || {
        counted("msgstream.tt.stalls", "channel", &silent) == 1
    })
    .await;
    assert_eq!(counted("msgstream.tt.stalls", "channel", &ticking), 0);
    produce(
        &client,
        &silent,
        vec![TsMsg::time_tick(100).with_hash_keys(vec![0])],
    )
    .await;
    let (mut stream, pack) = waiting.await.expect("stream task");
    assert_eq!(pack.end_ts, 100);
    assert_eq!(
        pack.msgs.len(),
        8,
        "the capped channel's rows come once it ticks"
    );
    assert_eq!(
        counted("msgstream.tt.stalls", "channel", &silent),
        1,
        "one stall is counted once, not per wait"
    );
    stream.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transient_receive_errors_are_retried_and_counted() {
    recorded();
    let before = counted("msgstream.retries", "operation", "receive");
    // The first two receives fail transiently (a broker briefly away).
    let failures = AtomicUsize::new(2);
    let client: Arc<dyn Client> = Arc::new(FaultyClient::new(
        Arc::new(MemoryClient::new()),
        move |call| {
            let fail = matches!(call, Call::Receive(_))
                && failures
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                    .is_ok();
            fail.then(|| Error::transient("flaky", "the broker is briefly away"))
        },
    ));
    let channel = unique("flaky");
    produce(&client, &channel, vec![insert(1, 1, 0), insert(2, 2, 0)]).await;
    let mut stream = MsgStream::new(client.clone(), StreamOptions::default());
    stream
        .as_consumer(&[channel.as_str()], "retries", InitialPosition::Earliest)
        .await
        .expect("consumer");
    let mut rows = Vec::new();
    while rows.len() < 2 {
        let pack = stream.next_pack().await.expect("open").expect("pack");
        rows.extend(pack.msgs.iter().map(|m| match m.body() {
            MsgBody::Insert(i) => i.row_ids[0],
            _ => -1,
        }));
    }
    assert_eq!(rows, [1, 2], "nothing lost or repeated across the retries");
    // Only this test makes receives fail, so the counter moved by exactly its two failures.
    assert_eq!(
        counted("msgstream.retries", "operation", "receive") - before,
        2
    );
    stream.close().await;
}
