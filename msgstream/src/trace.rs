//! Trace context in message properties (W3C `traceparent`), through OpenTelemetry's propagator
//! API.
//!
//! Producing injects the caller's current OpenTelemetry context into each message's properties;
//! consuming extracts it, so the consuming span continues the producer's trace. No exporter is
//! needed here: applications that install an OpenTelemetry tracer get linked spans, the others pay
//! for one small string per message.

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use opentelemetry::Context;

use crate::mq::Properties;

/// The property key of the W3C trace context.
pub const TRACEPARENT: &str = "traceparent";
static FIELDS: std::sync::LazyLock<[String; 1]> =
    std::sync::LazyLock::new(|| [TRACEPARENT.to_string()]);

/// W3C Trace Context (`traceparent` only: version 00, trace id, parent span id, flags).
#[derive(Debug, Default, Clone, Copy)]
pub struct W3cTraceContext;

impl TextMapPropagator for W3cTraceContext {
    fn inject_context(&self, cx: &Context, injector: &mut dyn Injector) {
        let span = cx.span();
        let sc = span.span_context();
        if sc.is_valid() {
            injector.set(
                TRACEPARENT,
                format!(
                    "00-{}-{}-{:02x}",
                    sc.trace_id(),
                    sc.span_id(),
                    sc.trace_flags().to_u8()
                ),
            );
        }
    }

    fn extract_with_context(&self, cx: &Context, extractor: &dyn Extractor) -> Context {
        match extractor.get(TRACEPARENT).and_then(parse_traceparent) {
            Some(sc) => cx.with_remote_span_context(sc),
            None => cx.clone(),
        }
    }

    fn fields(&self) -> opentelemetry::propagation::text_map_propagator::FieldIter<'_> {
        opentelemetry::propagation::text_map_propagator::FieldIter::new(FIELDS.as_slice())
    }
}

fn parse_traceparent(value: &str) -> Option<SpanContext> {
    let mut parts = value.trim().split('-');
    let (version, trace, span, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if version != "00" || parts.next().is_some() || trace.len() != 32 || span.len() != 16 {
        return None;
    }
    let trace_id = TraceId::from_hex(trace).ok()?;
    let span_id = SpanId::from_hex(span).ok()?;
    let flags = u8::from_str_radix(flags, 16).ok()?;
    let sc = SpanContext::new(
        trace_id,
        span_id,
        TraceFlags::new(flags),
        true,
        TraceState::default(),
    );
    sc.is_valid().then_some(sc)
}

struct PropertiesInjector<'a>(&'a mut Properties);

impl Injector for PropertiesInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        self.0.insert(key.to_string(), value);
    }
}

struct PropertiesExtractor<'a>(&'a Properties);

impl Extractor for PropertiesExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }
}

/// Writes the current OpenTelemetry context into `properties` (nothing when there is no span).
pub fn inject_current(properties: &mut Properties) {
    inject(&Context::current(), properties);
}

/// Writes `cx` into `properties` (nothing when it has no valid span).
pub fn inject(cx: &Context, properties: &mut Properties) {
    W3cTraceContext.inject_context(cx, &mut PropertiesInjector(properties));
}

/// The producer's context carried by `properties` (an empty context when there is none or it is
/// malformed).
pub fn extract(properties: &Properties) -> Context {
    W3cTraceContext.extract_with_context(&Context::new(), &PropertiesExtractor(properties))
}

/// Starts and ends the consuming span of one message as a child of the producer's span, through
/// the globally installed OpenTelemetry tracer (a no-op until the application installs one).
pub fn record_consume(properties: &Properties, channel: &str) {
    // Most messages carry no trace context: skip building an empty one for each of them.
    if !properties.contains_key(TRACEPARENT) {
        return;
    }
    let parent = extract(properties);
    if parent.span().span_context().is_valid() {
        use opentelemetry::trace::{Span, Tracer};
        let mut span = opentelemetry::global::tracer("msgstream")
            .start_with_context("msgstream.consume", &parent);
        span.set_attribute(opentelemetry::KeyValue::new(
            "messaging.destination.name",
            channel.to_string(),
        ));
        span.end();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_garbage() {
        let sc = SpanContext::new(
            TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").expect("hex"),
            SpanId::from_hex("00f067aa0ba902b7").expect("hex"),
            TraceFlags::SAMPLED,
            true,
            TraceState::default(),
        );
        let cx = Context::new().with_remote_span_context(sc.clone());
        let mut props = Properties::new();
        {
            let _guard = cx.attach();
            inject_current(&mut props);
        }
        assert_eq!(
            props.get(TRACEPARENT).map(String::as_str),
            Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
        );
        assert_eq!(extract(&props).span().span_context(), &sc);
        for bad in [
            "",
            "00-xyz",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        ] {
            let props = Properties::from([(TRACEPARENT.to_string(), bad.to_string())]);
            assert!(!extract(&props).span().span_context().is_valid(), "{bad}");
        }
        let mut none = Properties::new();
        inject_current(&mut none);
        assert!(none.is_empty());
    }
}
