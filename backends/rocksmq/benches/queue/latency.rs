//! Produce→consume latency of one paced producer and one waiting consumer, next to the least
//! an embedded durable queue can do on this machine (`latency_floor`: a raw RocksDB put with
//! the queue's write options, then waking a reader blocked on a condition, which reads the
//! key back) and to the same hand-off between two plain threads with no database at all
//! (`latency_baseline`: thread wake-ups alone). The `latency_floor` line gives our p50 and p99
//! as ratios to the floor's, run by run (the median of the runs' ratios).
//!
//! Two more lines explain the gap between them. `latency_baseline_busy` is the same hand-off
//! with a receiver that, after each message, stays busy as long as our consumer's ack took
//! (the median of the run before): on this VM a receiver that works between wake-ups is woken
//! more slowly, whatever the work is. `latency_acks_every` is our case acking cumulatively
//! every 64th message instead of each one, and `latency_grouped_acks` our case acking each
//! message on a queue that groups acks (`AckWrite::Grouped`): what an application can tune.

use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use msgstream::mq::{Client, ConsumerOptions, Producer, ProducerMessage};
use msgstream_rocksmq::{AckWrite, RocksmqClient};

use crate::{key, median, queue_options, raw_db, Scale, RUNS};

/// Messages per second of every case (one every 100 µs).
const RATE: u64 = 10_000;

/// The consumer's cumulative ack interval of `case=latency_acks_every`.
const ACK_EVERY: usize = 64;

/// The queue's ack grouping interval of `case=latency_grouped_acks`, in milliseconds.
const GROUP_MS: u64 = 5;

/// One run of the queue case.
struct QueueRun {
    /// (p50, p99) produce→receive, µs.
    latency: (f64, f64),
    /// Median duration of one `ack` call.
    ack: Duration,
}

