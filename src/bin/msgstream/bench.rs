//! `msgstream bench`: produce and consume throughput, and produce→consume latency, over the
//! configured backend. A summary table at the end, `--json` for scripts.
//!
//! Its channels are its own (named after the process) and deleted at the end, interrupted or
//! not, so benchmarks leave nothing in a durable backend. Ctrl-C or SIGTERM stops it between two
//! batches.

mod phases;

use std::process::ExitCode;
use std::time::Duration;

use crate::error::{Error, Result};
use clap::Args;
use msgstream_facade::Factory;

use crate::commands::delete_own_channels;
use crate::commands::produce::MAX_PAYLOAD;
use crate::metrics::{self, Telemetry};
use crate::out;
use crate::signals::Stop;

/// The most latency samples a run takes (`--latency-rate` × `--latency-secs`): each is kept
/// for the percentiles.
const MAX_LATENCY_SAMPLES: u64 = 10_000_000;

/// Options of the benchmark.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Channels to spread the messages over (1 to 1024).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=1024))]
    channels: u16,
    /// Messages to produce and consume.
    #[arg(long, default_value_t = 200_000)]
    messages: u64,
    /// Row payload size in bytes (at most 64 MiB).
    #[arg(long, default_value_t = 128, value_parser = clap::value_parser!(u64).range(0..=MAX_PAYLOAD))]
    payload: u64,
    /// Messages per produce call (1 to 65536).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=65536))]
    batch: u64,
    /// Rate of the latency phase, messages per second (1 to 1000000).
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    latency_rate: u64,
    /// Duration of the latency phase, seconds (1 to 86400; rate × seconds at most 10000000).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    latency_secs: u64,
    /// Consume through the timetick-aligned stream (`TtMsgStream`): the produce phase also
    /// broadcasts a timetick after each batch (untimed).
    #[arg(long)]
    tt: bool,
    /// Print the summary as one JSON object.
    #[arg(long)]
    json: bool,
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

