//! The tool's side of metrics: it installs the OpenTelemetry SDK's meter provider, which the
//! core's instruments record into, and reads them back on demand for `/metrics`,
//! `consume --stats`, `bench` and the admin page.
//!
//! A manual (pull) reader fits: nothing is pushed anywhere, the numbers are read when someone
//! asks, and every reader of them sees the same instruments.

mod prometheus;
pub mod snapshot;
mod summary;

use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::error::{Error, Result};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::reader::MetricReader;
use opentelemetry_sdk::metrics::{
    InstrumentKind, ManualReader, Pipeline, SdkMeterProvider, Temporality,
};

pub use prometheus::render as prometheus_text;
pub use snapshot::Snapshot;
pub use summary::summary;

/// The installed meter provider and a handle to read it.
#[derive(Clone)]
pub struct Telemetry {
    reader: SharedReader,
    /// Kept so the provider (and its pipeline, which the reader only holds weakly) lives as
    /// long as anyone may read.
    _provider: SdkMeterProvider,
}

impl Telemetry {
    /// Installs a provider as the global one. Must run before the first stream is created:
    /// the core creates its instruments once, from whatever provider is global then.
    pub fn install() -> Telemetry {
        let reader = SharedReader(Arc::new(ManualReader::builder().build()));
        let provider = SdkMeterProvider::builder()
            .with_reader(reader.clone())
            .build();
        opentelemetry::global::set_meter_provider(provider.clone());
        Telemetry {
            reader,
            _provider: provider,
        }
    }

    /// What every instrument holds now (cumulative since the process started).
    pub fn snapshot(&self) -> Result<Snapshot> {
        let mut metrics = ResourceMetrics::default();
        self.reader
            .0
            .collect(&mut metrics)
            .map_err(|e| Error::Usage(format!("cannot read the metrics: {e}")))?;
        Ok(Snapshot::from_sdk(&metrics))
    }
}

/// The manual reader, shared between the provider (which owns one) and [`Telemetry`].
#[derive(Debug, Clone)]
struct SharedReader(Arc<ManualReader>);

impl MetricReader for SharedReader {
    fn register_pipeline(&self, pipeline: Weak<Pipeline>) {
        self.0.register_pipeline(pipeline);
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

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::metrics::MeterProvider as _;
    use opentelemetry::KeyValue;

    #[test]
    fn what_instruments_record_is_read_back() {
        let reader = SharedReader(Arc::new(ManualReader::builder().build()));
        let provider = SdkMeterProvider::builder()
            .with_reader(reader.clone())
            .build();
        let telemetry = Telemetry {
            reader,
            _provider: provider.clone(),
        };
        let meter = provider.meter("test");
        let counter = meter.u64_counter("msgstream.produced.messages").build();
        counter.add(3, &[KeyValue::new("channel", "a")]);
        counter.add(2, &[KeyValue::new("channel", "b")]);
        let snapshot = telemetry.snapshot().expect("snapshot");
        assert_eq!(snapshot.total("msgstream.produced.messages"), Some(5.0));
        let by = snapshot.by_label("msgstream.produced.messages", "channel");
        assert_eq!(by.get("a"), Some(&3.0));
    }
}
