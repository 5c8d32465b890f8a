//! Timetick-aligned consumption of three channels: messages are delivered in packs between
//! timeticks, across all channels, in a deterministic order.
//!
//! `cargo run --example timetick`

use msgstream_facade::msgstream::mq::InitialPosition;
use msgstream_facade::msgstream::msg::{InsertRequest, MsgBase, MsgBody, MsgPack, MsgType, TsMsg};
use msgstream_facade::{Config, Factory};

fn insert(row: i64, ts: u64, key: u32) -> TsMsg {
    TsMsg::new(MsgBody::Insert(InsertRequest {
        base: Some(MsgBase::new(MsgType::Insert as i32, row, ts)),
        timestamps: [ts].into(),
        row_ids: [row].into(),
        num_rows: 1,
        ..Default::default()
    }))
    .with_hash_keys(vec![key])
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("msgstream-timetick-{}", std::process::id()));
    let mut config = Config::default();
    config.rocksmq.path = dir.clone();
    let factory = Factory::new(&config).await?;
    let channels = ["tt-0", "tt-1", "tt-2"];

    let mut producer = factory.tt_msg_stream();
    producer.as_producer(&channels).await?;
    let mut row = 0;
    for round in 1..=3u64 {
        // Six rows spread over the channels, then a timetick on every channel.
        let msgs = (0..6)
            .map(|k| {
                row += 1;
                insert(row, round * 100 + k, k as u32)
            })
            .collect();
        producer
            .produce(&MsgPack {
                msgs,
                ..MsgPack::default()
            })
            .await?;
        let tick = TsMsg::time_tick(round * 100 + 99);
        producer
            .broadcast(&MsgPack {
                msgs: vec![tick],
                ..MsgPack::default()
            })
            .await?;
    }

    let mut consumer = factory.tt_msg_stream();
    consumer
        .as_consumer(&channels, "timetick", InitialPosition::Earliest)
        .await?;
    for _ in 0..3 {
        let pack = consumer.next_pack().await.ok_or("stream closed")??;
        let rows: Vec<i64> = pack.msgs.iter().map(TsMsg::id).collect();
        println!("pack {} -> {}: rows {rows:?}", pack.begin_ts, pack.end_ts);
        for p in &pack.end_positions {
            let id = p.msg_id.clone();
            println!(
                "    resume {} at {id:?} (ts {})",
                p.channel_name, p.timestamp
            );
        }
    }
    if let Some(holder) = consumer.watermark_holder() {
        println!("watermark held by {} (lag {})", holder.name, holder.lag);
    }
    consumer.close().await;
    factory.close().await;
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
