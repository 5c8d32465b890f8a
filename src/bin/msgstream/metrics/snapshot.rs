//! A plain copy of what the SDK collected: one [`Series`] per instrument and attribute set.
//!
//! The SDK's data model has a variant per value type and aggregation; the tool's readers (the
//! Prometheus text, the summaries, the admin API) only need a name, labels and a number or a
//! histogram, so they share this one conversion.

use std::collections::BTreeMap;

use opentelemetry::KeyValue;
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, Metric, MetricData, ResourceMetrics};
use serde::Serialize;

/// Every series of one collection.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Snapshot {
    /// In instrument order, then attribute order.
    pub series: Vec<Series>,
}

/// One instrument with one set of attributes.
#[derive(Debug, Clone, Serialize)]
pub struct Series {
    /// OpenTelemetry name (`msgstream.produced.messages`).
    pub name: String,
    /// What it measures.
    pub description: String,
    /// UCUM unit (`s`, `By`), empty when none.
    pub unit: String,
    /// Attributes, sorted by key.
    pub labels: Vec<(String, String)>,
    /// The value.
    pub value: Value,
}

/// The value of a series.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Value {
    /// A monotonic sum.
    Counter(f64),
    /// A last value (or a non-monotonic sum).
    Gauge(f64),
    /// Explicit-bucket histogram: `counts[i]` values at or below `bounds[i]`, the last count
    /// above every bound.
    Histogram {
        /// Upper bounds.
        bounds: Vec<f64>,
        /// Per bucket (one more than bounds).
        counts: Vec<u64>,
        /// Sum of the values.
        sum: f64,
        /// Number of values.
        count: u64,
    },
}

fn labels<'a>(attributes: impl Iterator<Item = &'a KeyValue>) -> Vec<(String, String)> {
    let mut labels: Vec<(String, String)> = attributes
        .map(|kv| (kv.key.to_string(), kv.value.to_string()))
        .collect();
    labels.sort();
    labels
}

fn push<T: Copy>(out: &mut Vec<Series>, metric: &Metric, data: &MetricData<T>, f: fn(T) -> f64) {
    let series = |labels, value| Series {
        name: metric.name().to_string(),
        description: metric.description().to_string(),
        unit: metric.unit().to_string(),
        labels,
        value,
    };
    match data {
        MetricData::Sum(sum) => out.extend(sum.data_points().map(|p| {
            let value = f(p.value());
            let value = if sum.is_monotonic() {
                Value::Counter(value)
            } else {
                Value::Gauge(value)
            };
            series(labels(p.attributes()), value)
        })),
        MetricData::Gauge(gauge) => out.extend(
            gauge
                .data_points()
                .map(|p| series(labels(p.attributes()), Value::Gauge(f(p.value())))),
        ),
        MetricData::Histogram(histogram) => out.extend(histogram.data_points().map(|p| {
            let value = Value::Histogram {
                bounds: p.bounds().collect(),
                counts: p.bucket_counts().collect(),
                sum: f(p.sum()),
                count: p.count(),
            };
            series(labels(p.attributes()), value)
        })),
        // The tool creates no exponential histograms.
        MetricData::ExponentialHistogram(_) => {}
    }
}

impl Snapshot {
    /// Copies what the SDK collected.
    pub fn from_sdk(metrics: &ResourceMetrics) -> Snapshot {
        let mut series = Vec::new();
        for scope in metrics.scope_metrics() {
            for metric in scope.metrics() {
                match metric.data() {
                    AggregatedMetrics::F64(data) => push(&mut series, metric, data, |v| v),
                    AggregatedMetrics::U64(data) => push(&mut series, metric, data, |v| v as f64),
                    AggregatedMetrics::I64(data) => push(&mut series, metric, data, |v| v as f64),
                }
            }
        }
        Snapshot { series }
    }

    /// The series of instrument `name`.
    pub fn named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Series> + 'a {
        self.series.iter().filter(move |s| s.name == name)
    }

    /// Sum over every series of a counter or gauge `name`; `None` when it has none yet.
    pub fn total(&self, name: &str) -> Option<f64> {
        self.named(name)
            .filter_map(|s| s.value.number())
            .fold(None, |sum, v| Some(sum.unwrap_or(0.0) + v))
    }

    /// Values of counter or gauge `name` by the value of label `key` (summed over the others).
    pub fn by_label(&self, name: &str, key: &str) -> BTreeMap<String, f64> {
        let mut out = BTreeMap::new();
        for series in self.named(name) {
            if let (Some(label), Some(value)) = (series.label(key), series.value.number()) {
                *out.entry(label.to_string()).or_insert(0.0) += value;
            }
        }
        out
    }
}

impl Series {
    /// The value of label `key`.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

impl Value {
    /// The number of a counter or gauge.
    pub fn number(&self) -> Option<f64> {
        match self {
            Value::Counter(v) | Value::Gauge(v) => Some(*v),
            Value::Histogram { .. } => None,
        }
    }
}