/// Runs the three phases, deletes the channels, and prints the summary (exit code 130 and no
/// summary when stopped).
pub async fn run(
    factory: &Factory,
    args: BenchArgs,
    telemetry: &Telemetry,
    stop: &Stop,
) -> Result<ExitCode> {
    let latency_total = args.latency_rate * args.latency_secs;
    if latency_total > MAX_LATENCY_SAMPLES {
        return Err(Error::Usage(format!(
            "--latency-rate {} × --latency-secs {} is {latency_total} samples; at most \
             {MAX_LATENCY_SAMPLES} are kept",
            args.latency_rate, args.latency_secs
        )));
    }
    let run_id = std::process::id();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let channels: Vec<String> = (0..args.channels)
        .map(|c| format!("bench-{run_id}-{nanos}-{c}"))
        .collect();
    let refs: Vec<&str> = channels.iter().map(String::as_str).collect();
    eprintln!(
        "bench on {}: producing {} messages to {} channel(s)",
        factory.backend().name(),
        args.messages,
        refs.len()
    );
    let measured = measure(factory, &args, &refs, latency_total, stop).await;
    delete_own_channels(factory, &channels, "bench").await;
    let Some((produced, consume_secs, latencies)) = measured? else {
        eprintln!("interrupted");
        return Ok(ExitCode::from(130));
    };
    let batch_latency = &produced.batch_latency;
    let (produce_secs, bytes, batch) = (produced.secs, produced.bytes, args.batch);
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
            "produce_batch_p50_us": us(percentile(batch_latency, 0.5)).round(),
            "produce_batch_p99_us": us(percentile(batch_latency, 0.99)).round(),
            "consume_stream": if args.tt { "tt" } else { "plain" },
            "consume_msgs_per_s": consume_rate.round(),
            "consume_mb_per_s": (mb / consume_secs * 100.0).round() / 100.0,
            "latency_rate": args.latency_rate,
            "latency_p50_us": us(percentile(&latencies, 0.5)).round(),
            "latency_p99_us": us(percentile(&latencies, 0.99)).round(),
            "latency_max_us": us(latencies.last().copied().unwrap_or_default()).round(),
            "metrics": metrics::summary(&telemetry.snapshot()?),
        });
        out::line(summary)?;
    } else {
        out::line(format_args!(
            "bench on {}: {} msgs of {} B over {} channel(s), batches of {batch}",
            factory.backend().name(),
            args.messages,
            args.payload,
            channels.len()
        ))?;
        out::line(format_args!(
            "{:<10} {:>14} {:>10} {:>12} {:>12}",
            "phase", "msgs/s", "MB/s", "p50", "p99"
        ))?;
        out::line(format_args!(
            "{:<10} {produce_rate:>14.0} {:>10.1} {:>10.0}us {:>10.0}us",
            "produce",
            mb / produce_secs,
            us(percentile(batch_latency, 0.5)),
            us(percentile(batch_latency, 0.99))
        ))?;
        out::line(format_args!(
            "{:<10} {consume_rate:>14.0} {:>10.1} {:>12} {:>12}",
            if args.tt { "tt-consume" } else { "consume" },
            mb / consume_secs,
            "-",
            "-"
        ))?;
        out::line(format_args!(
            "{:<10} {:>14} {:>10} {:>10.0}us {:>10.0}us   (produce→consume at {}/s)",
            "latency",
            "-",
            "-",
            us(percentile(&latencies, 0.5)),
            us(percentile(&latencies, 0.99)),
            args.latency_rate
        ))?;
        for line in metrics::summary(&telemetry.snapshot()?) {
            out::line(line)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs the phases one after another, each returning `None` when stopped.
async fn measure(
    factory: &Factory,
    args: &BenchArgs,
    channels: &[&str],
    latency_total: u64,
    stop: &Stop,
) -> Result<Option<(phases::Produced, f64, Vec<Duration>)>> {
    let payload = vec![7u8; usize::try_from(args.payload).unwrap_or(usize::MAX)];
    let (messages, batch) = (args.messages, args.batch);
    let Some(produced) =
        phases::produce(factory, channels, messages, batch, &payload, args.tt, stop).await?
    else {
        return Ok(None);
    };
    let Some(consume_secs) = phases::consume(factory, channels, messages, args.tt, stop).await?
    else {
        return Ok(None);
    };
    let Some(first) = channels.first() else {
        return Ok(None);
    };
    let latencies = phases::latency(
        factory,
        first,
        args.latency_rate,
        latency_total,
        &payload,
        stop,
    )
    .await?;
    Ok(latencies.map(|l| (produced, consume_secs, l)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use msgstream_facade::{BackendKind, Config};

    async fn run_leaves_no_channel_behind(tt: bool) {
        let config = Config {
            backend: BackendKind::Memory,
            ..Config::default()
        };
        let factory = Factory::new(&config).await.expect("factory");
        let args = BenchArgs {
            channels: 2,
            messages: 100,
            payload: 8,
            batch: 10,
            latency_rate: 1000,
            latency_secs: 1,
            tt,
            json: true,
        };
        let stop = Stop::listen().expect("signals");
        let telemetry = Telemetry::install();
        let code = run(&factory, args, &telemetry, &stop).await.expect("bench");
        assert_eq!(code, ExitCode::SUCCESS);
        let left = factory.client().list_topics().await.expect("list");
        assert!(left.is_empty(), "{left:?}");
    }

    #[tokio::test]
    async fn a_run_leaves_no_channel_behind() {
        run_leaves_no_channel_behind(false).await;
    }

    /// `--tt`: every row comes back through the timetick-aligned stream (the run ends).
    #[tokio::test]
    async fn a_tt_run_reads_every_row_and_leaves_no_channel_behind() {
        run_leaves_no_channel_behind(true).await;
    }
}
