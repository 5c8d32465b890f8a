//! Metrics to stdout: install an OpenTelemetry meter provider whose exporter prints what the
//! streams recorded (messages and bytes per channel, produce latency, the timetick watermark),
//! then produce and consume a few packs.
//!
//! `cargo run --example metrics_stdout` (embedded rocksmq in a temporary directory). Any
//! OpenTelemetry exporter (OTLP, Prometheus) plugs in the same way; without a provider the
//! streams record nothing and pay nothing.

use std::time::Duration;

use msgstream_facade::prelude::*;
use opentelemetry::KeyValue;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData, ResourceMetrics};
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider, Temporality};

/// Prints every data point it is handed, one line each.
struct StdoutExporter;

fn labels<'a>(attributes: impl Iterator<Item = &'a KeyValue>) -> String {
    let mut labels: Vec<String> = attributes
        .map(|kv| format!("{}={}", kv.key, kv.value))
        .collect();
    labels.sort();
    labels.join(",")
}

fn print<T: std::fmt::Debug + Copy>(name: &str, data: &MetricData<T>) {
    match data {
        MetricData::Sum(sum) => {
            for p in sum.data_points() {
                println!("{name}{{{}}} {:?}", labels(p.attributes()), p.value());
            }
        }
        MetricData::Gauge(gauge) => {
            for p in gauge.data_points() {
                println!("{name}{{{}}} {:?}", labels(p.attributes()), p.value());
            }
        }
        MetricData::Histogram(histogram) => {
            for p in histogram.data_points() {
                println!(
                    "{name}{{{}}} count={} sum={:?}",
                    labels(p.attributes()),
                    p.count(),
                    p.sum()
                );
            }
        }
        MetricData::ExponentialHistogram(_) => {}
    }
}

impl PushMetricExporter for StdoutExporter {
    async fn export(&self, metrics: &ResourceMetrics) -> OTelSdkResult {
        for scope in metrics.scope_metrics() {
            for metric in scope.metrics() {
                match metric.data() {
                    AggregatedMetrics::F64(data) => print(metric.name(), data),
                    AggregatedMetrics::U64(data) => print(metric.name(), data),
                    AggregatedMetrics::I64(data) => print(metric.name(), data),
                }
            }
        }
        Ok(())
    }

    fn force_flush(&self) -> OTelSdkResult {
        Ok(())
    }

    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        Ok(())
    }

    fn temporality(&self) -> Temporality {
        Temporality::Cumulative
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Before any stream exists: the streams create their instruments from the global
    // provider once.
    let provider = SdkMeterProvider::builder()
        .with_reader(PeriodicReader::builder(StdoutExporter).build())
        .build();
    opentelemetry::global::set_meter_provider(provider.clone());

    let dir = tempfile_dir();
    let mut config = Config::default();
    config.rocksmq.path = dir.clone();
    let factory = Factory::new(&config).await?;
    let channels = ["metrics-0", "metrics-1"];
    let mut out = factory.tt_msg_stream();
    out.as_producer(&channels).await?;
    for i in 1..=3u64 {
        let inserts = (0..4).map(|r| TsMsg::insert(r, 10 * i - 5, ""));
        let ticks = (0..2).map(|c| TsMsg::timetick(10 * i).with_hash_keys(vec![c]));
        out.produce(&MsgPack::new(inserts.chain(ticks))).await?;
    }
    let mut stream = factory.tt_msg_stream();
    stream
        .as_consumer(&channels, "metrics", InitialPosition::Earliest)
        .await?;
    while let Some(pack) = stream.next_pack().await {
        if pack?.end_ts >= 30 {
            break;
        }
    }
    stream.close().await;
    out.close().await;
    factory.close().await;

    // Shutting the provider down exports what was recorded, rather than at the next period.
    provider.shutdown()?;
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

fn tempfile_dir() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("msgstream-metrics-{}", std::process::id()))
}
