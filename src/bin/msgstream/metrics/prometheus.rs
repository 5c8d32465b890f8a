//! The Prometheus text exposition format (version 0.0.4), written from a [`Snapshot`] rather
//! than through an exporter crate: the format is a few lines per series, and the exporter
//! crates bring an HTTP stack or a registry of their own that the tool does not need.

use std::fmt::Write as _;

use super::snapshot::{Series, Snapshot, Value};

/// `msgstream.produce.duration` with unit `s` → `msgstream_produce_duration_seconds`; counters
/// end in `_total`, as Prometheus names them.
fn metric_name(series: &Series) -> String {
    let mut name: String = series
        .name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if series.unit == "s" && !name.ends_with("_seconds") {
        name.push_str("_seconds");
    }
    if matches!(series.value, Value::Counter(_)) {
        name.push_str("_total");
    }
    name
}

fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn label_set(labels: &[(String, String)], extra: Option<(&str, String)>) -> String {
    let mut parts: Vec<String> = labels
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
        .collect();
    if let Some((k, v)) = extra {
        parts.push(format!("{k}=\"{v}\""));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("{{{}}}", parts.join(","))
    }
}

/// Renders every series, with one `# HELP` and `# TYPE` per metric.
pub fn render(snapshot: &Snapshot) -> String {
    let mut out = String::new();
    let mut last = String::new();
    for series in &snapshot.series {
        let name = metric_name(series);
        if name != last {
            let kind = match series.value {
                Value::Counter(_) => "counter",
                Value::Gauge(_) => "gauge",
                Value::Histogram { .. } => "histogram",
            };
            let _ = writeln!(
                out,
                "# HELP {name} {}",
                series.description.replace('\n', " ")
            );
            let _ = writeln!(out, "# TYPE {name} {kind}");
            last = name.clone();
        }
        match &series.value {
            Value::Counter(v) | Value::Gauge(v) => {
                let _ = writeln!(out, "{name}{} {v}", label_set(&series.labels, None));
            }
            Value::Histogram {
                bounds,
                counts,
                sum,
                count,
            } => {
                let mut cumulative = 0u64;
                for (i, n) in counts.iter().enumerate() {
                    cumulative += n;
                    let le = bounds.get(i).map_or("+Inf".to_string(), f64::to_string);
                    let labels = label_set(&series.labels, Some(("le", le)));
                    let _ = writeln!(out, "{name}_bucket{labels} {cumulative}");
                }
                let labels = label_set(&series.labels, None);
                let _ = writeln!(out, "{name}_sum{labels} {sum}");
                let _ = writeln!(out, "{name}_count{labels} {count}");
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_gauges_and_histograms_in_the_text_format() {
        let series = |name: &str, unit: &str, value| Series {
            name: name.into(),
            description: "d".into(),
            unit: unit.into(),
            labels: vec![("channel".into(), "a\"b".into())],
            value,
        };
        let snapshot = Snapshot {
            series: vec![
                series("msgstream.produced.messages", "", Value::Counter(3.0)),
                series("msgstream.tt.watermark", "", Value::Gauge(45.0)),
                series(
                    "msgstream.produce.duration",
                    "s",
                    Value::Histogram {
                        bounds: vec![0.1],
                        counts: vec![1, 2],
                        sum: 0.5,
                        count: 3,
                    },
                ),
            ],
        };
        let text = render(&snapshot);
        assert!(
            text.contains("# TYPE msgstream_produced_messages_total counter\n"),
            "{text}"
        );
        assert!(
            text.contains("msgstream_produced_messages_total{channel=\"a\\\"b\"} 3\n"),
            "{text}"
        );
        assert!(
            text.contains("msgstream_tt_watermark{channel=\"a\\\"b\"} 45\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "msgstream_produce_duration_seconds_bucket{channel=\"a\\\"b\",le=\"+Inf\"} 3\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("msgstream_produce_duration_seconds_count{channel=\"a\\\"b\"} 3\n"),
            "{text}"
        );
    }
}
