//! Reading what the streams record, for tests: an OpenTelemetry meter provider with a manual
//! reader, installed globally once per process, and sums of counters by attribute.
//!
//! The core binds its instruments to the global provider on first use, so a test binary that
//! checks metrics calls [`recorded`] before anything records (the first call installs the
//! provider) and runs in a process of its own (an integration test file).

use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData, ResourceMetrics};
use opentelemetry_sdk::metrics::reader::MetricReader;
use opentelemetry_sdk::metrics::{
    InstrumentKind, ManualReader, Pipeline, SdkMeterProvider, Temporality,
};

/// The provider's reader, shared with the test so it can collect.
#[derive(Debug, Clone)]
struct SharedReader(Arc<ManualReader>);

impl MetricReader for SharedReader {
    fn register_pipeline(&self, pipeline: Weak<Pipeline>) {
        self.0.register_pipeline(pipeline)
    }
    fn collect(&self, rm: &mut ResourceMetrics) -> OTelSdkResult {
        self.0.collect(rm)
    }
    fn force_flush(&self) -> OTelSdkResult {
        self.0.force_flush()
    }
    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }
    fn temporality(&self, kind: InstrumentKind) -> Temporality {
        self.0.temporality(kind)
    }
}

/// What this process recorded so far, through the global provider this installs on first call.
pub fn recorded() -> Recorded {
    static READER: OnceLock<(SharedReader, SdkMeterProvider)> = OnceLock::new();
    let (reader, _) = READER.get_or_init(|| {
        let reader = SharedReader(Arc::new(ManualReader::builder().build()));
        let provider = SdkMeterProvider::builder()
            .with_reader(reader.clone())
            .build();
        opentelemetry::global::set_meter_provider(provider.clone());
        (reader, provider)
    });
    let mut metrics = ResourceMetrics::default();
    reader.collect(&mut metrics).expect("collect metrics");
    Recorded(metrics)
}

/// One collection of the process's metrics.
pub struct Recorded(ResourceMetrics);

impl Recorded {
    /// Sum of the `u64` counter `name` over its data points with attribute `key` = `value`.
    pub fn counter(&self, name: &str, key: &str, value: &str) -> u64 {
        let mut total = 0;
        for scope in self.0.scope_metrics() {
            for metric in scope.metrics().filter(|m| m.name() == name) {
                if let AggregatedMetrics::U64(MetricData::Sum(sum)) = metric.data() {
                    total += sum
                        .data_points()
                        .filter(|p| {
                            p.attributes()
                                .any(|kv| kv.key.as_str() == key && kv.value.as_str() == value)
                        })
                        .map(|p| p.value())
                        .sum::<u64>();
                }
            }
        }
        total
    }
}
