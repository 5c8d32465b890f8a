//! A few lines for people from a [`Snapshot`]: what `consume --stats` and `bench` print, from
//! the same instruments `/metrics` shows.

use std::collections::BTreeMap;

use super::snapshot::{Snapshot, Value};

/// The summary lines, each starting with `metrics:`. Instruments nothing recorded into are
/// left out rather than shown as zero.
pub fn summary(snapshot: &Snapshot) -> Vec<String> {
    let mut lines = Vec::new();
    for (verb, prefix) in [
        ("produced", "msgstream.produced"),
        ("consumed", "msgstream.consumed"),
    ] {
        let messages = snapshot.by_label(&format!("{prefix}.messages"), "channel");
        if messages.is_empty() {
            continue;
        }
        let bytes = snapshot.total(&format!("{prefix}.bytes")).unwrap_or(0.0);
        lines.push(format!(
            "metrics: {verb} {} messages, {} bytes ({})",
            messages.values().sum::<f64>(),
            bytes,
            per_channel(&messages)
        ));
    }
    if let Some(line) = latency(snapshot) {
        lines.push(line);
    }
    for series in snapshot.named("msgstream.tt.watermark") {
        let sub = series.label("subscription").unwrap_or("?");
        let lag = snapshot
            .named("msgstream.tt.holder_lag")
            .find(|s| s.label("subscription") == Some(sub))
            .and_then(|s| s.value.number());
        let ticks: BTreeMap<String, f64> = snapshot
            .named("msgstream.tt.last_tick")
            .filter(|s| s.label("subscription") == Some(sub))
            .filter_map(|s| Some((s.label("channel")?.to_string(), s.value.number()?)))
            .collect();
        let holder = ticks
            .iter()
            .min_by(|a, b| a.1.total_cmp(b.1))
            .map_or("?", |(name, _)| name.as_str());
        lines.push(format!(
            "metrics: tt {sub}: watermark {}, held by {holder}, lag {}",
            series.value.number().unwrap_or(0.0),
            lag.map_or("?".to_string(), |l| l.to_string())
        ));
    }
    if let Some(retries) = snapshot.total("msgstream.retries") {
        lines.push(format!("metrics: retries {retries}"));
    }
    lines
}

fn per_channel(values: &BTreeMap<String, f64>) -> String {
    let parts: Vec<String> = values.iter().map(|(k, v)| format!("{k}: {v}")).collect();
    parts.join(", ")
}

/// Produce latency over all channels: count and the bucket bounds the 50th and 99th
/// percentiles fall under (a histogram knows no more than that).
fn latency(snapshot: &Snapshot) -> Option<String> {
    let mut merged: Option<(Vec<f64>, Vec<u64>)> = None;
    for series in snapshot.named("msgstream.produce.duration") {
        if let Value::Histogram { bounds, counts, .. } = &series.value {
            match &mut merged {
                None => merged = Some((bounds.clone(), counts.clone())),
                Some((_, total)) => total.iter_mut().zip(counts).for_each(|(t, c)| *t += c),
            }
        }
    }
    let (bounds, counts) = merged?;
    let count: u64 = counts.iter().sum();
    if count == 0 {
        return None;
    }
    let quantile = |q: f64| {
        let want = (q * count as f64).ceil() as u64;
        let mut seen = 0;
        for (i, n) in counts.iter().enumerate() {
            seen += n;
            if seen >= want {
                return bounds
                    .get(i)
                    .map_or("above the largest bucket".to_string(), |b| {
                        format!("≤ {} ms", b * 1000.0)
                    });
            }
        }
        "?".to_string()
    };
    Some(format!(
        "metrics: produce batches {count}, latency p50 {} p99 {}",
        quantile(0.5),
        quantile(0.99)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::snapshot::Series;

    fn series(name: &str, labels: &[(&str, &str)], value: Value) -> Series {
        Series {
            name: name.into(),
            description: String::new(),
            unit: String::new(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            value,
        }
    }

    #[test]
    fn counts_latency_and_the_watermark_holder() {
        let sub = ("subscription", "s");
        let snapshot = Snapshot {
            series: vec![
                series(
                    "msgstream.consumed.messages",
                    &[("channel", "a")],
                    Value::Counter(2.0),
                ),
                series(
                    "msgstream.consumed.messages",
                    &[("channel", "b")],
                    Value::Counter(1.0),
                ),
                series(
                    "msgstream.consumed.bytes",
                    &[("channel", "a")],
                    Value::Counter(30.0),
                ),
                series(
                    "msgstream.produce.duration",
                    &[("channel", "a")],
                    Value::Histogram {
                        bounds: vec![0.001, 0.01],
                        counts: vec![98, 1, 1],
                        sum: 0.1,
                        count: 100,
                    },
                ),
                series("msgstream.tt.watermark", &[sub], Value::Gauge(40.0)),
                series("msgstream.tt.holder_lag", &[sub], Value::Gauge(5.0)),
                series(
                    "msgstream.tt.last_tick",
                    &[sub, ("channel", "a")],
                    Value::Gauge(45.0),
                ),
                series(
                    "msgstream.tt.last_tick",
                    &[sub, ("channel", "b")],
                    Value::Gauge(40.0),
                ),
            ],
        };
        let lines = summary(&snapshot);
        assert_eq!(
            lines[0],
            "metrics: consumed 3 messages, 30 bytes (a: 2, b: 1)"
        );
        assert_eq!(
            lines[1],
            "metrics: produce batches 100, latency p50 ≤ 1 ms p99 ≤ 10 ms"
        );
        assert_eq!(lines[2], "metrics: tt s: watermark 40, held by b, lag 5");
        assert_eq!(lines.len(), 3, "no retries recorded, none shown: {lines:?}");
    }
}
