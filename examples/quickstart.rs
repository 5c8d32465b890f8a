//! Quickstart: produce a few inserts to two channels and consume them as a plain stream.
//!
//! `cargo run --example quickstart` (embedded rocksmq in a temporary directory).

use msgstream_facade::msgstream::mq::InitialPosition;
use msgstream_facade::msgstream::msg::{InsertRequest, MsgBase, MsgBody, MsgPack, MsgType, TsMsg};
use msgstream_facade::{Config, Factory};

fn insert(row: i64, ts: u64) -> TsMsg {
    TsMsg::new(MsgBody::Insert(InsertRequest {
        base: Some(MsgBase::new(MsgType::Insert as i32, row, ts)),
        timestamps: [ts].into(),
        row_ids: [row].into(),
        num_rows: 1,
        ..Default::default()
    }))
    .with_hash_keys(vec![row as u32]) // routes the row to channel `row % 2`
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("msgstream-quickstart-{}", std::process::id()));
    let mut config = Config::default(); // backend = rocksmq
    config.rocksmq.path = dir.clone();
    let factory = Factory::new(&config).await?;

    let channels = ["quickstart-0", "quickstart-1"];
    let mut producer = factory.msg_stream();
    producer.as_producer(&channels).await?;
    let pack = MsgPack {
        msgs: (0..6).map(|i| insert(i, 100 + i as u64)).collect(),
        ..MsgPack::default()
    };
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
