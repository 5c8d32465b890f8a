//! Interop with the reference client (`reference/`, rocketmq-client-rust 1.0.0) on the real test
//! broker: bodies it compresses by its default (zlib over 4 KiB) are consumed byte-identical by
//! ours, and bodies our producer compresses by our default are received byte-identical by it.
//!
//! The reference binary is built by `scripts/install-rocketmq-reference.sh` (which
//! `scripts/test.sh` runs) and found through `MSGSTREAM_ROCKETMQ_REFERENCE`; without it these
//! tests fail, naming the script.

mod support;

use std::path::PathBuf;
use std::process::Command;

use msgstream::mq::{Client, ConsumerOptions, InitialPosition, ProducerMessage};
use msgstream::testkit::within;
use msgstream_rocketmq::protocol::compression::{Codec, COMPRESSED_FLAG};
use msgstream_rocketmq::{MessageQueue, RocketMqClient};
use support::raw;

const SIZES: [usize; 2] = [10 * 1024, 1024 * 1024];

/// The reference binary, or a failure saying how to get it.
fn reference() -> PathBuf {
    let path = std::env::var_os("MSGSTREAM_ROCKETMQ_REFERENCE").map(PathBuf::from);
    match path {
        Some(path) if path.is_file() => path,
        other => panic!(
            "the reference client is missing (MSGSTREAM_ROCKETMQ_REFERENCE={other:?}): run \
             `scripts/install-rocketmq-reference.sh` and set MSGSTREAM_ROCKETMQ_REFERENCE to the \
             path it prints (scripts/test.sh does both)"
        ),
    }
}

/// Runs the reference with `args` (blocking, off the runtime's workers); its stdout on success.
async fn run_reference(args: Vec<String>) -> String {
    let binary = reference();
    let output = tokio::task::spawn_blocking(move || Command::new(binary).args(&args).output())
        .await
        .expect("reference task")
        .expect("reference starts");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "reference failed ({}): {stdout}{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// The reference's `send` body: byte i = (i * 31 + size) % 251.
fn reference_body(size: usize) -> Vec<u8> {
    (0..size).map(|i| ((i * 31 + size) % 251) as u8).collect()
}

/// `key=value` of one output line.
fn field(line: &str, key: &str) -> i64 {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{key} in {line:?}"))
}

/// A fresh channel and one of its queues (for the topic's name and broker).
async fn channel(client: &RocketMqClient, prefix: &str) -> (String, MessageQueue) {
    let channel = support::unique(prefix);
    client.create_producer(&channel).await.expect("channel");
    let route = client
        .admin()
        .name_servers()
        .refresh(&channel)
        .await
        .expect("route");
    (channel, route.read_queues[0].clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reference_compressed_bodies_are_consumed_byte_identical() {
    reference();
    let cluster = support::shared();
    let client = RocketMqClient::connect(cluster.config())
        .await
        .expect("connect");
    let (channel, mq) = channel(&client, "from-reference").await;
    let sizes = SIZES.map(|s| s.to_string()).join(",");
    let sent = run_reference(
        [
            "send",
            "--namesrv",
            &cluster.namesrv,
            "--topic",
            &mq.topic,
            "--sizes",
            &sizes,
        ]
        .map(str::to_owned)
        .to_vec(),
    )
    .await;
    let lines: Vec<&str> = sent.lines().filter(|l| l.starts_with("sent ")).collect();
    assert_eq!(lines.len(), SIZES.len(), "{sent}");
    // The broker holds them as the reference compressed them: zlib under the 5.x type bits.
    for line in &lines {
        let queue = MessageQueue::new(&mq.topic, &mq.broker, field(line, "queue") as i32);
        let (sysflag, stored) =
            raw::stored_record(client.admin(), &queue, field(line, "offset")).await;
        let size = field(line, "size") as usize;
        assert_eq!(sysflag & 0x701, Codec::Zlib.sysflag(), "{line}");
        assert!(stored.len() < size, "{line}: stored {} bytes", stored.len());
    }
    let mut consumer = client
        .subscribe(
            ConsumerOptions::new(&channel, "s").with_initial_position(InitialPosition::Earliest),
        )
        .await
        .expect("subscribe");
    let mut received = Vec::new();
    for _ in SIZES {
        let message = within("a reference message", consumer.recv())
            .await
            .expect("recv")
            .expect("open");
        received.push(message.payload.to_vec());
    }
    consumer.close().await;
    received.sort_by_key(Vec::len);
    for (body, size) in received.iter().zip(SIZES) {
        assert_eq!(body.len(), size);
        assert!(
            *body == reference_body(size),
            "{size} bytes: byte-identical"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_compressed_bodies_are_received_by_the_reference() {
    reference();
    let cluster = support::shared();
    let client = RocketMqClient::connect(cluster.config())
        .await
        .expect("connect");
    let (channel, mq) = channel(&client, "to-reference").await;
    let producer = client.create_producer(&channel).await.expect("producer");
    let bodies: Vec<Vec<u8>> = SIZES
        .iter()
        .map(|&size| raw::payload(size, size as u64))
        .collect();
    for body in &bodies {
        let id = producer
            .send(ProducerMessage::new(body.clone()))
            .await
            .expect("send");
        // A channel is its route's first queue; ours zlib-compresses under the 4.x bit.
        let offset = id.as_u64().expect("offset") as i64;
        let (sysflag, stored) = raw::stored_record(client.admin(), &mq, offset).await;
        assert_eq!(sysflag & 0x701, COMPRESSED_FLAG, "{} bytes", body.len());
        assert!(
            stored.len() < body.len(),
            "{} bytes stored compressed",
            body.len()
        );
    }
    let out = std::env::temp_dir().join(support::unique("reference-received"));
    let count = bodies.len().to_string();
    let group = support::unique("reference").replace('.', "_");
    let printed = run_reference(
        [
            "receive",
            "--namesrv",
            &cluster.namesrv,
            "--topic",
            &mq.topic,
            "--group",
            &group,
            "--count",
            &count,
            "--out",
            &out.to_string_lossy(),
        ]
        .map(str::to_owned)
        .to_vec(),
    )
    .await;
    let mut received: Vec<Vec<u8>> = std::fs::read_dir(&out)
        .expect("the reference's output directory")
        .map(|entry| std::fs::read(entry.expect("entry").path()).expect("a body"))
        .collect();
    std::fs::remove_dir_all(&out).expect("cleanup");
    assert_eq!(received.len(), bodies.len(), "{printed}");
    received.sort_by_key(Vec::len);
    for (got, sent) in received.iter().zip(&bodies) {
        assert_eq!(got.len(), sent.len());
        assert!(got == sent, "{} bytes: byte-identical", sent.len());
    }
}
