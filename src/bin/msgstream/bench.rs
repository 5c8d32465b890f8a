//! `msgstream bench`: produce and consume throughput, and produce→consume latency, over the
//! configured backend. A summary table at the end, `--json` for scripts.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Args;
use msgstream_facade::msgstream::mq::InitialPosition;
use msgstream_facade::msgstream::msg::{
    Blob, InsertRequest, MsgBase, MsgBody, MsgPack, MsgType, TsMsg,
};
use msgstream_facade::msgstream::stream::MsgStream;
use msgstream_facade::msgstream::stream::Produce;
use msgstream_facade::msgstream::Error as StreamError;
use msgstream_facade::{Factory, Result};

use crate::progress::Progress;

/// Options of the benchmark.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Channels to spread the messages over.
    #[arg(long, default_value_t = 4)]
    channels: usize,
    /// Messages to produce and consume.
    #[arg(long, default_value_t = 200_000)]
    messages: u64,
    /// Row payload size in bytes.
    #[arg(long, default_value_t = 128)]
    payload: usize,
    /// Messages per produce call.
    #[arg(long, default_value_t = 64)]
    batch: usize,
    /// Rate of the latency phase, messages per second.
    #[arg(long, default_value_t = 2000)]
    latency_rate: u64,
    /// Duration of the latency phase, seconds.
    #[arg(long, default_value_t = 2)]
    latency_secs: u64,
    /// Print the summary as one JSON object.
    #[arg(long)]
    json: bool,
}

fn row(id: u64, payload: &[u8]) -> TsMsg {
    TsMsg::new(MsgBody::Insert(InsertRequest {
        base: Some(MsgBase::new(MsgType::Insert as i32, id as i64, id + 1)),
        timestamps: vec![id + 1],
        row_ids: vec![id as i64],
        row_data: vec![Blob {
            value: payload.to_vec(),
        }],
        num_rows: 1,
        ..Default::default()
    }))
    .with_hash_keys(vec![id as u32])
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

async fn next_msg(stream: &mut MsgStream) -> Result<MsgPack> {
    Ok(stream
        .next_pack()
        .await
        .ok_or(StreamError::Closed("consumer"))??)
}

/// Runs the three phases and prints the summary.
pub async fn run(factory: &Factory, args: BenchArgs) -> Result<ExitCode> {
    let run_id = std::process::id();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let channels: Vec<String> = (0..args.channels.max(1))
        .map(|c| format!("bench-{run_id}-{nanos}-{c}"))
        .collect();
    let refs: Vec<&str> = channels.iter().map(String::as_str).collect();
    let payload = vec![7u8; args.payload];
    let batch = args.batch.max(1) as u64;

    // Phase 1: produce.
    let mut producer = factory.msg_stream();
    producer.as_producer(&refs).await?;
    let mut progress = Progress::new("produce", args.messages);
    let mut batch_latency = Vec::new();
    let started = Instant::now();
    let mut sent = 0;
    let mut bytes = 0u64;
    while sent < args.messages {
        let n = batch.min(args.messages - sent);
        let msgs: Vec<TsMsg> = (sent..sent + n).map(|id| row(id, &payload)).collect();
        bytes += msgs.iter().map(|m| m.encode().len() as u64).sum::<u64>();
        let t = Instant::now();
        producer
            .produce(&MsgPack {
                msgs,
                ..MsgPack::default()
            })
            .await?;
        batch_latency.push(t.elapsed());
        sent += n;
        progress.update(sent);
    }
    let produce_secs = started.elapsed().as_secs_f64();
    progress.finish();
    batch_latency.sort();

    // Phase 2: consume everything with one subscription.
    let mut consumer = factory.msg_stream();
    consumer
        .as_consumer(&refs, "bench", InitialPosition::Earliest)
        .await?;
    let mut progress = Progress::new("consume", args.messages);
    let started = Instant::now();
    let mut received = 0;
    while received < args.messages {
        received += next_msg(&mut consumer).await?.msgs.len() as u64;
        progress.update(received);
    }
    let consume_secs = started.elapsed().as_secs_f64();
    progress.finish();

    // Phase 3: produce → consume latency at a fixed rate, one message at a time.
    let latency_channel = [refs[0]];
    let mut lat_producer = factory.msg_stream();
    lat_producer.as_producer(&latency_channel).await?;
    let mut lat_consumer = factory.msg_stream();
    lat_consumer
        .as_consumer(&latency_channel, "bench-latency", InitialPosition::Latest)
        .await?;
    let total = args.latency_rate.max(1) * args.latency_secs.max(1);
    let interval = Duration::from_secs_f64(1.0 / args.latency_rate.max(1) as f64);
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut latencies = Vec::with_capacity(total as usize);
    let mut progress = Progress::new("latency", total);
    for i in 0..total {
        ticker.tick().await;
        let t = Instant::now();
        lat_producer
            .produce(&MsgPack {
                msgs: vec![row(i, &payload)],
                ..MsgPack::default()
            })
            .await?;
        next_msg(&mut lat_consumer).await?;
        latencies.push(t.elapsed());
        progress.update(i + 1);
    }
    progress.finish();
    latencies.sort();
    for stream in [
        &mut producer,
        &mut consumer,
        &mut lat_producer,
        &mut lat_consumer,
    ] {
        stream.close().await;
    }

    let produce_rate = args.messages as f64 / produce_secs;
    let consume_rate = args.messages as f64 / consume_secs;
    let mb = bytes as f64 / (1024.0 * 1024.0);
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    if args.json {
        let summary = serde_json::json!({
            "backend": factory.backend().name(),
            "channels": channels.len(),
            "messages": args.messages,
            "payload": args.payload,
            "batch": batch,
            "produce_msgs_per_s": produce_rate.round(),
            "produce_mb_per_s": (mb / produce_secs * 100.0).round() / 100.0,
            "produce_batch_p50_us": us(percentile(&batch_latency, 0.5)).round(),
            "produce_batch_p99_us": us(percentile(&batch_latency, 0.99)).round(),
            "consume_msgs_per_s": consume_rate.round(),
            "consume_mb_per_s": (mb / consume_secs * 100.0).round() / 100.0,
            "latency_rate": args.latency_rate,
            "latency_p50_us": us(percentile(&latencies, 0.5)).round(),
            "latency_p99_us": us(percentile(&latencies, 0.99)).round(),
            "latency_max_us": us(latencies.last().copied().unwrap_or_default()).round(),
        });
        println!("{summary}");
    } else {
        println!(
            "bench on {}: {} msgs of {} B over {} channel(s), batches of {batch}",
            factory.backend().name(),
            args.messages,
            args.payload,
            channels.len()
        );
        println!(
            "{:<10} {:>14} {:>10} {:>12} {:>12}",
            "phase", "msgs/s", "MB/s", "p50", "p99"
        );
        println!(
            "{:<10} {produce_rate:>14.0} {:>10.1} {:>10.0}us {:>10.0}us",
            "produce",
            mb / produce_secs,
            us(percentile(&batch_latency, 0.5)),
            us(percentile(&batch_latency, 0.99))
        );
        println!(
            "{:<10} {consume_rate:>14.0} {:>10.1} {:>12} {:>12}",
            "consume",
            mb / consume_secs,
            "-",
            "-"
        );
        println!(
            "{:<10} {:>14} {:>10} {:>10.0}us {:>10.0}us   (produce→consume at {}/s)",
            "latency",
            "-",
            "-",
            us(percentile(&latencies, 0.5)),
            us(percentile(&latencies, 0.99)),
            args.latency_rate
        );
    }
    Ok(ExitCode::SUCCESS)
}
