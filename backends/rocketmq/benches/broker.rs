//! Throughput and latency of the client against a real broker (started like the tests do, or
//! `MSGSTREAM_ROCKETMQ_NAMESRV`). Prints one `case=… key=value …` line per case:
//!
//! ```text
//! case=produce payload={128,1024} senders={1,4} msgs_per_s=… p50_us=… p99_us=…
//! case=produce_batch payload=128 batch=64 msgs_per_s=… p50_us=… p99_us=…
//! case=consume payload=128 msgs_per_s=…
//! ```
//!
//! - `produce`: 4000 synchronous sends of one message, from `senders` tasks sharing one
//!   producer, round robin over a fresh 4-queue topic; latency per send.
//! - `produce_batch`: 62 synchronous batches of 64 messages to a fresh 1-queue topic; latency
//!   per batch, throughput in messages.
//! - `consume`: a lite pull consumer in a fresh group reads that batch topic from the first
//!   offset (3968 messages), acknowledging each polled batch; the clock starts before `start()`.
//!
//! The machine is shared and noisy, so each case runs `MSGSTREAM_BENCH_ROUNDS` times (default
//! 3), every round on fresh topics (and a fresh group), and each figure printed is the median
//! of its rounds (`msgs_per_s`, `p50_us` and `p99_us` each on their own). Every round's figures
//! go to stderr.
//!
//! `MSGSTREAM_BENCH_REFERENCE=1` runs, in the same rounds, the same workload through the
//! crates.io client `rocketmq-client-rust` 1.0.0 (issue #11), and appends
//! ` reference_msgs_per_s=… ratio=…` (ours / reference, of the medians) to each line. The
//! reference is the binary of `backends/rocketmq/reference`, a crate outside the workspace
//! (so CI never builds it): it is built first (`cargo build --release --locked` with
//! `CARGO_TARGET_DIR=$CARGO_TARGET_DIR_REFERENCE`, default `/var/cache/msgstream/target-ref`;
//! a failed build stops the bench) and run as a subprocess per round against the same name
//! server, on a topic our `Admin` created just like ours (fresh per side and round). The two
//! sides alternate which goes first from round to round. The reference's latency medians go to
//! stderr.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use msgstream_rocketmq::testserver as support;

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use msgstream_rocketmq::namespace::Namespace;
use msgstream_rocketmq::{
    Admin, ConsumeFrom, ConsumeResult, ConsumerOptions, LitePullConsumer, OutgoingMessage,
    Producer, QueueSelector, Selector,
};
use tokio::runtime::Runtime;

const MESSAGES: usize = 4000;
const BATCH: usize = 64;
/// Messages the consume case reads: every message of the batch case's topic.
const CONSUMED: usize = MESSAGES / BATCH * BATCH;

fn unique(prefix: &str) -> String {
    msgstream::testkit::unique(prefix).replace('.', "_")
}

fn percentile(sorted: &[Duration], p: f64) -> u128 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_micros()
}

fn rounds() -> usize {
    std::env::var("MSGSTREAM_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&r| r > 0)
        .unwrap_or(3)
}

/// One round of one side.
#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    msgs_per_s: f64,
    p50_us: u128,
    p99_us: u128,
}

impl Sample {
    fn of(messages: usize, elapsed: Duration, mut latencies: Vec<Duration>) -> Sample {
        latencies.sort();
        Sample {
            msgs_per_s: messages as f64 / elapsed.as_secs_f64(),
            p50_us: percentile(&latencies, 0.5),
            p99_us: percentile(&latencies, 0.99),
        }
    }

    /// Parses the reference's `msgs_per_s=… p50_us=… p99_us=…`.
    fn parse(line: &str) -> Option<Sample> {
        let mut sample = Sample::default();
        let mut seen = 0;
        for (key, value) in line.split_whitespace().filter_map(|kv| kv.split_once('=')) {
            match key {
                "msgs_per_s" => sample.msgs_per_s = value.parse().ok()?,
                "p50_us" => sample.p50_us = value.parse().ok()?,
                "p99_us" => sample.p99_us = value.parse().ok()?,
                _ => continue,
            }
            seen += 1;
        }
        (seen == 3).then_some(sample)
    }

    fn show(&self) -> String {
        format!(
            "msgs_per_s={:.0} p50_us={} p99_us={}",
            self.msgs_per_s, self.p50_us, self.p99_us
        )
    }
}

fn median<T: Copy + PartialOrd>(values: impl Iterator<Item = T>) -> T {
    let mut values: Vec<T> = values.collect();
    values.sort_by(|a, b| a.partial_cmp(b).expect("comparable"));
    values[values.len() / 2]
}

