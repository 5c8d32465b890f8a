//! Restart from stored positions: consume two packs, save the end positions to a file, close
//! everything (as if the process stopped), reopen the same database, seek, and get exactly the
//! packs that follow.
//!
//! `cargo run --example seek_after_restart`

use msgstream_facade::positions;
use msgstream_facade::prelude::*;

fn rows(pack: &MsgPack) -> Vec<i64> {
    pack.msgs.iter().map(TsMsg::id).collect()
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("msgstream-restart-{}", std::process::id()));
    let saved = dir.join("positions.json");
    let mut config = Config::default();
    config.rocksmq.path = dir.join("db");
    let channels = ["restart-0", "restart-1"];
    std::fs::create_dir_all(&dir)?;

    // First process: produce four rounds, consume two packs, save positions, stop.
    {
        let factory = Factory::new(&config).await?;
        let mut producer = factory.tt_msg_stream();
        producer.as_producer(&channels).await?;
        for round in 1..=4u64 {
            let msgs = (0..4).map(|k| TsMsg::insert((round * 10 + k) as i64, round * 100 + k, ""));
            producer.produce(&MsgPack::new(msgs)).await?;
            let tick = TsMsg::timetick(round * 100 + 50);
            producer.broadcast(&MsgPack::new([tick])).await?;
        }
        let mut consumer = factory.tt_msg_stream();
        consumer
            .as_consumer(&channels, "restart", InitialPosition::Earliest)
            .await?;
        for _ in 0..2 {
            let pack = consumer.next_pack().await.ok_or("closed")??;
            println!(
                "before restart: {} -> {} rows {:?}",
                pack.begin_ts,
                pack.end_ts,
                rows(&pack)
            );
            positions::save(&saved, &pack.end_positions)?;
        }
        consumer.close().await;
        factory.close().await;
    }

    // Second process: reopen the same database and resume.
    let factory = Factory::new(&config).await?;
    let mut consumer = factory.tt_msg_stream();
    consumer
        .as_consumer(&channels, "restart", InitialPosition::Earliest)
        .await?;
    consumer.seek(&positions::load(&saved)?).await?;
    for _ in 0..2 {
        let pack = consumer.next_pack().await.ok_or("closed")??;
        println!(
            "after restart:  {} -> {} rows {:?}",
            pack.begin_ts,
            pack.end_ts,
            rows(&pack)
        );
    }
    consumer.close().await;
    factory.close().await;
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
