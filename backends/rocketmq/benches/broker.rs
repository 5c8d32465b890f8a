//! Throughput and latency of the client against a real broker (started like the tests do, or
//! `MSGSTREAM_ROCKETMQ_NAMESRV`). Prints one `case=… key=value …` line per case.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use msgstream_rocketmq::testserver as support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use msgstream_rocketmq::namespace::Namespace;
use msgstream_rocketmq::{
    Admin, ConsumeFrom, ConsumeResult, ConsumerOptions, LitePullConsumer, OutgoingMessage,
    Producer, QueueSelector, Selector,
};

const MESSAGES: usize = 4000;
const BATCH: usize = 64;

fn unique(prefix: &str) -> String {
    msgstream::testkit::unique(prefix).replace('.', "_")
}

fn percentile(sorted: &[Duration], p: f64) -> u128 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_micros()
}

async fn produce(admin: &Admin, payload: usize, senders: usize) {
    let topic = unique("bench");
    admin.create_topic(&topic, 4).await.expect("topic");
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
            let (producer, topic, body) = (producer.clone(), topic.clone(), body.clone());
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
    latencies.sort();
    println!(
        "case=produce payload={payload} senders={senders} msgs_per_s={:.0} p50_us={} p99_us={}",
        latencies.len() as f64 / elapsed.as_secs_f64(),
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99)
    );
}

async fn produce_batch(admin: &Admin, payload: usize) -> String {
    let topic = unique("bench");
    admin.create_topic(&topic, 1).await.expect("topic");
    let producer = Producer::new(admin.clone(), "bench", Namespace::default(), 2);
    let batch: Vec<_> = (0..BATCH)
        .map(|_| OutgoingMessage::new(&topic, vec![b'x'; payload]))
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
    latencies.sort();
    println!(
        "case=produce_batch payload={payload} batch={BATCH} msgs_per_s={:.0} p50_us={} p99_us={}",
        (latencies.len() * BATCH) as f64 / elapsed.as_secs_f64(),
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99)
    );
    topic
}

async fn consume(admin: &Admin, topic: &str, payload: usize) {
    let options = ConsumerOptions {
        consume_from: ConsumeFrom::First,
        ..ConsumerOptions::new(unique("bench-group"))
    };
    let consumer = LitePullConsumer::new(admin, Namespace::default(), options).expect("consumer");
    consumer.subscribe(topic, Selector::All).expect("subscribe");
    let start = Instant::now();
    consumer.start().await.expect("start");
    let mut received = 0;
    while received < MESSAGES / BATCH * BATCH {
        let request = consumer
            .poll(Duration::from_secs(10))
            .await
            .expect("poll")
            .expect("messages within 10 s");
        received += request.messages.len();
        consumer
            .ack(&request, ConsumeResult::Success)
            .await
            .expect("ack");
    }
    println!(
        "case=consume payload={payload} msgs_per_s={:.0}",
        received as f64 / start.elapsed().as_secs_f64()
    );
    consumer.shutdown().await.expect("shutdown");
}

fn main() {
    let cluster = support::shared();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let admin = support::admin_for(&cluster.namesrv);
        for payload in [128, 1024] {
            for senders in [1, 4] {
                produce(&admin, payload, senders).await;
            }
        }
        let topic = produce_batch(&admin, 128).await;
        consume(&admin, &topic, 128).await;
    });
}