/// The medians of each figure on its own.
fn medians(samples: &[Sample]) -> Sample {
    Sample {
        msgs_per_s: median(samples.iter().map(|s| s.msgs_per_s)),
        p50_us: median(samples.iter().map(|s| s.p50_us)),
        p99_us: median(samples.iter().map(|s| s.p99_us)),
    }
}

/// The `rocketmq-client-rust` side (`MSGSTREAM_BENCH_REFERENCE=1`).
struct Reference {
    binary: PathBuf,
    namesrv: String,
}

impl Reference {
    /// Builds the reference binary when `MSGSTREAM_BENCH_REFERENCE=1`; panics if that fails.
    fn from_env(namesrv: &str) -> Option<Reference> {
        if std::env::var("MSGSTREAM_BENCH_REFERENCE").ok()? != "1" {
            return None;
        }
        let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("reference/Cargo.toml");
        let target = std::env::var_os("CARGO_TARGET_DIR_REFERENCE")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/var/cache/msgstream/target-ref"));
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        eprintln!(
            "building the reference client ({}) into {}",
            manifest.display(),
            target.display()
        );
        let status = Command::new(cargo)
            .args(["build", "--release", "--locked", "--manifest-path"])
            .arg(&manifest)
            .env("CARGO_TARGET_DIR", &target)
            .status()
            .unwrap_or_else(|e| panic!("MSGSTREAM_BENCH_REFERENCE=1: cannot run cargo: {e}"));
        assert!(
            status.success(),
            "MSGSTREAM_BENCH_REFERENCE=1: building the reference client ({}) failed: {status}",
            manifest.display()
        );
        Some(Reference {
            binary: target.join("release/reference"),
            namesrv: namesrv.to_owned(),
        })
    }

    /// Runs one case (`reference <case> --namesrv … <args>`) and returns its figures.
    fn run(&self, case: &str, args: &[String]) -> Sample {
        let output = Command::new(&self.binary)
            .arg(case)
            .args(["--namesrv", &self.namesrv])
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", self.binary.display()));
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "reference {case} {args:?} failed ({}):\n{stdout}{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        stdout
            .lines()
            .find_map(Sample::parse)
            .unwrap_or_else(|| panic!("reference {case} printed no figures:\n{stdout}"))
    }
}

/// Runs `rounds()` rounds of ours (and the reference's, alternating which goes first) and
/// prints `line` with the medians.
fn case(
    line: &str,
    reference: Option<&Reference>,
    mut ours: impl FnMut(usize) -> Sample,
    mut theirs: impl FnMut(&Reference, usize) -> Sample,
    with_latency: bool,
) {
    let (mut our_samples, mut their_samples) = (Vec::new(), Vec::new());
    for round in 0..rounds() {
        let mut run_ours = || {
            let s = ours(round);
            eprintln!("  {line} round={round} ours {}", s.show());
            our_samples.push(s);
        };
        match reference {
            None => run_ours(),
            Some(reference) => {
                let mut run_theirs = || {
                    let s = theirs(reference, round);
                    eprintln!("  {line} round={round} reference {}", s.show());
                    their_samples.push(s);
                };
                if round % 2 == 0 {
                    run_ours();
                    run_theirs();
                } else {
                    run_theirs();
                    run_ours();
                }
            }
        }
    }
    let ours = medians(&our_samples);
    let mut out = format!("{line} msgs_per_s={:.0}", ours.msgs_per_s);
    if with_latency {
        out += &format!(" p50_us={} p99_us={}", ours.p50_us, ours.p99_us);
    }
    if reference.is_some() {
        let theirs = medians(&their_samples);
        out += &format!(
            " reference_msgs_per_s={:.0} ratio={:.2}",
            theirs.msgs_per_s,
            ours.msgs_per_s / theirs.msgs_per_s
        );
        eprintln!("  {line} reference medians {}", theirs.show());
    }
    println!("{out}");
}

async fn produce(admin: &Admin, topic: &str, payload: usize, senders: usize) -> Sample {
    let producer = Arc::new(Producer::new(
        admin.clone(),
        "bench",
        Namespace::default(),
        2,
    ));
    let body = vec![b'x'; payload];
    let start = Instant::now();
    let tasks: Vec<_> = (0..senders)
        .map(|_| {
            let (producer, topic, body) = (producer.clone(), topic.to_owned(), body.clone());
            tokio::spawn(async move {
                let message = OutgoingMessage::new(topic, body);
                let mut latencies = Vec::with_capacity(MESSAGES / senders);
                for _ in 0..MESSAGES / senders {
                    let t = Instant::now();
                    producer
                        .send(&message, &QueueSelector::RoundRobin)
                        .await
                        .expect("send");
                    latencies.push(t.elapsed());
                }
                latencies
            })
        })
        .collect();
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await.expect("sender"));
    }
    let elapsed = start.elapsed();
    Sample::of(latencies.len(), elapsed, latencies)
}

