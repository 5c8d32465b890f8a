//! Metrics through the OpenTelemetry metrics API: what the streams produce and consume per
//! channel, how long producing takes, where the timetick watermark stands and which channel
//! holds it back, and how often creating a producer or consumer was retried.
//!
//! The instruments come from the global meter provider and are created once, on first use: an
//! application that wants them installs its provider (`opentelemetry::global::set_meter_provider`)
//! before creating its first stream. Without a provider every recording is a no-op, so a library
//! user who does not care pays almost nothing.
//!
//! Names (Prometheus spelling in brackets):
//! `msgstream.produced.messages` / `.bytes` [`msgstream_produced_messages_total`, …], counters
//! by `channel`; `msgstream.consumed.messages` / `.bytes`, the same; `msgstream.produce.duration`
//! (seconds, histogram by `channel`: one batch sent and acknowledged);
//! `msgstream.tt.watermark` and `msgstream.tt.holder_lag` (gauges by `subscription`),
//! `msgstream.tt.last_tick` (gauge by `subscription` and `channel`); `msgstream.tt.stalls`
//! (counter by `subscription` and `channel`: a channel that held `max_held_per_channel`
//! messages without a tick and stopped being read); `msgstream.retries` (counter by
//! `operation`: creating producers and consumers, and receives retried after a transient
//! error); `msgstream.reconnects` (counter by `backend` and `addr`, recorded by the backends
//! through [`record_reconnect`]); `msgstream.redeliveries` (counter by `backend` and `channel`:
//! messages the broker delivered again, which may come after newer ones, recorded through
//! [`record_redelivery`]).

use std::sync::OnceLock;
use std::time::Duration;

use opentelemetry::metrics::{Counter, Gauge, Histogram};
use opentelemetry::KeyValue;

/// The instrumentation scope, as exporters show it.
pub const SCOPE: &str = "msgstream";

/// Every instrument the core records.
pub(crate) struct Metrics {
    produced_messages: Counter<u64>,
    produced_bytes: Counter<u64>,
    consumed_messages: Counter<u64>,
    consumed_bytes: Counter<u64>,
    produce_duration: Histogram<f64>,
    watermark: Gauge<u64>,
    last_tick: Gauge<u64>,
    holder_lag: Gauge<u64>,
    stalls: Counter<u64>,
    retries: Counter<u64>,
    reconnects: Counter<u64>,
    redeliveries: Counter<u64>,
}

/// The instruments, created from the global provider on first use.
pub(crate) fn get() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(|| {
        let meter = opentelemetry::global::meter(SCOPE);
        Metrics {
            produced_messages: meter
                .u64_counter("msgstream.produced.messages")
                .with_description("Messages written, by channel")
                .build(),
            produced_bytes: meter
                .u64_counter("msgstream.produced.bytes")
                .with_unit("By")
                .with_description("Payload bytes written, by channel")
                .build(),
            consumed_messages: meter
                .u64_counter("msgstream.consumed.messages")
                .with_description("Messages received, by channel")
                .build(),
            consumed_bytes: meter
                .u64_counter("msgstream.consumed.bytes")
                .with_unit("By")
                .with_description("Payload bytes received, by channel")
                .build(),
            produce_duration: meter
                .f64_histogram("msgstream.produce.duration")
                .with_unit("s")
                .with_description("Time to send one batch to a channel until acknowledged")
                .with_boundaries(vec![
                    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                    0.5, 1.0, 2.5,
                ])
                .build(),
            watermark: meter
                .u64_gauge("msgstream.tt.watermark")
                .with_description("Timetick watermark of a tt stream: the lowest last tick")
                .build(),
            last_tick: meter
                .u64_gauge("msgstream.tt.last_tick")
                .with_description("Last timetick read from each channel of a tt stream")
                .build(),
            holder_lag: meter
                .u64_gauge("msgstream.tt.holder_lag")
                .with_description("Highest last tick minus the watermark: how far the holder lags")
                .build(),
            stalls: meter
                .u64_counter("msgstream.tt.stalls")
                .with_description(
                    "Times a tt stream stopped reading a channel that held its cap of messages without a tick",
                )
                .build(),
            retries: meter
                .u64_counter("msgstream.retries")
                .with_description(
                    "Retried attempts at creating producers and consumers, and retried receives",
                )
                .build(),
            reconnects: meter
                .u64_counter("msgstream.reconnects")
                .with_description("Connections to a broker made again after one was lost")
                .build(),
            redeliveries: meter
                .u64_counter("msgstream.redeliveries")
                .with_description(
                    "Messages a broker delivered again (possibly after newer ones), by channel",
                )
                .build(),
        }
    })
}

impl Metrics {
    /// One batch of `messages` (`bytes` of payload) sent to `channel` in `took`.
    pub(crate) fn produced(&self, channel: &str, messages: u64, bytes: u64, took: Duration) {
        let attrs = [KeyValue::new("channel", channel.to_string())];
        self.produced_messages.add(messages, &attrs);
        self.produced_bytes.add(bytes, &attrs);
        self.produce_duration.record(took.as_secs_f64(), &attrs);
    }

    /// `messages` messages of `bytes` payload in all received from `channel`.
    pub(crate) fn consumed(&self, channel: &str, messages: u64, bytes: u64) {
        let attrs = [KeyValue::new("channel", channel.to_string())];
        self.consumed_messages.add(messages, &attrs);
        self.consumed_bytes.add(bytes, &attrs);
    }

    /// The state of a tt stream's alignment: per channel its last tick (channels without a
    /// tick yet are left out, as there is nothing true to report for them).
    pub(crate) fn alignment(&self, subscription: &str, ticks: &[(&str, Option<u64>)]) {
        let sub = KeyValue::new("subscription", subscription.to_string());
        for (channel, tick) in ticks {
            if let Some(tick) = tick {
                let attrs = [sub.clone(), KeyValue::new("channel", channel.to_string())];
                self.last_tick.record(*tick, &attrs);
            }
        }
        let known: Vec<u64> = ticks.iter().filter_map(|(_, t)| *t).collect();
        if known.len() == ticks.len() {
            if let (Some(&low), Some(&high)) = (known.iter().min(), known.iter().max()) {
                self.watermark.record(low, std::slice::from_ref(&sub));
                self.holder_lag.record(high - low, &[sub]);
            }
        }
    }

    /// A tt stream stopped reading `channel`: it holds its cap of messages without a tick.
    pub(crate) fn stalled(&self, subscription: &str, channel: &str) {
        self.stalls.add(
            1,
            &[
                KeyValue::new("subscription", subscription.to_string()),
                KeyValue::new("channel", channel.to_string()),
            ],
        );
    }

    /// One retried attempt at `operation`.
    pub(crate) fn retried(&self, operation: &str) {
        self.retries
            .add(1, &[KeyValue::new("operation", operation.to_string())]);
    }
}

/// Records that a backend connected again to `addr` after losing its connection. For backend
/// crates: the count shows up with the core's instruments (`msgstream.reconnects`).
pub fn record_reconnect(backend: &str, addr: &str) {
    get().reconnects.add(
        1,
        &[
            KeyValue::new("backend", backend.to_string()),
            KeyValue::new("addr", addr.to_string()),
        ],
    );
}

/// Records that a backend received a message of `channel` again (a redelivery, which may come
/// after newer messages). For backend crates, as [`record_reconnect`].
pub fn record_redelivery(backend: &str, channel: &str) {
    get().redeliveries.add(
        1,
        &[
            KeyValue::new("backend", backend.to_string()),
            KeyValue::new("channel", channel.to_string()),
        ],
    );
}
