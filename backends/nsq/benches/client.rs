//! `cargo bench -p msgstream-nsq --bench client`: the client against the in-process test server,
//! 128-byte messages, each case beside its ceiling — a minimal raw-socket writer/reader in this
//! same file that pipelines the same commands with no client logic — measured in the same run.
//!
//! Cases (one line each):
//! - `pub single`: PUB, 64 publishes in flight on one pooled connection (the client pipelines);
//!   ceiling: one socket writing every PUB back to back while reading the OKs.
//! - `pub mpub100`: MPUB of 100, 8 batches in flight; ceiling: the same MPUBs back to back.
//! - `sub max_in_flight=1|200`: receive and FIN a backlog; ceiling: SUB, RDY n, FIN each message
//!   as it arrives.
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use msgstream_nsq::{Consumer, ConsumerConfig, Producer, ProducerConfig};
use msgstream_nsq_testd::{Options, TestServer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const BODY: [u8; 128] = [b'x'; 128];

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

async fn raw_conn(server: &TestServer) -> TcpStream {
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

/// Reads one frame; returns (type, data).
async fn read_frame(s: &mut TcpStream, buf: &mut BytesMut) -> (i32, Bytes) {
    loop {
        if buf.len() >= 8 {
            let size = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
            if buf.len() >= 4 + size {
                let mut frame = buf.split_to(4 + size).freeze();
                let kind = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
                return (kind, frame.split_off(8));
            }
        }
        buf.reserve(64 * 1024);
        assert!(s.read_buf(buf).await.unwrap() > 0, "server closed");
    }
}

/// Writes `commands` `times` times back to back on one socket while reading `times` replies.
async fn raw_pipeline(server: &TestServer, command: Vec<u8>, times: usize) -> Duration {
    let s = raw_conn(server).await;
    let (mut rd, mut wr) = s.into_split();
    let start = Instant::now();
    let writer = tokio::spawn(async move {
        let mut batch = Vec::with_capacity(command.len() * 64);
        let mut left = times;
        while left > 0 {
            batch.clear();
            for _ in 0..left.min(64) {
                batch.extend_from_slice(&command);
            }
            left -= left.min(64);
            wr.write_all(&batch).await.unwrap();
        }
        wr
    });
    let mut buf = BytesMut::new();
    let mut oks = 0;
    while oks < times {
        buf.reserve(64 * 1024);
        assert!(rd.read_buf(&mut buf).await.unwrap() > 0);
        while buf.len() >= 4 {
            let size = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
            if buf.len() < 4 + size {
                break;
            }
            let _ = buf.split_to(4 + size);
            oks += 1;
        }
    }
    let elapsed = start.elapsed();
    drop(writer.await.unwrap());
    elapsed
}

async fn fill(server: &TestServer, topic: &str, n: usize) {
    raw_pipeline(server, mpub_cmd(topic, 100), n / 100).await;
}

/// SUB, RDY, and a FIN for every message as it arrives.
async fn raw_consume(server: &TestServer, topic: &str, rdy: u32, n: usize) -> Duration {
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
    let mut got = 0;
    while got < n {
        let (kind, data) = read_frame(&mut s, &mut buf).await;
        if kind == 2 {
            fin.put_slice(b"FIN ");
            fin.put_slice(&data[10..26]);
            fin.put_u8(b'\n');
            got += 1;
        }
        let more = buf.len() >= 4 && {
            let size = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
            buf.len() >= 4 + size
        };
        if !more {
            s.write_all(&fin).await.unwrap();
            fin.clear();
        }
    }
    start.elapsed()
}

fn producer(server: &TestServer) -> Arc<Producer> {
    Arc::new(
        Producer::new(ProducerConfig {
            nsqd: vec![server.tcp_addr().to_string()],
            ..ProducerConfig::default()
        })
        .unwrap(),
    )
}

async fn client_pub(server: &TestServer, n: usize, batch: usize, concurrency: usize) -> Duration {
    let producer = producer(server);
    producer.publish("warm", &BODY).await.unwrap();
    let bodies: Arc<Vec<Bytes>> = Arc::new((0..batch).map(|_| Bytes::from_static(&BODY)).collect());
    let start = Instant::now();
    let tasks: Vec<_> = (0..concurrency)
        .map(|_| {
            let (producer, bodies) = (producer.clone(), bodies.clone());
            let rounds = n / batch / concurrency;
            tokio::spawn(async move {
                for _ in 0..rounds {
                    if batch == 1 {
                        producer.publish("client", &BODY).await.unwrap();
                    } else {
                        producer
                            .multi_publish("client", None, &bodies)
                            .await
                            .unwrap();
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    start.elapsed()
}

async fn client_consume(
    server: &TestServer,
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

fn line(case: &str, mode: &str, n: usize, client: Duration, ceiling: Duration) {
    let rate = n as f64 / client.as_secs_f64();
    let ceiling_rate = n as f64 / ceiling.as_secs_f64();
    println!(
        "case={case} {mode} msgs_per_s={rate:.0} ceiling_msgs_per_s={ceiling_rate:.0} ratio={:.2}",
        rate / ceiling_rate
    );
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let server = TestServer::start(Options::default()).await.unwrap();
        let n = 20_000;
        let ceiling = raw_pipeline(&server, pub_cmd("raw"), n).await;
        let client = client_pub(&server, n, 1, 64).await;
        line("pub", "mode=single", n, client, ceiling);

        let n = 200_000;
        let ceiling = raw_pipeline(&server, mpub_cmd("raw-m", 100), n / 100).await;
        let client = client_pub(&server, n, 100, 8).await;
        line("pub", "mode=mpub100", n, client, ceiling);

        for (max_in_flight, n) in [(1u32, 5_000usize), (200, 50_000)] {
            let server = TestServer::start(Options::default()).await.unwrap();
            fill(&server, "raw-sub", n).await;
            fill(&server, "client-sub", n).await;
            let ceiling = raw_consume(&server, "raw-sub", max_in_flight, n).await;
            let client = client_consume(&server, "client-sub", max_in_flight, n).await;
            line(
                "sub",
                &format!("max_in_flight={max_in_flight}"),
                n,
                client,
                ceiling,
            );
        }
    });
}