async fn produce_batch(admin: &Admin, topic: &str, payload: usize) -> Sample {
    let producer = Producer::new(admin.clone(), "bench", Namespace::default(), 2);
    let batch: Vec<_> = (0..BATCH)
        .map(|_| OutgoingMessage::new(topic, vec![b'x'; payload]))
        .collect();
    let mut latencies = Vec::new();
    let start = Instant::now();
    for _ in 0..MESSAGES / BATCH {
        let t = Instant::now();
        producer
            .send_batch(&batch, &QueueSelector::RoundRobin)
            .await
            .expect("batch");
        latencies.push(t.elapsed());
    }
    let elapsed = start.elapsed();
    Sample::of(latencies.len() * BATCH, elapsed, latencies)
}

async fn consume(admin: &Admin, topic: &str) -> Sample {
    let options = ConsumerOptions {
        consume_from: ConsumeFrom::First,
        ..ConsumerOptions::new(unique("bench-group"))
    };
    let consumer = LitePullConsumer::new(admin, Namespace::default(), options).expect("consumer");
    consumer.subscribe(topic, Selector::All).expect("subscribe");
    let mut latencies = Vec::new();
    let start = Instant::now();
    consumer.start().await.expect("start");
    let mut received = 0;
    while received < CONSUMED {
        let t = Instant::now();
        let request = consumer
            .poll(Duration::from_secs(10))
            .await
            .expect("poll")
            .expect("messages within 10 s");
        latencies.push(t.elapsed());
        received += request.messages.len();
        consumer
            .ack(&request, ConsumeResult::Success)
            .await
            .expect("ack");
    }
    let sample = Sample::of(received, start.elapsed(), latencies);
    consumer.shutdown().await.expect("shutdown");
    sample
}

/// A fresh topic of `queues` queues, created with our `Admin` for either side.
fn topic(runtime: &Runtime, admin: &Admin, queues: u32) -> String {
    let topic = unique("bench");
    runtime
        .block_on(admin.create_topic(&topic, queues))
        .expect("topic");
    topic
}

fn main() {
    let cluster = support::shared();
    let reference = Reference::from_env(&cluster.namesrv);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let admin = runtime.block_on(async { support::admin_for(&cluster.namesrv) });
    let reference = reference.as_ref();
    let n = |v: usize| v.to_string();

    for payload in [128, 1024] {
        for senders in [1, 4] {
            case(
                &format!("case=produce payload={payload} senders={senders}"),
                reference,
                |_| {
                    let topic = topic(&runtime, &admin, 4);
                    runtime.block_on(produce(&admin, &topic, payload, senders))
                },
                |reference, _| {
                    let topic = topic(&runtime, &admin, 4);
                    reference.run(
                        "produce",
                        &[
                            "--topic".into(),
                            topic,
                            "--payload".into(),
                            n(payload),
                            "--senders".into(),
                            n(senders),
                            "--messages".into(),
                            n(MESSAGES),
                        ],
                    )
                },
                true,
            );
        }
    }

    // Each round's batch topic is consumed by the same side in the consume case.
    let (mut our_topics, mut their_topics) = (Vec::new(), Vec::new());
    case(
        &format!("case=produce_batch payload=128 batch={BATCH}"),
        reference,
        |_| {
            let topic = topic(&runtime, &admin, 1);
            our_topics.push(topic.clone());
            runtime.block_on(produce_batch(&admin, &topic, 128))
        },
        |reference, _| {
            let topic = topic(&runtime, &admin, 1);
            their_topics.push(topic.clone());
            reference.run(
                "produce-batch",
                &[
                    "--topic".into(),
                    topic,
                    "--payload".into(),
                    n(128),
                    "--batch".into(),
                    n(BATCH),
                    "--messages".into(),
                    n(MESSAGES),
                ],
            )
        },
        true,
    );
    case(
        "case=consume payload=128",
        reference,
        |round| runtime.block_on(consume(&admin, &our_topics[round])),
        |reference, round| {
            reference.run(
                "consume",
                &[
                    "--topic".into(),
                    their_topics[round].clone(),
                    "--group".into(),
                    unique("bench-group"),
                    "--messages".into(),
                    n(CONSUMED),
                ],
            )
        },
        false,
    );
}
