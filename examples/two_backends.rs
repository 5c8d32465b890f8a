//! The same application code over two backends, chosen only by configuration.
//!
//! `cargo run --example two_backends` runs it on the in-memory backend and on rocksmq;
//! `MSGSTREAM_BACKEND=memory cargo run --example two_backends -- --env` shows the environment
//! override picking one.

use msgstream_facade::prelude::*;

/// Application code: knows nothing of the backend.
async fn count_packs(factory: &Factory) -> Result<usize, Box<dyn std::error::Error>> {
    let channels = ["app-a", "app-b"];
    let mut producer = factory.tt_msg_stream();
    producer.as_producer(&channels).await?;
    for t in [10, 20, 30] {
        producer
            .broadcast(&MsgPack::new([TsMsg::timetick(t)]))
            .await?;
    }
    let mut consumer = factory.tt_msg_stream();
    consumer
        .as_consumer(&channels, "app", InitialPosition::Earliest)
        .await?;
    let mut packs = 0;
    while let Some(pack) = consumer.next_pack().await {
        packs += 1;
        if pack?.end_ts >= 30 {
            break;
        }
    }
    consumer.close().await;
    Ok(packs)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("msgstream-two-{}", std::process::id()));
    let from_env = std::env::args().any(|a| a == "--env");
    let configs = if from_env {
        vec![Config::load(None)?]
    } else {
        let memory: Config = toml::from_str("backend = \"memory\"")?;
        let rocksmq: Config = toml::from_str(&format!(
            "backend = \"rocksmq\"\n[rocksmq]\npath = {:?}\n",
            dir.display().to_string()
        ))?;
        vec![memory, rocksmq]
    };
    for config in configs {
        let factory = Factory::new(&config).await?;
        let packs = count_packs(&factory).await?;
        println!("{:>8}: {packs} packs", factory.backend().name());
        factory.close().await;
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
