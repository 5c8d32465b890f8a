//! Timetick-aligned consumption of three channels: messages are delivered in packs between
//! timeticks, across all channels, in a deterministic order.
//!
//! `cargo run --example timetick`

use msgstream_facade::prelude::*;

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
        let msgs = (0..6).map(|k| {
            row += 1;
            TsMsg::insert(row, round * 100 + k, "").with_hash_keys(vec![k as u32])
        });
        producer.produce(&MsgPack::new(msgs)).await?;
        let tick = TsMsg::timetick(round * 100 + 99);
        producer.broadcast(&MsgPack::new([tick])).await?;
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
