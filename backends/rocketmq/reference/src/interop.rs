//! The interop cases of the reference binary, run by `backends/rocketmq/tests/reference_interop.rs`
//! to check that msgstream-rocketmq and rocketmq-client-rust read each other's compressed bodies.
//!
//! ```text
//! reference send    --namesrv ADDR --topic T --sizes 10240,1048576
//! reference receive --namesrv ADDR --topic T --group G --count N --out DIR
//! ```
//!
//! - `send`: one message per size, body byte i = (i * 31 + size) % 251 ([`body`]), through a
//!   `DefaultMQProducer` with the client's default compression: rocketmq-client-rust 1.0.0
//!   (`ProducerConfig::default`) compresses a body of 4096 bytes or more (`compress_msg_body_
//!   over_howmuch`) with zlib level 5 (unless the `rocketmq.message.compressType` /
//!   `compressLevel` environment variables say otherwise) and sets the compressed bit plus the
//!   5.x zlib type bits. Prints `sent size=… queue=… offset=…` per message.
//! - `receive`: a `DefaultLitePullConsumer` of a fresh group from the first offset, until `count`
//!   messages arrived; writes each body to `DIR/<queue>-<offset>.body` and prints
//!   `received queue=… offset=… len=… fnv1a64=…`. Gives up (exit 1) after [`RECEIVE_DEADLINE`].

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use rocketmq_client_rust::{ClientRuntime, DefaultLitePullConsumer, SendStatus};
use rocketmq_model::common::consumer::consume_from_where::ConsumeFromWhere;

use crate::{message, producer, Args, Error, Result};

/// How long `receive` may take before it gives up.
pub const RECEIVE_DEADLINE: Duration = Duration::from_secs(60);

/// The deterministic body of `size` bytes that `send` sends: byte i = (i * 31 + size) % 251.
pub fn body(size: usize) -> Bytes {
    (0..size)
        .map(|i| ((i.wrapping_mul(31).wrapping_add(size)) % 251) as u8)
        .collect::<Vec<u8>>()
        .into()
}

/// FNV-1a, 64 bits: a checksum printed next to each received body.
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

pub async fn send(runtime: &Arc<ClientRuntime>, args: &Args) -> Result<()> {
    let mut producer = producer(runtime, args).await?;
    for &size in &args.sizes {
        let result = producer.send(message(&args.topic, &body(size))).await?;
        let result = match result {
            Some(r) if r.send_status == SendStatus::SendOk => r,
            other => return Err(Error::from(format!("send of {size} bytes: {other:?}"))),
        };
        let queue = result.message_queue.as_ref().map_or(-1, |mq| mq.queue_id());
        println!(
            "sent size={size} queue={queue} offset={}",
            result.queue_offset
        );
    }
    producer.shutdown().await;
    Ok(())
}

pub async fn receive(runtime: &Arc<ClientRuntime>, args: &Args) -> Result<()> {
    let out = args
        .out
        .as_ref()
        .ok_or_else(|| Error::from("receive needs --out"))?;
    std::fs::create_dir_all(out)?;
    let consumer = DefaultLitePullConsumer::builder(runtime.clone())
        .consumer_group(args.group.clone())
        .name_server_addr(args.namesrv.clone())
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .build()?;
    consumer.subscribe(&args.topic).await?;
    consumer.start().await?;
    let start = Instant::now();
    let mut received = 0;
    while received < args.count {
        if start.elapsed() > RECEIVE_DEADLINE {
            consumer.shutdown().await;
            return Err(format!(
                "received only {received} of {} messages in {RECEIVE_DEADLINE:?}",
                args.count
            )
            .into());
        }
        for m in consumer.poll_with_timeout_zero_copy(1000).await {
            let body = m.body().unwrap_or_default();
            let (queue, offset) = (m.queue_id(), m.queue_offset());
            std::fs::write(body_path(out, queue, offset), &body)?;
            println!(
                "received queue={queue} offset={offset} len={} fnv1a64={:016x}",
                body.len(),
                fnv1a64(&body)
            );
            received += 1;
        }
    }
    consumer.shutdown().await;
    Ok(())
}

fn body_path(out: &std::path::Path, queue: i32, offset: i64) -> PathBuf {
    out.join(format!("{queue}-{offset}.body"))
}
