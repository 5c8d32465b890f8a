//! Quickstart: produce a few inserts to two channels and consume them as a plain stream.
//!
//! `cargo run --example quickstart` (embedded rocksmq in a temporary directory).

use msgstream_facade::prelude::*;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("msgstream-quickstart-{}", std::process::id()));
    let mut config = Config::default(); // backend = rocksmq
    config.rocksmq.path = dir.clone();
    let factory = Factory::new(&config).await?;

    let channels = ["quickstart-0", "quickstart-1"];
    let mut producer = factory.msg_stream();
    producer.as_producer(&channels).await?;
    // Each one-row insert is routed to channel `row % 2`.
    let pack = MsgPack::new((0..6).map(|i| TsMsg::insert(i, 100 + i as u64, "")));
    let ids = producer.produce_mark(&pack).await?;
    for (channel, ids) in &ids {
        println!("produced {} message(s) to {channel}", ids.len());
    }

    let mut consumer = factory.msg_stream();
    consumer
        .as_consumer(&channels, "quickstart", InitialPosition::Earliest)
        .await?;
    for _ in 0..6 {
        let pack = consumer.next_pack().await.ok_or("stream closed")??;
        let msg = &pack.msgs[0];
        let position = msg.position.as_ref().ok_or("no position")?;
        println!(
            "consumed row {} at ts {} from {}",
            msg.id(),
            msg.end_ts(),
            position.channel_name
        );
    }
    consumer.close().await;
    producer.close().await;
    factory.close().await;
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
