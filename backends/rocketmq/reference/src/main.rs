//! The reference side of `backends/rocketmq/benches/broker.rs` (issue #11): one benchmark case
//! through the crates.io client `rocketmq-client-rust` 1.0.0, against a name server and a
//! topic the bench has already created (with msgstream-rocketmq's `Admin`, so both clients write
//! to identically configured topics). Prints one line, `msgs_per_s=… p50_us=… p99_us=…`, and
//! exits 0; any failure is a message on stderr and exit status 1.
//!
//! ```text
//! reference produce       --namesrv ADDR --topic T --payload 128 --senders 4 --messages 4000
//! reference produce-batch --namesrv ADDR --topic T --payload 128 --batch 64 --messages 4000
//! reference consume       --namesrv ADDR --topic T --group G --messages 3968 [--pull-batch 32]
//! ```
//!
//! The `send` and `receive` cases (module [`interop`]) serve the interop test instead.
//!
//! Each case does what the bench does with our client:
//! - `produce`: `senders` tasks share one started `DefaultMQProducer`, each sending
//!   `messages / senders` messages (topic + body, no tag) one at a time with the synchronous
//!   `send` (the client's default queue selection and 2 retries, as ours); latency per send.
//! - `produce-batch`: `messages / batch` synchronous `send_batch` calls of `batch` messages;
//!   latency per batch, throughput in messages.
//! - `consume`: a `DefaultLitePullConsumer` in subscribe mode in one fresh group, consuming from
//!   the first offset (`ConsumeFromFirstOffset`), with the same pull batch as ours (32; the
//!   client's default is 10), polling until `messages` arrived. The clock starts before
//!   `start()`, as ours, so rebalancing and the first pulls count; p50/p99 are per `poll`.
//!   `poll` moves the in-memory consume offset itself (auto commit, persisted every 5 s), which
//!   is what our `ack` does after each `poll`.
//!
//! Producer and consumer start before the clock for the produce cases (`start()` connects and
//! begins heartbeats; ours has no start), so each side's first send includes its route lookup.
//! The runtime is a 2-worker multi-thread tokio runtime, as the bench's.

mod interop;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use rocketmq_client_rust::{
    ClientRuntime, ClientRuntimeConfig, DefaultLitePullConsumer, DefaultMQProducer, SendStatus,
    TelemetryHandle,
};
use rocketmq_model::common::consumer::consume_from_where::ConsumeFromWhere;
use rocketmq_model::common::message::message_single::Message;
use rocketmq_runtime::{RuntimeConfig, RuntimeOwner};

type Error = Box<dyn std::error::Error + Send + Sync>;
type Result<T> = std::result::Result<T, Error>;

/// How long the consume case may take before it gives up.
const CONSUME_DEADLINE: Duration = Duration::from_secs(120);

#[derive(Debug)]
enum Case {
    Produce,
    ProduceBatch,
    Consume,
    Send,
    Receive,
}

#[derive(Debug)]
struct Args {
    case: Case,
    namesrv: String,
    topic: String,
    group: String,
    payload: usize,
    senders: usize,
    batch: usize,
    messages: usize,
    pull_batch: i32,
    sizes: Vec<usize>,
    count: usize,
    out: Option<PathBuf>,
}

fn parse_args() -> Result<Args> {
    let mut raw = std::env::args().skip(1);
    let case = match raw.next().as_deref() {
        Some("produce") => Case::Produce,
        Some("produce-batch") => Case::ProduceBatch,
        Some("consume") => Case::Consume,
        Some("send") => Case::Send,
        Some("receive") => Case::Receive,
        other => {
            return Err(format!(
                "unknown case {other:?}; expected produce, produce-batch, consume, send or receive"
            )
            .into())
        }
    };
    let mut args = Args {
        case,
        namesrv: String::new(),
        topic: String::new(),
        group: String::new(),
        payload: 128,
        senders: 1,
        batch: 64,
        messages: 4000,
        pull_batch: 32,
        sizes: Vec::new(),
        count: 0,
        out: None,
    };
    while let Some(flag) = raw.next() {
        let value = raw.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let number = || -> Result<usize> {
            value
                .parse()
                .map_err(|e| format!("{flag} {value:?}: {e}").into())
        };
        match flag.as_str() {
            "--namesrv" => args.namesrv = value.clone(),
            "--topic" => args.topic = value.clone(),
            "--group" => args.group = value.clone(),
            "--payload" => args.payload = number()?,
            "--senders" => args.senders = number()?.max(1),
            "--batch" => args.batch = number()?.max(1),
            "--messages" => args.messages = number()?,
            "--pull-batch" => args.pull_batch = i32::try_from(number()?)?,
            "--sizes" => {
                args.sizes = value
                    .split(',')
                    .map(|s| s.parse().map_err(|e| format!("--sizes {s:?}: {e}")))
                    .collect::<std::result::Result<_, _>>()?
            }
            "--count" => args.count = number()?,
            "--out" => args.out = Some(PathBuf::from(&value)),
            _ => return Err(format!("unknown option {flag}").into()),
        }
    }
    if args.namesrv.is_empty() || args.topic.is_empty() {
        return Err("--namesrv and --topic are required".into());
    }
    if matches!(args.case, Case::Consume | Case::Receive) && args.group.is_empty() {
        return Err("consume and receive need --group".into());
    }
    Ok(args)
}

