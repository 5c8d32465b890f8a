//! The three measured phases. Each owns its streams and closes them before returning, stopped
//! or not, so the channels can be deleted afterwards; each returns `None` when a stop request
//! cut it short.

use std::time::{Duration, Instant};

use futures::stream::{BoxStream, StreamExt};

use crate::error::Result;
use msgstream_facade::msgstream::mq::InitialPosition;
use msgstream_facade::msgstream::msg::{
    Blob, InsertRequest, MsgBase, MsgBody, MsgPack, MsgType, TsMsg,
};
use msgstream_facade::msgstream::stream::MsgStream;
use msgstream_facade::msgstream::Error as StreamError;
use msgstream_facade::Factory;

use crate::progress::Progress;
use crate::signals::Stop;

/// What the produce phase measured.
pub struct Produced {
    pub secs: f64,
    pub bytes: u64,
    /// Latency of each produce call, sorted.
    pub batch_latency: Vec<Duration>,
}

fn row(id: u64, payload: &[u8]) -> TsMsg {
    TsMsg::new(MsgBody::Insert(InsertRequest {
        base: Some(MsgBase::new(MsgType::Insert as i32, id as i64, id + 1)),
        timestamps: [id + 1].into(),
        row_ids: [id as i64].into(),
        row_data: [Blob {
            value: payload.to_vec().into(),
        }]
        .into(),
        num_rows: 1,
        ..Default::default()
    }))
    .with_hash_keys(vec![id as u32])
}

async fn next_msg(stream: &mut MsgStream) -> Result<MsgPack> {
    Ok(stream
        .next_pack()
        .await
        .ok_or(StreamError::Closed("consumer"))??)
}

/// Phase 1: `messages` rows in batches, checking for a stop between batches. With `ticks`,
/// each batch is followed by a timetick on every channel (untimed), for the tt consume phase.
pub async fn produce(
    factory: &Factory,
    channels: &[&str],
    messages: u64,
    batch: u64,
    payload: &[u8],
    ticks: bool,
    stop: &Stop,
) -> Result<Option<Produced>> {
    let mut producer = factory.msg_stream();
    producer.as_producer(channels).await?;
    let mut progress = Progress::new("produce", messages);
    let mut batch_latency = Vec::new();
    let started = Instant::now();
    let mut sent = 0;
    let mut bytes = 0u64;
    while sent < messages && !stop.requested() {
        let n = batch.min(messages - sent);
        let msgs: Vec<TsMsg> = (sent..sent + n).map(|id| row(id, payload)).collect();
        bytes += msgs.iter().map(|m| m.encode().len() as u64).sum::<u64>();
        let t = Instant::now();
        let written = producer
            .produce(&MsgPack {
                msgs,
                ..MsgPack::default()
            })
            .await;
        if let Err(e) = written {
            producer.close().await;
            return Err(e.into());
        }
        batch_latency.push(t.elapsed());
        sent += n;
        if ticks {
            // Rows carry timestamps id + 1, so this tick covers every row sent so far.
            let tick = MsgPack {
                msgs: vec![TsMsg::time_tick(sent)],
                ..MsgPack::default()
            };
            if let Err(e) = producer.broadcast(&tick).await {
                producer.close().await;
                return Err(e.into());
            }
        }
        progress.update(sent);
    }
    let secs = started.elapsed().as_secs_f64();
    progress.finish();
    producer.close().await;
    if sent < messages {
        return Ok(None);
    }
    batch_latency.sort();
    Ok(Some(Produced {
        secs,
        bytes,
        batch_latency,
    }))
}

/// Phase 2: reads every row back with one subscription, through the timetick-aligned stream
/// with `tt`, else the plain one; the seconds it took (from subscribed to the last row).
pub async fn consume(
    factory: &Factory,
    channels: &[&str],
    messages: u64,
    tt: bool,
    stop: &Stop,
) -> Result<Option<f64>> {
    // The consuming loop runs as a task on the runtime, beside the stream's pumps, as the
    // tuning notes advise applications (backends/rocksmq/README.md): from `block_on` it would be one more
    // thread on the cores, woken across threads on every hand-off.
    let stop = stop.clone();
    let task = if tt {
        let mut consumer = factory.tt_msg_stream();
        consumer
            .as_consumer(channels, "bench", InitialPosition::Earliest)
            .await?;
        tokio::spawn(async move {
            let outcome = read_all(consumer.packs(), messages, &stop).await;
            consumer.close().await;
            outcome
        })
    } else {
        let mut consumer = factory.msg_stream();
        consumer
            .as_consumer(channels, "bench", InitialPosition::Earliest)
            .await?;
        tokio::spawn(async move {
            let outcome = read_all(consumer.packs(), messages, &stop).await;
            consumer.close().await;
            outcome
        })
    };
    task.await.unwrap_or_else(|panic| {
        Err(StreamError::backend(
            "msgstream bench",
            format!("the consuming task failed: {panic}"),
        )
        .into())
    })
}

/// Counts the rows of `packs` until `messages` came (the seconds that took) or a stop request
/// (`None`).
async fn read_all(
    mut packs: BoxStream<'_, msgstream_facade::msgstream::Result<MsgPack>>,
    messages: u64,
    stop: &Stop,
) -> Result<Option<f64>> {
    let mut progress = Progress::new("consume", messages);
    let started = Instant::now();
    let mut received = 0;
    let outcome = loop {
        if received >= messages {
            break Ok(Some(started.elapsed().as_secs_f64()));
        }
        let pack = tokio::select! {
            () = stop.wait() => break Ok(None),
            pack = packs.next() => pack,
        };
        match pack {
            Some(Ok(pack)) => received += pack.msgs.len() as u64,
            Some(Err(e)) => break Err(e.into()),
            None => break Err(StreamError::Closed("consumer").into()),
        }
        progress.update(received);
    };
    progress.finish();
    outcome
}

/// Phase 3: produce → consume latency at `rate` messages per second on the first channel, one
/// message at a time; the sorted latencies.
pub async fn latency(
    factory: &Factory,
    channel: &str,
    rate: u64,
    total: u64,
    payload: &[u8],
    stop: &Stop,
) -> Result<Option<Vec<Duration>>> {
    let channel = [channel];
    let mut producer = factory.msg_stream();
    producer.as_producer(&channel).await?;
    let mut consumer = factory.msg_stream();
    if let Err(e) = consumer
        .as_consumer(&channel, "bench-latency", InitialPosition::Latest)
        .await
    {
        producer.close().await;
        return Err(e.into());
    }
    let interval = Duration::from_nanos(1_000_000_000 / rate.max(1));
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut latencies = Vec::with_capacity(usize::try_from(total.min(1 << 16)).unwrap_or(0));
    let mut progress = Progress::new("latency", total);
    let mut round_trip = async |i: u64| -> Result<Duration> {
        ticker.tick().await;
        let t = Instant::now();
        producer
            .produce(&MsgPack {
                msgs: vec![row(i, payload)],
                ..MsgPack::default()
            })
            .await?;
        next_msg(&mut consumer).await?;
        Ok(t.elapsed())
    };
    let mut outcome = Ok(true);
    for i in 0..total {
        let sample = tokio::select! {
            () = stop.wait() => { outcome = Ok(false); break; }
            sample = round_trip(i) => sample,
        };
        match sample {
            Ok(sample) => latencies.push(sample),
            Err(e) => {
                outcome = Err(e);
                break;
            }
        }
        progress.update(i + 1);
    }
    progress.finish();
    producer.close().await;
    consumer.close().await;
    latencies.sort();
    Ok(outcome?.then_some(latencies))
}
