//! `cargo bench -p msgstream-nsq --bench client`: the client against the in-process test server,
//! 128-byte messages, each case beside its ceiling — a minimal raw-socket writer/reader in this
//! same file that pipelines the same commands with no client logic — measured in the same run.
//!
//! A fair ceiling does the same work under the same constraints: the same number of
//! acknowledged commands (every PUB/MPUB waits for its `OK`, every message is FINed) with the
//! same number in flight. The client's concurrency is its callers' (tasks awaiting
//! acknowledged sends), so the ceiling gets the same window: one task that writes whatever the
//! window allows in one write, then reads replies and refills. Letting the ceiling stream every
//! command without waiting would measure a different thing (an unbounded window no acknowledged
//! caller can have).
//!
//! Cases (one line each):
//! - `pub single`: 64 tasks each awaiting one PUB at a time on one pooled connection (the
//!   client pipelines them); ceiling: one socket keeping 64 PUBs unacknowledged.
//! - `pub pipelined` (beyond the issue's lines): the same 64 PUBs in flight from one task
//!   through `Producer::publish_queued`, against the same ceiling: what the 64 tasks of
//!   `single` cost in scheduling.
//! - `pub mpub100`: MPUB of 100 from 8 tasks; ceiling: 8 MPUBs unacknowledged.
//! - `sub max_in_flight=1|200`: receive and FIN a backlog; ceiling: SUB, RDY n, FIN each message
//!   as it arrives (the FINs of one read in one write, or of half the window once that many
//!   wait).
//! - `sub spooled`: what the timetick stream's consumers pay on upstream nsqd: an ordered
//!   `NsqClient` consumer (one message in flight; each delivery written to the spool, in a
//!   temporary directory, before its FIN), acked every 100 messages (stage + flush, as a commit
//!   does); ceiling: the raw reader at RDY 1, which FINs each message as it arrives.
//! - `pynsq_pub`, `pynsq_sub` (third party, for scale, no ratio): pynsq 0.9.1 publishing with
//!   64 PUBs in flight and consuming with max_in_flight 200, from
//!   `scripts/nsq_thirdparty_bench.py`. They run when the venv of `scripts/nsq-thirdparty.sh`
//!   exists under the target dir; `MSGSTREAM_BENCH_THIRDPARTY=1` makes the venv first (pip from
//!   PyPI). Without either the bench says how to enable them instead of installing anything.
//!
//! **Layout: one core for the server, one for the side measured.** The machine has two
//! cores and three parties want them: the server, the client, and the ceiling. nsqd is a
//! process of its own, in production on a host of its own, so the test server runs as one
//! here: this same binary re-run as `MSGSTREAM_BENCH_SERVE=1`, the server on a
//! single-threaded runtime. Each side is a task spawned on the bench's runtime of one worker
//! (where an application's publishers and consumers run; not driven from the main thread,
//! which would add a cross-thread wake-up per read). So the server has a core and the side
//! measured has the other, and neither takes the other's. With two workers instead, the
//! client's publishers spread over both cores and take CPU from the server, which the
//! one-task ceiling never does: the ratio then measures that contention, which a client on a
//! host apart from its nsqd does not have; with the server's tasks on the bench's own runtime,
//! the server and the ceiling take turns on one thread with no wake-up between them, a
//! ceiling no server process offers.
//!
//! The machine is shared, so each case runs `MSGSTREAM_BENCH_ROUNDS` times (default 5: single
//! rounds of PUB single spread by ±15 % here), alternating which side goes first, each side on
//! a fresh server of its own, and each side's median is printed.
//! `MSGSTREAM_BENCH_CASES=pub` (or `sub`, `pynsq`, comma-separated) runs one kind of case;
//! for profiling one side under `valgrind --tool=callgrind`, `MSGSTREAM_BENCH_MODES=single`
//! (or `pipelined`, `mpub100`, `1`, `200`) narrows it to one mode and `MSGSTREAM_BENCH_SIDE=client` (or
//! `ceiling`) measures only that side, printing its rate and no ratio.
//!
//! The layout changes every figure here (see the README), so it can be varied without
//! editing: `MSGSTREAM_BENCH_WORKERS=2` gives the bench's runtime two workers, and
//! `MSGSTREAM_BENCH_SERVER_RUNTIME=shared` runs each server on the bench's runtime (`own`: on
//! a one-worker runtime of its own in this process) instead of in a process of its own. The
//! first line printed names the layout.
#![allow(clippy::unwrap_used, missing_docs)]