/// Same rank as the bench's: the element at round((n - 1) * p) of the sorted samples.
fn percentile(sorted: &[Duration], p: f64) -> u128 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_micros()
}

fn report(messages: usize, elapsed: Duration, mut latencies: Vec<Duration>) {
    latencies.sort();
    println!(
        "msgs_per_s={:.0} p50_us={} p99_us={}",
        messages as f64 / elapsed.as_secs_f64(),
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99)
    );
}

/// Topic and body, no tag (as the bench's messages); the body is shared, not copied.
fn message(topic: &str, body: &Bytes) -> Message {
    Message::builder()
        .topic(topic)
        .body(body.clone())
        .build_unchecked()
}

async fn producer(runtime: &Arc<ClientRuntime>, args: &Args) -> Result<DefaultMQProducer> {
    let mut producer = DefaultMQProducer::builder(runtime.clone())
        .producer_group(format!("reference-{}", std::process::id()))
        .name_server_addr(args.namesrv.clone())
        .build();
    producer.start().await?;
    Ok(producer)
}

async fn produce(runtime: &Arc<ClientRuntime>, args: &Args) -> Result<()> {
    let mut producer = producer(runtime, args).await?;
    let shared = Arc::new(producer.clone());
    let body = Bytes::from(vec![b'x'; args.payload]);
    let per_sender = args.messages / args.senders;
    let start = Instant::now();
    let tasks: Vec<_> = (0..args.senders)
        .map(|_| {
            let (producer, topic, body) = (shared.clone(), args.topic.clone(), body.clone());
            tokio::spawn(async move {
                let mut latencies = Vec::with_capacity(per_sender);
                for _ in 0..per_sender {
                    let t = Instant::now();
                    let result = producer.send(message(&topic, &body)).await?;
                    match result {
                        Some(r) if r.send_status == SendStatus::SendOk => {}
                        other => return Err(Error::from(format!("send: {other:?}"))),
                    }
                    latencies.push(t.elapsed());
                }
                Ok(latencies)
            })
        })
        .collect();
    let mut latencies = Vec::with_capacity(args.messages);
    for task in tasks {
        latencies.extend(task.await??);
    }
    let elapsed = start.elapsed();
    producer.shutdown().await;
    report(latencies.len(), elapsed, latencies);
    Ok(())
}

async fn produce_batch(runtime: &Arc<ClientRuntime>, args: &Args) -> Result<()> {
    let mut producer = producer(runtime, args).await?;
    let body = Bytes::from(vec![b'x'; args.payload]);
    let batch: Vec<Message> = (0..args.batch)
        .map(|_| message(&args.topic, &body))
        .collect();
    let rounds = args.messages / args.batch;
    let mut latencies = Vec::with_capacity(rounds);
    let start = Instant::now();
    for _ in 0..rounds {
        // `send_batch` takes the messages by value; the bench's is given a prepared slice.
        let messages = batch.clone();
        let t = Instant::now();
        let result = producer.send_batch(messages).await?;
        if result.send_status != SendStatus::SendOk {
            return Err(format!("send_batch: {result:?}").into());
        }
        latencies.push(t.elapsed());
    }
    let elapsed = start.elapsed();
    producer.shutdown().await;
    report(rounds * args.batch, elapsed, latencies);
    Ok(())
}

async fn consume(runtime: &Arc<ClientRuntime>, args: &Args) -> Result<()> {
    let consumer = DefaultLitePullConsumer::builder(runtime.clone())
        .consumer_group(args.group.clone())
        .name_server_addr(args.namesrv.clone())
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .pull_batch_size(args.pull_batch)
        .build()?;
    consumer.subscribe(&args.topic).await?;
    let mut latencies = Vec::new();
    let mut received = 0;
    let start = Instant::now();
    consumer.start().await?;
    while received < args.messages {
        if start.elapsed() > CONSUME_DEADLINE {
            return Err(format!(
                "consumed only {received} of {} messages in {CONSUME_DEADLINE:?}",
                args.messages
            )
            .into());
        }
        let t = Instant::now();
        let messages = consumer.poll_with_timeout_zero_copy(1000).await;
        if messages.is_empty() {
            continue;
        }
        latencies.push(t.elapsed());
        received += messages.len();
    }
    let elapsed = start.elapsed();
    consumer.shutdown().await;
    report(received, elapsed, latencies);
    Ok(())
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("reference: {e}");
            return ExitCode::from(2);
        }
    };
    let owner = match RuntimeOwner::plan(RuntimeConfig::for_parallelism("reference", 2))
        .map_err(|e| Error::from(format!("{e:?}")))
        .and_then(|plan| plan.build().map_err(Error::from))
    {
        Ok(owner) => owner,
        Err(e) => {
            eprintln!("reference: runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = owner.block_on(async {
        let runtime = ClientRuntime::try_new(
            owner.root_context().component("client"),
            ClientRuntimeConfig::default(),
            TelemetryHandle::noop(),
        )?;
        let result = match args.case {
            Case::Produce => produce(&runtime, &args).await,
            Case::ProduceBatch => produce_batch(&runtime, &args).await,
            Case::Consume => consume(&runtime, &args).await,
            Case::Send => interop::send(&runtime, &args).await,
            Case::Receive => interop::receive(&runtime, &args).await,
        };
        runtime.shutdown().await;
        result
    });
    drop(owner.shutdown_background());
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("reference: {e}");
            ExitCode::FAILURE
        }
    }
}
