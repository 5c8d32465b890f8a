//! The client's reconnects reach the core's OpenTelemetry instruments (`msgstream.reconnects`).
//! Its own test binary: the instruments bind to the global provider on first use, so the
//! provider must be installed before anything records.

mod common;

use std::sync::Arc;

use common::*;
use msgstream_nsq::Consumer;
use msgstream_nsq_testd::Extensions;
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData, ResourceMetrics};
use opentelemetry_sdk::metrics::reader::MetricReader;
use opentelemetry_sdk::metrics::{ManualReader, SdkMeterProvider};

/// The provider's reader, shared with the test so it can collect.
#[derive(Debug, Clone)]
struct Shared(Arc<ManualReader>);

impl MetricReader for Shared {
    fn register_pipeline(&self, pipeline: std::sync::Weak<opentelemetry_sdk::metrics::Pipeline>) {
        self.0.register_pipeline(pipeline)
    }
    fn collect(&self, rm: &mut ResourceMetrics) -> opentelemetry_sdk::error::OTelSdkResult {
        self.0.collect(rm)
    }
    fn force_flush(&self) -> opentelemetry_sdk::error::OTelSdkResult {
        self.0.force_flush()
    }
    fn shutdown_with_timeout(
        &self,
        timeout: std::time::Duration,
    ) -> opentelemetry_sdk::error::OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }
    fn temporality(
        &self,
        kind: opentelemetry_sdk::metrics::InstrumentKind,
    ) -> opentelemetry_sdk::metrics::Temporality {
        self.0.temporality(kind)
    }
}

/// `msgstream.reconnects` for backend nsq, summed over addresses.
fn reconnects(reader: &Shared) -> u64 {
    let mut rm = ResourceMetrics::default();
    reader.collect(&mut rm).expect("collect");
    let mut total = 0;
    for scope in rm.scope_metrics() {
        for metric in scope.metrics() {
            if metric.name() != "msgstream.reconnects" {
                continue;
            }
            if let AggregatedMetrics::U64(MetricData::Sum(sum)) = metric.data() {
                total += sum
                    .data_points()
                    .filter(|p| {
                        p.attributes()
                            .any(|kv| kv.key.as_str() == "backend" && kv.value.as_str() == "nsq")
                    })
                    .map(|p| p.value())
                    .sum::<u64>();
            }
        }
    }
    total
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconnect_is_counted() {
    let reader = Shared(Arc::new(ManualReader::builder().build()));
    let provider = SdkMeterProvider::builder()
        .with_reader(reader.clone())
        .build();
    opentelemetry::global::set_meter_provider(provider.clone());
    let s = server(Extensions::None).await;
    let consumer = Consumer::connect(consumer_config(&[&s], "metered", "c"))
        .await
        .expect("consumer");
    assert_eq!(reconnects(&reader), 0, "nothing lost yet");
    s.drop_connections();
    eventually("the consumer reconnected", async || {
        consumer.stats().reconnects >= 1
    })
    .await;
    assert_eq!(reconnects(&reader), consumer.stats().reconnects);
    consumer.stop().await;
}