use std::collections::VecDeque;
use std::path::PathBuf;
use std::process::Command as Process;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use msgstream_nsq::{Consumer, ConsumerConfig, Producer, ProducerConfig, PublishReceipt};
use msgstream_nsq_testd::{Options, TestServer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const BODY: [u8; 128] = [b'x'; 128];

/// The topic of both sides. Each side runs on a server of its own, so both send the very same
/// commands to a server holding the same state: the server parses every command line byte by
/// byte and visits every topic after each publish, so a longer name or a topic left by the
/// other side would cost one side more per message.
const TOPIC: &str = "bench";

fn pub_cmd(topic: &str) -> Vec<u8> {
    let mut cmd = format!("PUB {topic}\n").into_bytes();
    cmd.extend_from_slice(&(BODY.len() as u32).to_be_bytes());
    cmd.extend_from_slice(&BODY);
    cmd
}

fn mpub_cmd(topic: &str, n: usize) -> Vec<u8> {
    let mut cmd = format!("MPUB {topic}\n").into_bytes();
    cmd.extend_from_slice(&((4 + n * (4 + BODY.len())) as u32).to_be_bytes());
    cmd.extend_from_slice(&(n as u32).to_be_bytes());
    for _ in 0..n {
        cmd.extend_from_slice(&(BODY.len() as u32).to_be_bytes());
        cmd.extend_from_slice(&BODY);
    }
    cmd
}

async fn raw_conn(server: &BenchServer) -> TcpStream {
    let mut s = TcpStream::connect(server.tcp_addr()).await.unwrap();
    s.set_nodelay(true).unwrap();
    let identify = br#"{"feature_negotiation":true,"heartbeat_interval":30000}"#;
    let mut hello = b"  V2IDENTIFY\n".to_vec();
    hello.extend_from_slice(&(identify.len() as u32).to_be_bytes());
    hello.extend_from_slice(identify);
    s.write_all(&hello).await.unwrap();
    read_frame(&mut s, &mut BytesMut::new()).await;
    s
}

/// The size of the first frame in `buf` if it is complete.
fn whole_frame(buf: &[u8]) -> Option<usize> {
    let size = u32::from_be_bytes(buf.get(..4)?.try_into().unwrap()) as usize;
    (buf.len() >= 4 + size).then_some(4 + size)
}

/// Reads one frame; returns (type, data).
async fn read_frame(s: &mut TcpStream, buf: &mut BytesMut) -> (i32, Bytes) {
    loop {
        if let Some(len) = whole_frame(buf) {
            let mut frame = buf.split_to(len).freeze();
            let kind = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
            return (kind, frame.split_off(8));
        }
        buf.reserve(64 * 1024);
        assert!(s.read_buf(buf).await.unwrap() > 0, "server closed");
    }
}

/// Sends `command` `times` times on one socket, never more than `window` unacknowledged: each
/// pass writes what the window allows in one write, then reads and counts the replies.
async fn raw_pipeline(
    server: &BenchServer,
    command: &[u8],
    times: usize,
    window: usize,
) -> Duration {
    let mut s = raw_conn(server).await;
    let mut out = Vec::with_capacity(command.len() * window);
    let mut buf = BytesMut::new();
    let (mut sent, mut acked) = (0, 0);
    let start = Instant::now();
    while acked < times {
        out.clear();
        while sent < times && sent - acked < window {
            out.extend_from_slice(command);
            sent += 1;
        }
        if !out.is_empty() {
            s.write_all(&out).await.unwrap();
        }
        buf.reserve(64 * 1024);
        assert!(s.read_buf(&mut buf).await.unwrap() > 0, "server closed");
        while let Some(len) = whole_frame(&buf) {
            let _ = buf.split_to(len);
            acked += 1;
        }
    }
    start.elapsed()
}

async fn fill(server: &BenchServer, topic: &str, n: usize) {
    raw_pipeline(server, &mpub_cmd(topic, 100), n / 100, 8).await;
}

/// SUB, RDY, and a FIN for every message as it arrives.
async fn raw_consume(server: &BenchServer, topic: &str, rdy: u32, n: usize) -> Duration {
    let mut s = raw_conn(server).await;
    let mut buf = BytesMut::new();
    s.write_all(format!("SUB {topic} c\n").as_bytes())
        .await
        .unwrap();
    read_frame(&mut s, &mut buf).await;
    let start = Instant::now();
    s.write_all(format!("RDY {rdy}\n").as_bytes())
        .await
        .unwrap();
    let mut fin = BytesMut::new();
    // FINs go out once a read is used up, or once half the window waits for them: written
    // only per read, with the server on a core of its own, a read took the whole window and
    // the server then idled until its FINs came back (about a sixth slower at RDY 200:
    // medians of 331k against 394k msgs/s, three and six runs).
    let flush_every = (rdy as usize / 2).max(1);
    let mut unsent = 0;
    let mut got = 0;
    while got < n {
        let (kind, data) = read_frame(&mut s, &mut buf).await;
        if kind == 2 {
            fin.put_slice(b"FIN ");
            fin.put_slice(&data[10..26]);
            fin.put_u8(b'\n');
            got += 1;
            unsent += 1;
        }
        if unsent > 0 && (whole_frame(&buf).is_none() || unsent >= flush_every) {
            s.write_all(&fin).await.unwrap();
            fin.clear();
            unsent = 0;
        }
    }
    start.elapsed()
}

async fn client_pub(server: &BenchServer, n: usize, batch: usize, concurrency: usize) -> Duration {
    let producer = Arc::new(
        Producer::new(ProducerConfig {
            nsqd: vec![server.tcp_addr().to_string()],
            ..ProducerConfig::default()
        })
        .unwrap(),
    );
    producer.publish(TOPIC, &BODY).await.unwrap();
    let bodies: Arc<Vec<Bytes>> = Arc::new((0..batch).map(|_| Bytes::from_static(&BODY)).collect());
    let start = Instant::now();
    let tasks: Vec<_> = (0..concurrency)
        .map(|_| {
            let (producer, bodies) = (producer.clone(), bodies.clone());
            let rounds = n / batch / concurrency;
            tokio::spawn(async move {
                for _ in 0..rounds {
                    if batch == 1 {
                        producer.publish(TOPIC, &BODY).await.unwrap();
                    } else {
                        producer.multi_publish(TOPIC, None, &bodies).await.unwrap();
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let elapsed = start.elapsed();
    producer.close().await;
    elapsed
}

/// One task keeping `window` PUBs in flight through [`Producer::publish_queued`], driven as
/// the ceiling's loop is: queue until the window is full, then wait for the oldest reply.
async fn client_pub_pipelined(server: &BenchServer, n: usize, window: usize) -> Duration {
    let producer = Producer::new(ProducerConfig {
        nsqd: vec![server.tcp_addr().to_string()],
        ..ProducerConfig::default()
    })
    .unwrap();
    producer.publish(TOPIC, &BODY).await.unwrap();
    let mut receipts = VecDeque::with_capacity(window);
    let start = Instant::now();
    for _ in 0..n {
        if receipts.len() == window {
            let oldest: PublishReceipt = receipts.pop_front().unwrap();
            oldest.await.unwrap();
        }
        receipts.push_back(producer.publish_queued(TOPIC, &BODY).await.unwrap());
    }
    for receipt in receipts {
        receipt.await.unwrap();
    }
    let elapsed = start.elapsed();
    producer.close().await;
    elapsed
}

async fn client_consume(
    server: &BenchServer,
    topic: &str,
    max_in_flight: u32,
    n: usize,
) -> Duration {
    let mut config = ConsumerConfig::new(topic, "c");
    config.nsqd = vec![server.tcp_addr().to_string()];
    config.max_in_flight = max_in_flight;
    let start = Instant::now();
    let consumer = Consumer::connect(config).await.unwrap();
    for _ in 0..n {
        let message = consumer.recv().await.unwrap();
        message.finish().await.unwrap();
    }
    let elapsed = start.elapsed();
    consumer.stop().await;
    elapsed
}

/// The ordered consumer of the mq adapter on upstream nsqd: one in flight through its spool.
async fn spooled_consume(server: &BenchServer, topic: &str, n: usize) -> Duration {
    use msgstream::mq::{Client, ConsumerOptions};
    let spool = tempfile::tempdir().unwrap();
    let client = msgstream_nsq::NsqClient::connect(msgstream_nsq::NsqConfig {
        nsqd: vec![server.tcp_addr().to_string()],
        spool_dir: spool.path().to_path_buf(),
        ..msgstream_nsq::NsqConfig::default()
    })
    .await
    .unwrap();
    let start = Instant::now();
    let mut consumer = client
        .subscribe(ConsumerOptions::new(topic, "c").in_order())
        .await
        .unwrap();
    let acker = consumer.acker();
    let mut held = Vec::with_capacity(100);
    for _ in 0..n {
        held.push(consumer.recv().await.unwrap().unwrap());
        if held.len() == 100 {
            for message in held.drain(..) {
                acker.stage(&message).await.unwrap();
            }
            acker.flush().await.unwrap();
        }
    }
    let elapsed = start.elapsed();
    consumer.close().await;
    client.close().await;
    elapsed
}

fn median(mut rates: Vec<f64>) -> f64 {
    rates.sort_by(f64::total_cmp);
    let mid = rates.len() / 2;
    if rates.len() % 2 == 1 {
        rates[mid]
    } else {
        (rates[mid - 1] + rates[mid]) / 2.0
    }
}

fn rounds() -> usize {
    env_number("MSGSTREAM_BENCH_ROUNDS", 5)
}

fn wanted(kind: &str) -> bool {
    std::env::var("MSGSTREAM_BENCH_CASES")
        .map_or(true, |cases| cases.split(',').any(|c| c.trim() == kind))
}

/// Whether the case's mode (`mode=single`, `max_in_flight=200`, …) was asked for by
/// `MSGSTREAM_BENCH_MODES` (comma-separated values after the `=`; all when unset).
fn wanted_mode(mode: &str) -> bool {
    let value = mode.split_once('=').map_or(mode, |(_, v)| v);
    std::env::var("MSGSTREAM_BENCH_MODES")
        .map_or(true, |modes| modes.split(',').any(|m| m.trim() == value))
}

/// Runs one case `rounds()` times, alternating which side goes first, each side on a fresh
/// server and spawned on the runtime (see the module docs), and prints the medians.
/// `run(server, ceiling)` measures one side and returns its duration.
async fn case<F, Fut>(case: &str, mode: &str, n: usize, run: F)
where
    F: Fn(Arc<BenchServer>, bool) -> Fut,
    Fut: std::future::Future<Output = Duration> + Send + 'static,
{
    if !wanted_mode(mode) {
        return;
    }
    let only = std::env::var("MSGSTREAM_BENCH_SIDE").ok();
    let (mut client, mut ceiling) = (Vec::new(), Vec::new());
    for round in 0..rounds() {
        for ceiling_side in [round % 2 == 0, round % 2 == 1] {
            let side = if ceiling_side { "ceiling" } else { "client" };
            if only.as_deref().is_some_and(|only| only != side) {
                continue;
            }
            let server = Arc::new(start_server().await);
            let elapsed = tokio::spawn(run(server, ceiling_side)).await.unwrap();
            let rate = n as f64 / elapsed.as_secs_f64();
            if ceiling_side {
                ceiling.push(rate);
            } else {
                client.push(rate);
            }
        }
    }
    if let Some(only) = only {
        let rates = if only == "ceiling" { ceiling } else { client };
        println!(
            "case={case} {mode} side={only} msgs_per_s={:.0}",
            median(rates)
        );
        return;
    }
    let (rate, ceiling_rate) = (median(client), median(ceiling));
    println!(
        "case={case} {mode} msgs_per_s={rate:.0} ceiling_msgs_per_s={ceiling_rate:.0} ratio={:.2}",
        rate / ceiling_rate
    );
}

/// The target dir this bench was built in (`<target>/release/deps/client-…`), where
/// `scripts/nsq-thirdparty.sh` keeps its venv.
fn target_dir() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    Some(exe.parent()?.parent()?.parent()?.to_path_buf())
}

/// pynsq's publish and consume rates against `server`, when its venv exists (or
/// `MSGSTREAM_BENCH_THIRDPARTY=1` asks for it to be made).
async fn pynsq(server: &BenchServer) {
    let scripts = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts");
    let Some(target) = target_dir() else {
        println!("case=pynsq skipped: cannot tell the target dir");
        return;
    };
    let python = target.join("pynsq-venv/bin/python");
    if std::env::var("MSGSTREAM_BENCH_THIRDPARTY").is_ok_and(|v| v == "1") && !python.exists() {
        let made = Process::new("bash")
            .arg(scripts.join("nsq-thirdparty.sh"))
            .arg("--venv-only")
            .env("CARGO_TARGET_DIR", &target)
            .status();
        if !made.is_ok_and(|s| s.success()) {
            println!("case=pynsq skipped: making the pynsq venv failed");
            return;
        }
    }
    if !python.exists() {
        println!(
            "case=pynsq skipped: no pynsq venv at {}; MSGSTREAM_BENCH_THIRDPARTY=1 makes it \
             (pip install from PyPI), as does scripts/nsq-thirdparty.sh",
            python.display()
        );
        return;
    }
    let script = scripts.join("nsq_thirdparty_bench.py");
    let addr = server.tcp_addr().to_string();
    let output = tokio::task::spawn_blocking(move || {
        Process::new(python)
            .arg(script)
            .arg(addr)
            .arg("100000")
            .output()
    })
    .await
    .unwrap();
    match output {
        Ok(out) if out.status.success() => print!("{}", String::from_utf8_lossy(&out.stdout)),
        Ok(out) => println!(
            "case=pynsq failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Err(e) => println!("case=pynsq failed: {e}"),
    }
}

/// A number from the environment, or `default`.
fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(default)
}

/// The runtime the servers run on when `MSGSTREAM_BENCH_SERVER_RUNTIME=own`.
static SERVER_RUNTIME: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();

/// The server one side of a case runs against.
enum BenchServer {
    /// In this process, on the bench's runtime or one of its own.
    InProcess(TestServer),
    /// This same bench binary re-run as `MSGSTREAM_BENCH_SERVE=1`: the test server as a
    /// process of its own on a single-threaded runtime, as an nsqd would be. It exits when its
    /// stdin closes, i.e. when this value is dropped.
    Process(std::process::Child, std::net::SocketAddr),
}

impl BenchServer {
    fn tcp_addr(&self) -> std::net::SocketAddr {
        match self {
            BenchServer::InProcess(server) => server.tcp_addr(),
            BenchServer::Process(_, addr) => *addr,
        }
    }
}

impl Drop for BenchServer {
    fn drop(&mut self) {
        if let BenchServer::Process(child, _) = self {
            drop(child.stdin.take());
            let _ = child.wait();
        }
    }
}

/// Serves until stdin closes (the child side of [`BenchServer::Process`]).
fn serve() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let server = TestServer::start(Options::default()).await.unwrap();
        println!("tcp={}", server.tcp_addr());
        let mut stdin = tokio::io::stdin();
        let mut sink = [0u8; 64];
        while matches!(stdin.read(&mut sink).await, Ok(n) if n > 0) {}
    });
}

/// Where the servers run: `MSGSTREAM_BENCH_SERVER_RUNTIME`, `process` unless set.
fn server_layout() -> String {
    std::env::var("MSGSTREAM_BENCH_SERVER_RUNTIME").unwrap_or_else(|_| "process".into())
}

/// A fresh test server: in a process of its own (the default), with
/// `MSGSTREAM_BENCH_SERVER_RUNTIME=shared` on the bench's runtime, with `=own` on a one-worker
/// runtime of its own in this process.
async fn start_server() -> BenchServer {
    match server_layout().as_str() {
        "own" => {
            let runtime = SERVER_RUNTIME.get_or_init(|| {
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .thread_name("test-server")
                    .enable_all()
                    .build()
                    .unwrap()
            });
            BenchServer::InProcess(
                runtime
                    .spawn(TestServer::start(Options::default()))
                    .await
                    .unwrap()
                    .unwrap(),
            )
        }
        "process" => tokio::task::spawn_blocking(|| {
            use std::io::BufRead;
            let mut child = Process::new(std::env::current_exe().unwrap())
                .env("MSGSTREAM_BENCH_SERVE", "1")
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            let mut line = String::new();
            std::io::BufReader::new(child.stdout.take().unwrap())
                .read_line(&mut line)
                .unwrap();
            let addr = line.trim().strip_prefix("tcp=").unwrap().parse().unwrap();
            BenchServer::Process(child, addr)
        })
        .await
        .unwrap(),
        _ => BenchServer::InProcess(TestServer::start(Options::default()).await.unwrap()),
    }
}

fn main() {
    if std::env::var("MSGSTREAM_BENCH_SERVE").is_ok_and(|v| v == "1") {
        return serve();
    }
    let workers = env_number("MSGSTREAM_BENCH_WORKERS", 1);
    let layout = server_layout();
    if !["process", "shared", "own"].contains(&layout.as_str()) {
        eprintln!("MSGSTREAM_BENCH_SERVER_RUNTIME={layout}: expected process, shared or own");
        std::process::exit(2);
    }
    println!("layout server={layout} bench_workers={workers}");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        if wanted("pub") {
            let n = 128_000;
            case("pub", "mode=single", n, |server, ceiling| async move {
                if ceiling {
                    raw_pipeline(&server, &pub_cmd(TOPIC), n, 64).await
                } else {
                    client_pub(&server, n, 1, 64).await
                }
            })
            .await;
            case("pub", "mode=pipelined", n, |server, ceiling| async move {
                if ceiling {
                    raw_pipeline(&server, &pub_cmd(TOPIC), n, 64).await
                } else {
                    client_pub_pipelined(&server, n, 64).await
                }
            })
            .await;
            let n = 400_000;
            case("pub", "mode=mpub100", n, |server, ceiling| async move {
                if ceiling {
                    raw_pipeline(&server, &mpub_cmd(TOPIC, 100), n / 100, 8).await
                } else {
                    client_pub(&server, n, 100, 8).await
                }
            })
            .await;
        }
        if wanted("sub") {
            for (max_in_flight, n) in [(1u32, 10_000usize), (200, 100_000)] {
                let mode = format!("max_in_flight={max_in_flight}");
                case("sub", &mode, n, |server, ceiling| async move {
                    if ceiling {
                        fill(&server, TOPIC, n).await;
                        raw_consume(&server, TOPIC, max_in_flight, n).await
                    } else {
                        fill(&server, TOPIC, n).await;
                        client_consume(&server, TOPIC, max_in_flight, n).await
                    }
                })
                .await;
            }
            let n = 10_000;
            case("sub", "mode=spooled", n, |server, ceiling| async move {
                fill(&server, TOPIC, n).await;
                if ceiling {
                    raw_consume(&server, TOPIC, 1, n).await
                } else {
                    spooled_consume(&server, TOPIC, n).await
                }
            })
            .await;
        }
        if wanted("pynsq") {
            let server = start_server().await;
            pynsq(&server).await;
        }
    });
}
