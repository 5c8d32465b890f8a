//! The client's reconnects reach the core's OpenTelemetry instruments (`msgstream.reconnects`).
//! Its own test binary: the instruments bind to the global provider on first use, so the
//! provider must be installed before anything records. It drops the server's connections: a
//! `fixture_` test.

mod common;

use common::*;
use msgstream::testkit::metrics::recorded;
use msgstream_nsq::Consumer;
use msgstream_nsq_testd::Extensions;

/// `msgstream.reconnects` for backend nsq, summed over addresses.
fn reconnects() -> u64 {
    recorded().counter("msgstream.reconnects", "backend", "nsq")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixture_a_reconnect_is_counted() {
    recorded();
    let s = fixture_server(Extensions::None).await;
    let consumer = Consumer::connect(consumer_config(&[&s], "metered", "c"))
        .await
        .expect("consumer");
    assert_eq!(reconnects(), 0, "nothing lost yet");
    s.drop_connections();
    eventually("the consumer reconnected", async || {
        consumer.stats().reconnects >= 1
    })
    .await;
    assert_eq!(reconnects(), consumer.stats().reconnects);
    consumer.stop().await;
}