/// Runs every case `RUNS` times, interleaved so that all see the same machine, and adds the
/// `case=latency`, `case=latency_baseline`, `case=latency_baseline_busy`,
/// `case=latency_acks_every` and `case=latency_grouped_acks` lines (medians of the runs'
/// percentiles).
pub fn latency_cases(runtime: &tokio::runtime::Runtime, scale: &Scale, summary: &mut Vec<String>) {
    let (mut ours, mut baseline, mut busy, mut batched, mut grouped) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut floor = Vec::new();
    let mut acks = Vec::new();
    let group = AckWrite::Grouped(Duration::from_millis(GROUP_MS));
    for _ in 0..RUNS {
        let run = runtime.block_on(queue(RATE, scale.latency_msgs, 1, AckWrite::Immediate));
        ours.push(run.latency);
        acks.push(run.ack.as_nanos() as f64);
        floor.push(put_and_wake(RATE, scale.latency_msgs));
        baseline.push(thread_handoff(RATE, scale.latency_msgs, Duration::ZERO));
        busy.push(thread_handoff(RATE, scale.latency_msgs, run.ack));
        batched.push(
            runtime
                .block_on(queue(
                    RATE,
                    scale.latency_msgs,
                    ACK_EVERY,
                    AckWrite::Immediate,
                ))
                .latency,
        );
        grouped.push(
            runtime
                .block_on(queue(RATE, scale.latency_msgs, 1, group))
                .latency,
        );
    }
    let ratio_to_floor = |of: fn(&(f64, f64)) -> f64| {
        median(
            ours.iter()
                .zip(&floor)
                .map(|(o, f)| of(o) / of(f))
                .collect(),
        )
    };
    let (p50_ratio, p99_ratio) = (ratio_to_floor(|p| p.0), ratio_to_floor(|p| p.1));
    let p = |runs: &[(f64, f64)]| {
        (
            median(runs.iter().map(|r| r.0).collect()),
            median(runs.iter().map(|r| r.1).collect()),
        )
    };
    let (ours, floor, baseline, busy, batched, grouped) = (
        p(&ours),
        p(&floor),
        p(&baseline),
        p(&busy),
        p(&batched),
        p(&grouped),
    );
    summary.push(format!(
        "case=latency rate={RATE} p50_us={:.0} p99_us={:.0}",
        ours.0, ours.1
    ));
    summary.push(format!(
        "case=latency_floor p50_us={:.0} p99_us={:.0} p50_ratio={p50_ratio:.2} p99_ratio={p99_ratio:.2}",
        floor.0, floor.1
    ));
    summary.push(format!(
        "case=latency_baseline p50_us={:.0} p99_us={:.0}",
        baseline.0, baseline.1
    ));
    summary.push(format!(
        "case=latency_baseline_busy work_us={:.1} p50_us={:.0} p99_us={:.0}",
        median(acks) / 1000.0,
        busy.0,
        busy.1
    ));
    summary.push(format!(
        "case=latency_acks_every n={ACK_EVERY} p50_us={:.0} p99_us={:.0}",
        batched.0, batched.1
    ));
    summary.push(format!(
        "case=latency_grouped_acks group_ms={GROUP_MS} p50_us={:.0} p99_us={:.0}",
        grouped.0, grouped.1
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
/// blocks in `recv` and records the delay, then spins for `work` (zero: none) before the next
/// `recv`.
fn thread_handoff(rate: u64, total: usize, work: Duration) -> (f64, f64) {
    let (tx, rx) = mpsc::channel::<Instant>();
    let receiver = std::thread::spawn(move || {
        let mut samples = Vec::with_capacity(total);
        while let Ok(sent) = rx.recv() {
            samples.push(sent.elapsed().as_nanos() as f64 / 1000.0);
            let busy = Instant::now();
            while busy.elapsed() < work {
                std::hint::spin_loop();
            }
        }
        samples
    });
    paced(rate, total, || {
        tx.send(Instant::now()).expect("receiver alive")
    });
    drop(tx);
    percentiles(receiver.join().expect("receiver thread"))
}

/// The floor: a thread paced at `rate` puts each 128-byte message (its send time in its first
/// bytes) into the `messages` column family of a raw database opened with the queue's options,
/// with the queue's write options (WAL on, no sync: `Durability::Buffered`, as the queue case
/// runs), then publishes the id written under a mutex and notifies a condition variable; the
/// reader waits on it while nothing new is written (as our consumer waits in `recv`), then gets
/// each new key and records the delay from the send time in the value it read.
fn put_and_wake(rate: u64, total: usize) -> (f64, f64) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Arc::new(raw_db(&dir));
    let written = Arc::new((Mutex::new(0u64), Condvar::new()));
    let epoch = Instant::now();
    let reader = {
        let (db, written) = (db.clone(), written.clone());
        std::thread::spawn(move || {
            let cf = db.cf_handle("messages").expect("cf");
            let mut samples = Vec::with_capacity(total);
            for id in 1..=total as u64 {
                let (lock, wake) = &*written;
                let mut last = lock.lock().expect("lock");
                while *last < id {
                    last = wake.wait(last).expect("wait");
                }
                drop(last);
                let value = db
                    .get_pinned_cf(cf, key(id))
                    .expect("get")
                    .expect("written");
                let received = epoch.elapsed().as_nanos() as u64;
                let mut sent = [0u8; 8];
                sent.copy_from_slice(&value[..8]);
                samples.push(received.saturating_sub(u64::from_be_bytes(sent)) as f64 / 1000.0);
            }
            samples
        })
    };
    let cf = db.cf_handle("messages").expect("cf");
    let mut write_options = rocksdb::WriteOptions::default();
    write_options.disable_wal(false);
    write_options.set_sync(false);
    let mut id = 0u64;
    paced(rate, total, || {
        id += 1;
        let mut payload = vec![0u8; 128];
        let sent = epoch.elapsed().as_nanos() as u64;
        payload[..8].copy_from_slice(&sent.to_be_bytes());
        db.put_cf_opt(cf, key(id), payload, &write_options)
            .expect("put");
        let (lock, wake) = &*written;
        *lock.lock().expect("lock") = id;
        wake.notify_one();
    });
    percentiles(reader.join().expect("reader thread"))
}

/// One producer thread paced at `rate` msgs/s, one consumer awaiting `recv` and acking every
/// `ack_every`th message (and the last), on a queue writing acks as `ack_write` says; each
/// payload carries its send time.
async fn queue(rate: u64, total: usize, ack_every: usize, ack_write: AckWrite) -> QueueRun {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut options = queue_options(&dir);
    options.ack_write = ack_write;
    let client = Arc::new(RocksmqClient::open(options).expect("open"));
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
    let mut acks = Vec::with_capacity(total / ack_every + 1);
    for n in 1..=total {
        let message = consumer.recv().await.expect("recv").expect("message");
        let received = epoch.elapsed().as_nanos() as u64;
        let mut sent = [0u8; 8];
        sent.copy_from_slice(&message.payload[..8]);
        samples.push(received.saturating_sub(u64::from_be_bytes(sent)) as f64 / 1000.0);
        if n % ack_every == 0 || n == total {
            let acking = Instant::now();
            consumer.ack(&message).await.expect("ack");
            acks.push(acking.elapsed().as_nanos() as f64);
        }
    }
    sender.join().expect("producer thread");
    client.close().await;
    QueueRun {
        latency: percentiles(samples),
        ack: Duration::from_nanos(median(acks) as u64),
    }
}
