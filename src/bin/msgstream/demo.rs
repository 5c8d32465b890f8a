//! `msgstream demo`: the whole story in a few seconds, checked.
//!
//! A producer writes inserts, deletes and broadcast timeticks to 4 channels while a tt consumer
//! prints each pack. Midway the consumer saves its end positions to a file and stops; a new
//! consumer loads them, seeks, and reads to the end. The demo then compares what was received
//! with what was produced and prints one line that scripts read:
//! `demo: packs=… messages=… resumed_from_pack=… lost=0 duplicated=0`.

use std::collections::{BTreeMap, HashMap};
use std::process::ExitCode;

use clap::Args;
use msgstream_facade::msgstream::mq::InitialPosition;
use msgstream_facade::msgstream::msg::{
    DeleteRequest, InsertRequest, MsgBase, MsgBody, MsgPack, MsgType, TsMsg,
};
use msgstream_facade::msgstream::stream::Produce;
use msgstream_facade::msgstream::tt::TtMsgStream;
use msgstream_facade::msgstream::Error as StreamError;
use msgstream_facade::{positions, Factory, Result};

/// Options of the demo.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Number of channels.
    #[arg(long, default_value_t = 4)]
    channels: usize,
    /// Timetick rounds (one pack each).
    #[arg(long, default_value_t = 24)]
    rounds: u64,
    /// Print only the summary line.
    #[arg(long)]
    quiet: bool,
}

const TICK_SPACING: u64 = 100;

/// Messages of one round: per channel two inserts and one delete, with unique ids.
fn round_messages(round: u64, channels: usize, next_id: &mut i64) -> Vec<TsMsg> {
    let mut msgs = Vec::new();
    for c in 0..channels as u32 {
        for k in 0..3u64 {
            let ts = round * TICK_SPACING + 1 + u64::from(c) * 3 + k;
            *next_id += 1;
            let id = *next_id;
            let base = Some(MsgBase::new(0, id, ts));
            let body = if k < 2 {
                MsgBody::Insert(InsertRequest {
                    base: base.map(|b| MsgBase {
                        msg_type: MsgType::Insert as i32,
                        ..b
                    }),
                    collection_name: "demo".into(),
                    timestamps: vec![ts],
                    row_ids: vec![id],
                    num_rows: 1,
                    ..Default::default()
                })
            } else {
                MsgBody::Delete(DeleteRequest {
                    base: base.map(|b| MsgBase {
                        msg_type: MsgType::Delete as i32,
                        ..b
                    }),
                    collection_name: "demo".into(),
                    timestamps: vec![ts],
                    int64_primary_keys: vec![id - 1],
                    num_rows: 1,
                    ..Default::default()
                })
            };
            msgs.push(TsMsg::new(body).with_hash_keys(vec![c]));
        }
    }
    msgs
}

fn describe(index: usize, pack: &MsgPack) -> String {
    let mut per_channel: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for position in &pack.end_positions {
        per_channel
            .entry(position.channel_name.as_str())
            .or_default();
    }
    for msg in &pack.msgs {
        let channel = msg
            .position
            .as_ref()
            .map_or("?", |p| p.channel_name.as_str());
        let entry = per_channel.entry(channel).or_default();
        match msg.body {
            MsgBody::Delete(_) => entry.1 += 1,
            _ => entry.0 += 1,
        }
    }
    let counts: Vec<String> = per_channel
        .iter()
        .map(|(c, (i, d))| format!("{}:{i}i+{d}d", c.rsplit('-').next().unwrap_or(c)))
        .collect();
    format!(
        "pack {index:>3}  ts {:>5} → {:<5}  {:>3} msgs  [{}]",
        pack.begin_ts,
        pack.end_ts,
        pack.msgs.len(),
        counts.join(" ")
    )
}

