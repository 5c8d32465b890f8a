//! Produce→consume latency of one paced producer and one waiting consumer, next to the same
//! hand-off between two plain threads (the floor this machine sets: thread wake-ups).

use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use msgstream::mq::{Client, ConsumerOptions, Producer, ProducerMessage};
use msgstream_rocksmq::RocksmqClient;

use crate::{median, queue_options, Scale, RUNS};

/// Messages per second of both cases (one every 100 µs).
const RATE: u64 = 10_000;

/// Runs both cases `RUNS` times, interleaved so that both see the same machine, and adds
/// the `case=latency` and `case=latency_baseline` lines (medians of the runs' percentiles).
pub fn latency_cases(runtime: &tokio::runtime::Runtime, scale: &Scale, summary: &mut Vec<String>) {
    let (mut ours, mut baseline) = (Vec::new(), Vec::new());
    for _ in 0..RUNS {
        baseline.push(thread_handoff(RATE, scale.latency_msgs));
        ours.push(runtime.block_on(queue(RATE, scale.latency_msgs)));
    }
    let p = |runs: &[(f64, f64)], which: fn(&(f64, f64)) -> f64| {
        median(runs.iter().map(which).collect())
    };
    summary.push(format!(
        "case=latency rate={RATE} p50_us={:.0} p99_us={:.0}",
        p(&ours, |r| r.0),
        p(&ours, |r| r.1)
    ));
    summary.push(format!(
        "case=latency_baseline p50_us={:.0} p99_us={:.0}",
        p(&baseline, |r| r.0),
        p(&baseline, |r| r.1)
    ));
}

/// Sends every `1/rate` s from a thread that sleeps in between, as the queue case does.
fn paced(rate: u64, total: usize, mut send: impl FnMut()) {
    let interval = Duration::from_nanos(1_000_000_000 / rate);
    let mut due = Instant::now();
    for _ in 0..total {
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
        due += interval;
        send();
    }
}

/// (p50, p99) in microseconds.
fn percentiles(mut samples: Vec<f64>) -> (f64, f64) {
    samples.sort_by(f64::total_cmp);
    let at = |q: f64| samples[((samples.len() as f64 * q) as usize).min(samples.len() - 1)];
    (at(0.50), at(0.99))
}

/// The reference: one thread sends an `Instant` over `std::sync::mpsc` at `rate`, another
/// blocks in `recv` and records the delay.
fn thread_handoff(rate: u64, total: usize) -> (f64, f64) {
    let (tx, rx) = mpsc::channel::<Instant>();
    let receiver = std::thread::spawn(move || {
        let mut samples = Vec::with_capacity(total);
        while let Ok(sent) = rx.recv() {
            samples.push(sent.elapsed().as_nanos() as f64 / 1000.0);
        }
        samples
    });
    paced(rate, total, || {
        tx.send(Instant::now()).expect("receiver alive")
    });
    drop(tx);
    percentiles(receiver.join().expect("receiver thread"))
}

/// One producer thread paced at `rate` msgs/s, one consumer awaiting `recv` and acking each
/// message; each payload carries its send time.
async fn queue(rate: u64, total: usize) -> (f64, f64) {
    let dir = tempfile::tempdir().expect("tempdir");
    let client = Arc::new(RocksmqClient::open(queue_options(&dir)).expect("open"));
    let mut consumer = client
        .subscribe(ConsumerOptions::new("bench", "latency"))
        .await
        .expect("subscribe");
    let producer: Arc<dyn Producer> =
        Arc::from(client.create_producer("bench").await.expect("producer"));
    let epoch = Instant::now();
    let sender = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        paced(rate, total, || {
            let mut payload = vec![0u8; 128];
            let sent = epoch.elapsed().as_nanos() as u64;
            payload[..8].copy_from_slice(&sent.to_be_bytes());
            runtime
                .block_on(producer.send(ProducerMessage::new(payload)))
                .expect("send");
        });
    });
    let mut samples = Vec::with_capacity(total);
    for _ in 0..total {
        let message = consumer.recv().await.expect("recv").expect("message");
        let received = epoch.elapsed().as_nanos() as u64;
        let mut sent = [0u8; 8];
        sent.copy_from_slice(&message.payload[..8]);
        samples.push(received.saturating_sub(u64::from_be_bytes(sent)) as f64 / 1000.0);
        consumer.ack(&message).await.expect("ack");
    }
    sender.join().expect("producer thread");
    client.close().await;
    percentiles(samples)
}
