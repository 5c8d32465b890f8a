//! The browser over the in-memory backend: pages in both orders and from each start, each
//! message as `consume` shows it, bad input refused with its kind, and nothing moved.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use axum::http::StatusCode;
use msgstream_facade::msgstream::mem::MemoryClient;
use msgstream_facade::msgstream::mq::{
    Client, ConsumerOptions, MessageId, ProducerMessage, Timestamps,
};
use msgstream_facade::msgstream::msg::DecoderRegistry;
use serde_json::Value;

use super::{Browser, PAGE_BUDGET};
use crate::commands::kinds::{build, Kind};
use crate::web::checkpoints::Checkpoints;
use crate::web::state::State;
use crate::web::watch::Watcher;

/// Channel `c`: 120 inserts, message i with payload `m{i}` and timestamp 10·(i+1), the first
/// with a property; then one payload that does not decode (id 120).
async fn channel() -> Arc<dyn Client> {
    channel_of(120).await
}

/// [`channel`] with `inserts` inserts.
async fn channel_of(inserts: u64) -> Arc<dyn Client> {
    let client: Arc<dyn Client> = Arc::new(MemoryClient::new());
    let producer = client.create_producer("c").await.expect("producer");
    for i in 0..inserts {
        let msg = build(
            Kind::Insert,
            i as i64,
            10 * (i + 1),
            0,
            format!("m{i}").into_bytes(),
        )
        .expect("build");
        let mut sent = ProducerMessage::new(msg.encode());
        if i == 0 {
            sent.properties.insert("k".into(), "v".into());
        }
        producer.send(sent).await.expect("send");
    }
    producer
        .send(ProducerMessage::new(vec![0xff, 0x00, 0x01]))
        .await
        .expect("send");
    client
}

async fn ask(client: &Arc<dyn Client>, query: &str) -> (StatusCode, Value) {
    ask_with(client, Checkpoints::default().into(), PAGE_BUDGET, query).await
}