async fn consumer(factory: &Factory, channels: &[String]) -> Result<TtMsgStream> {
    let mut stream = factory.tt_msg_stream();
    let refs: Vec<&str> = channels.iter().map(String::as_str).collect();
    stream
        .as_consumer(&refs, "demo", InitialPosition::Earliest)
        .await?;
    Ok(stream)
}

async fn next(stream: &mut TtMsgStream) -> Result<MsgPack> {
    Ok(stream
        .next_pack()
        .await
        .ok_or(StreamError::Closed("tt stream"))??)
}

/// Runs the demo; exit code 1 when anything was lost or duplicated.
pub async fn run(factory: &Factory, args: DemoArgs) -> Result<ExitCode> {
    let channels_n = args.channels.max(1);
    let rounds = args.rounds.max(2);
    let run_id = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    let channels: Vec<String> = (0..channels_n)
        .map(|c| format!("demo-{run_id}-ch{c}"))
        .collect();
    let say = |line: String| {
        if !args.quiet {
            println!("{line}");
        }
    };
    say(format!(
        "demo on the {} backend: {channels_n} channels, {rounds} timetick rounds",
        factory.backend().name()
    ));

    // The producer runs concurrently with the consumers.
    let mut producer = factory.tt_msg_stream();
    let refs: Vec<&str> = channels.iter().map(String::as_str).collect();
    producer.as_producer(&refs).await?;
    let produced_task = tokio::spawn(async move {
        let mut next_id = 0;
        let mut produced = Vec::new();
        for round in 0..rounds {
            let msgs = round_messages(round, channels_n, &mut next_id);
            produced.extend(msgs.iter().map(TsMsg::id));
            producer
                .produce(&MsgPack {
                    msgs,
                    ..MsgPack::default()
                })
                .await?;
            let tick = TsMsg::time_tick((round + 1) * TICK_SPACING);
            producer
                .broadcast(&MsgPack {
                    msgs: vec![tick],
                    ..MsgPack::default()
                })
                .await?;
        }
        producer.close().await;
        Ok::<_, StreamError>(produced)
    });

    let last_end = rounds * TICK_SPACING;
    let stop_after = (rounds / 2) as usize;
    let mut received: HashMap<i64, usize> = HashMap::new();
    let mut packs = 0usize;

    let mut first = consumer(factory, &channels).await?;
    let saved = std::env::temp_dir().join(format!("msgstream-demo-{run_id}.positions.json"));
    while packs < stop_after {
        let pack = next(&mut first).await?;
        packs += 1;
        say(describe(packs, &pack));
        for msg in &pack.msgs {
            *received.entry(msg.id()).or_default() += 1;
        }
        if packs == stop_after {
            positions::save(&saved, &pack.end_positions)?;
        }
    }
    first.close().await;
    say(format!(
        "-- stopped after pack {stop_after}; end positions saved to {}",
        saved.display()
    ));

    let mut second = consumer(factory, &channels).await?;
    second.seek(&positions::load(&saved)?).await?;
    say("-- a new consumer resumed from the saved positions".into());
    loop {
        let pack = next(&mut second).await?;
        packs += 1;
        say(describe(packs, &pack));
        for msg in &pack.msgs {
            *received.entry(msg.id()).or_default() += 1;
        }
        if pack.end_ts >= last_end {
            break;
        }
    }
    second.close().await;
    let _ = std::fs::remove_file(&saved);

    let produced = produced_task.await.map_err(|e| StreamError::Backend {
        backend: "demo",
        message: e.to_string(),
        transient: false,
    })??;
    let lost = produced
        .iter()
        .filter(|id| !received.contains_key(id))
        .count();
    let duplicated: usize = received.values().map(|n| n.saturating_sub(1)).sum();
    let messages: usize = received.values().sum();
    println!(
        "demo: packs={packs} messages={messages} resumed_from_pack={stop_after} lost={lost} duplicated={duplicated}"
    );
    Ok(
        if lost == 0 && duplicated == 0 && messages == produced.len() {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        },
    )
}