async fn ask_with(
    client: &Arc<dyn Client>,
    checkpoints: Arc<Checkpoints>,
    budget: Duration,
    query: &str,
) -> (StatusCode, Value) {
    let pairs: Vec<(String, String)> = query
        .split('&')
        .filter_map(|p| p.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let browser = Browser {
        registry: Arc::new(DecoderRegistry::default()),
        checkpoints,
        budget,
        timestamps: Timestamps::Opaque,
    };
    browser.answer(client.as_ref(), &pairs).await
}

fn ids(page: &Value) -> Vec<String> {
    page["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| m["id"].as_str().expect("id").to_string())
        .collect()
}

fn range(ids: impl Iterator<Item = u64>) -> Vec<String> {
    ids.map(|i| i.to_string()).collect()
}

/// Follows `next_cursor` from `first` to the last page; returns each page's ids.
async fn walk(client: &Arc<dyn Client>, first: &str) -> Vec<Vec<String>> {
    let mut pages = Vec::new();
    let mut query = first.to_string();
    loop {
        let (status, page) = ask(client, &query).await;
        assert_eq!(status, StatusCode::OK, "{query}: {page}");
        pages.push(ids(&page));
        match page["next_cursor"].as_str() {
            Some(cursor) => query = format!("{first}&cursor={cursor}"),
            None => return pages,
        }
    }
}

#[tokio::test]
async fn pages_of_fifty_walk_the_channel_in_either_order() {
    let client = channel().await;
    let pages = walk(&client, "channel=c").await;
    assert_eq!(
        pages,
        [range(0..50), range(50..100), range(100..121)],
        "oldest first"
    );
    let pages = walk(&client, "channel=c&order=newest").await;
    assert_eq!(
        pages,
        [
            range((71..121).rev()),
            range((21..71).rev()),
            range((0..21).rev())
        ],
        "newest first"
    );
}

#[tokio::test]
async fn pages_start_at_an_id_or_a_time() {
    let client = channel().await;
    let page = |q: &'static str| {
        let client = client.clone();
        async move { ids(&ask(&client, q).await.1) }
    };
    assert_eq!(page("channel=c&from=10&limit=3").await, ["10", "11", "12"]);
    assert_eq!(
        page("channel=c&from=10&limit=3&order=newest").await,
        ["10", "9", "8"]
    );
    // Timestamps are 10·(id+1): 55 falls between ids 4 (50) and 5 (60).
    assert_eq!(page("channel=c&from_time=55&limit=2").await, ["5", "6"]);
    assert_eq!(page("channel=c&from_time=60&limit=2").await, ["5", "6"]);
    assert_eq!(
        page("channel=c&from_time=55&limit=2&order=newest").await,
        ["4", "3"]
    );
    assert_eq!(
        page("channel=c&from_time=60&limit=2&order=newest").await,
        ["5", "4"]
    );
    assert_eq!(
        page("channel=c&from_time=18446744073709551615&limit=1&order=newest").await,
        ["120"]
    );
    let (_, by_time) = ask(&client, "channel=c&from_time=55").await;
    assert_eq!(
        by_time["from_time_found_by"], "time index",
        "the memory backend has one"
    );
    let (_, by_id) = ask(&client, "channel=c&from=5").await;
    assert_eq!(by_id["from_time_found_by"], Value::Null);
}

#[tokio::test]
async fn each_message_reads_as_consume_prints_it_and_the_rest_as_hex() {
    let client = channel().await;
    let (_, page) = ask(&client, "channel=c&limit=1").await;
    let first = &page["messages"][0];
    assert_eq!(
        first["line"],
        "c id=0 ts=10 type=400 kind=insert keys=0 payload=\"m0\" props=k=v"
    );
    assert_eq!(first["payload"], "m0");
    assert_eq!(first["preview"], "\"m0\"");
    assert_eq!(first["properties"]["k"], "v");
    assert_eq!(
        (&first["begin_ts"], &first["end_ts"]),
        (&10.into(), &10.into())
    );
    let (_, page) = ask(&client, "channel=c&from=120").await;
    let last = &page["messages"][0];
    assert_eq!(last["kind"], "undecodable", "{last}");
    assert_eq!(last["payload_hex"], "ff0001");
    assert_eq!(last["size"], 3);
    assert!(
        last["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{last}"
    );
}

#[tokio::test]
async fn bad_input_gets_a_typed_error() {
    let client = channel().await;
    for (query, status, kind) in [
        ("channel=nope", StatusCode::NOT_FOUND, "unknown_channel"),
        (
            "channel=c&from=121",
            StatusCode::RANGE_NOT_SATISFIABLE,
            "past_end",
        ),
        (
            "channel=c&cursor=120",
            StatusCode::RANGE_NOT_SATISFIABLE,
            "past_end",
        ),
        (
            "channel=c&from_time=99999",
            StatusCode::RANGE_NOT_SATISFIABLE,
            "past_end",
        ),
        (
            "channel=c&order=newest&from_time=5",
            StatusCode::RANGE_NOT_SATISFIABLE,
            "past_end",
        ),
        (
            "channel=c&order=newest&cursor=0",
            StatusCode::RANGE_NOT_SATISFIABLE,
            "past_end",
        ),
        (
            "channel=c&from=ab",
            StatusCode::BAD_REQUEST,
            "bad_parameter",
        ),
        (
            "channel=c&from=1x",
            StatusCode::BAD_REQUEST,
            "bad_parameter",
        ),
        (
            "channel=c&from_time=noon",
            StatusCode::BAD_REQUEST,
            "bad_parameter",
        ),
        (
            "channel=c&limit=100000",
            StatusCode::BAD_REQUEST,
            "page_too_large",
        ),
    ] {
        let (got, body) = ask(&client, query).await;
        assert_eq!(
            (got, body["kind"].as_str()),
            (status, Some(kind)),
            "{query}: {body}"
        );
        assert!(
            body["error"].as_str().is_some_and(|e| !e.is_empty()),
            "{body}"
        );
        assert!(body.get("messages").is_none(), "{body}");
    }
}

#[tokio::test]
async fn browsing_takes_no_subscription_and_moves_none() {
    let client = channel().await;
    let mut consumer = client
        .subscribe(ConsumerOptions::new("c", "g"))
        .await
        .expect("subscribe");
    for _ in 0..5 {
        let msg = consumer.recv().await.expect("recv").expect("a message");
        consumer.ack(&msg).await.expect("ack");
    }
    consumer.close().await;
    let before = client.list_subscriptions("c").await.expect("list");
    assert_eq!(before.len(), 1);
    walk(&client, "channel=c").await;
    walk(&client, "channel=c&order=newest&limit=7").await;
    ask(&client, "channel=c&from_time=300").await;
    assert_eq!(client.list_subscriptions("c").await.expect("list"), before);
    assert_eq!(client.list_topics().await.expect("topics"), ["c"]);
    let mut consumer = client
        .subscribe(ConsumerOptions::new("c", "g"))
        .await
        .expect("subscribe again");
    let next = consumer.recv().await.expect("recv").expect("a message");
    assert_eq!(next.id.as_u64(), Some(5), "g resumes where it was");
    consumer.close().await;
}

#[tokio::test]
async fn newest_first_reads_from_the_watchers_checkpoints_and_shows_the_same_page() {
    let client = channel_of(3000).await;
    let checkpoints = Arc::new(Checkpoints::default());
    let state = Arc::new(RwLock::new(State::default()));
    Watcher::new(client.clone(), state, checkpoints.clone())
        .look_once()
        .await;
    for query in [
        "channel=c&order=newest",
        "channel=c&order=newest&from=2500&limit=200",
        "channel=c&order=newest&cursor=2000",
    ] {
        let (_, whole) = ask(&client, query).await;
        let (_, quick) = ask_with(&client, checkpoints.clone(), PAGE_BUDGET, query).await;
        assert_eq!(ids(&quick), ids(&whole), "{query}");
        assert_eq!(quick["next_cursor"], whole["next_cursor"], "{query}");
        let (whole, quick) = (&whole["messages_read"], &quick["messages_read"]);
        let (whole, quick) = (whole.as_u64().expect("n"), quick.as_u64().expect("n"));
        assert!(
            quick <= 2001 && quick < whole,
            "{query}: {quick} of {whole}"
        );
    }
    let (_, page) = ask_with(&client, checkpoints, PAGE_BUDGET, "channel=c&order=newest").await;
    assert_eq!(
        page["messages"][0]["id"], "3000",
        "the newest is the undecodable one"
    );
}

#[tokio::test]
async fn a_checkpoint_that_falls_short_is_read_again_from_the_start() {
    let client = channel_of(60).await;
    let checkpoints = Arc::new(Checkpoints::default());
    // Checkpoints that leave fewer than a page after them (as after retention).
    let ids_of = |range: std::ops::Range<u64>| range.map(MessageId::from_u64).collect();
    checkpoints.extend("c", ids_of(55..58));
    let (_, page) = ask_with(&client, checkpoints, PAGE_BUDGET, "channel=c&order=newest").await;
    assert_eq!(ids(&page), range((11..61).rev()));
    assert_eq!(page["next_cursor"], "11");
    assert_eq!(
        page["messages_read"],
        5 + 61,
        "the short read, then the whole channel"
    );
}

#[tokio::test]
async fn a_page_that_takes_too_long_is_answered_504_not_cut_short() {
    let client = channel().await;
    for query in [
        "channel=c",
        "channel=c&order=newest",
        "channel=c&from_time=55",
        "channel=c&order=newest&from_time=55",
    ] {
        let (status, body) = ask_with(&client, Arc::default(), Duration::ZERO, query).await;
        assert_eq!(
            (status, body["kind"].as_str()),
            (StatusCode::GATEWAY_TIMEOUT, Some("out_of_time")),
            "{query}: {body}"
        );
        assert!(body.get("messages").is_none(), "{body}");
    }
}
