//! `produce`, `consume`, `positions`, `topics` and `groups`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};
use msgstream_facade::msgstream::mq::InitialPosition;
use msgstream_facade::msgstream::msg::{
    Blob, InsertRequest, MsgBase, MsgBody, MsgPack, MsgPosition, MsgType, TsMsg,
};
use msgstream_facade::msgstream::stream::Produce;
use msgstream_facade::{positions as positions_file, Factory, Result};

/// Options of `produce`.
#[derive(Debug, Args)]
pub struct ProduceArgs {
    /// Channels to write to (comma-separated); rows are spread over them by key.
    #[arg(long, value_delimiter = ',', required = true)]
    channels: Vec<String>,
    /// Number of insert messages.
    #[arg(long, default_value_t = 1000)]
    count: u64,
    /// Row payload size in bytes.
    #[arg(long, default_value_t = 128)]
    payload_size: usize,
    /// Broadcast a timetick after every this many messages (0: none).
    #[arg(long, default_value_t = 100)]
    tick_every: u64,
    /// Timestamp of the first message (later ones count up from it).
    #[arg(long, default_value_t = 1)]
    start_ts: u64,
}

fn insert_row(id: i64, ts: u64, payload: &[u8]) -> TsMsg {
    TsMsg::new(MsgBody::Insert(InsertRequest {
        base: Some(MsgBase::new(MsgType::Insert as i32, id, ts)),
        timestamps: vec![ts],
        row_ids: vec![id],
        row_data: vec![Blob {
            value: payload.to_vec(),
        }],
        num_rows: 1,
        ..Default::default()
    }))
    .with_hash_keys(vec![id as u32])
}

fn pack(msgs: Vec<TsMsg>) -> MsgPack {
    MsgPack {
        msgs,
        ..MsgPack::default()
    }
}

/// Writes `count` inserts, a tick after every `tick_every`, and a final tick.
pub async fn produce(factory: &Factory, args: ProduceArgs) -> Result<ExitCode> {
    let mut stream = factory.msg_stream();
    let refs: Vec<&str> = args.channels.iter().map(String::as_str).collect();
    stream.as_producer(&refs).await?;
    let payload = vec![b'x'; args.payload_size];
    let mut ts = args.start_ts;
    let mut batch = Vec::new();
    let mut written = 0u64;
    let mut ticks = 0u64;
    for id in 0..args.count {
        batch.push(insert_row(id as i64, ts, &payload));
        ts += 1;
        let tick_now = args.tick_every > 0 && (id + 1) % args.tick_every == 0;
        if tick_now || batch.len() >= 256 || id + 1 == args.count {
            written += batch.len() as u64;
            stream.produce(&pack(std::mem::take(&mut batch))).await?;
        }
        if tick_now {
            stream.broadcast(&pack(vec![TsMsg::time_tick(ts)])).await?;
            ts += 1;
            ticks += 1;
        }
    }
    stream.broadcast(&pack(vec![TsMsg::time_tick(ts)])).await?;
    println!(
        "produced {written} inserts and {} timeticks to {} channel(s); last timestamp {ts}",
        ticks + 1,
        refs.len()
    );
    stream.close().await;
    Ok(ExitCode::SUCCESS)
}

/// Where a consumer starts.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum From {
    Earliest,
    Latest,
}

/// Options of `consume`.
#[derive(Debug, Args)]
pub struct ConsumeArgs {
    /// Channels to read (comma-separated).
    #[arg(long, value_delimiter = ',', required = true)]
    channels: Vec<String>,
    /// Subscription (consumer group) name.
    #[arg(long, default_value = "msgstream-cli")]
    subscription: String,
    /// Align on timeticks (packs between ticks) instead of one message per pack.
    #[arg(long)]
    tt: bool,
    /// Where a new subscription starts.
    #[arg(long, value_enum, default_value = "earliest")]
    from: From,
    /// Resume from a positions file (as written by --save-positions).
    #[arg(long, value_name = "FILE")]
    from_positions: Option<PathBuf>,
    /// Write the positions to resume from when stopping.
    #[arg(long, value_name = "FILE")]
    save_positions: Option<PathBuf>,
    /// Stop after this many packs.
    #[arg(long)]
    max_packs: Option<u64>,
    /// Stop when no pack arrives for this many seconds.
    #[arg(long, value_name = "SECS")]
    idle_timeout: Option<u64>,
}

enum Either {
    Plain(msgstream_facade::msgstream::stream::MsgStream),
    Tt(msgstream_facade::msgstream::tt::TtMsgStream),
}

impl Either {
    async fn next_pack(&mut self) -> Option<msgstream_facade::msgstream::Result<MsgPack>> {
        match self {
            Either::Plain(s) => s.next_pack().await,
            Either::Tt(s) => s.next_pack().await,
        }
    }

    async fn close(&mut self) {
        match self {
            Either::Plain(s) => s.close().await,
            Either::Tt(s) => s.close().await,
        }
    }
}

fn short_id(id: &[u8]) -> String {
    match <[u8; 8]>::try_from(id) {
        Ok(bytes) => u64::from_be_bytes(bytes).to_string(),
        Err(_) => id.iter().map(|b| format!("{b:02x}")).collect(),
    }
}

/// Reads packs until Ctrl-C, `--max-packs` or `--idle-timeout`; then saves positions and closes
/// (acked positions stay committed).
pub async fn consume(factory: &Factory, args: ConsumeArgs) -> Result<ExitCode> {
    let refs: Vec<&str> = args.channels.iter().map(String::as_str).collect();
    let initial = match args.from {
        From::Earliest => InitialPosition::Earliest,
        From::Latest => InitialPosition::Latest,
    };
    let mut stream = if args.tt {
        let mut s = factory.tt_msg_stream();
        s.as_consumer(&refs, &args.subscription, initial).await?;
        if let Some(file) = &args.from_positions {
            s.seek(&positions_file::load(file)?).await?;
        }
        Either::Tt(s)
    } else {
        let mut s = factory.msg_stream();
        s.as_consumer(&refs, &args.subscription, initial).await?;
        if let Some(file) = &args.from_positions {
            s.seek(&positions_file::load(file)?, false).await?;
        }
        Either::Plain(s)
    };
    let mut resume: BTreeMap<String, MsgPosition> = BTreeMap::new();
    let mut packs = 0u64;
    let idle = args.idle_timeout.map(Duration::from_secs);
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    let outcome: Result<()> = loop {
        if args.max_packs.is_some_and(|max| packs >= max) {
            break Ok(());
        }
        let next = async {
            match idle {
                Some(limit) => tokio::time::timeout(limit, stream.next_pack()).await.ok(),
                None => Some(stream.next_pack().await),
            }
        };
        let item = tokio::select! {
            _ = &mut ctrl_c => break Ok(()),
            item = next => item,
        };
        let pack = match item {
            None | Some(None) => break Ok(()),
            Some(Some(Err(e))) => {
                eprintln!("warning: {e}");
                continue;
            }
            Some(Some(Ok(pack))) => pack,
        };
        packs += 1;
        if args.tt {
            println!(
                "pack {packs}: ts {} -> {}, {} msgs",
                pack.begin_ts,
                pack.end_ts,
                pack.msgs.len()
            );
        } else if let Some(msg) = pack.msgs.first() {
            let position = msg.position.clone().unwrap_or_default();
            println!(
                "{} id={} ts={} type={}",
                position.channel_name,
                short_id(&position.msg_id),
                msg.end_ts(),
                msg.msg_type()
            );
        }
        for position in pack.end_positions {
            resume.insert(position.channel_name.clone(), position);
        }
    };
    if let Some(file) = &args.save_positions {
        let positions: Vec<MsgPosition> = resume.into_values().collect();
        positions_file::save(file, &positions)?;
        eprintln!(
            "saved {} position(s) to {}",
            positions.len(),
            file.display()
        );
    }
    stream.close().await;
    eprintln!("consumed {packs} pack(s)");
    outcome.map(|()| ExitCode::SUCCESS)
}

/// `positions` subcommands.
#[derive(Debug, Subcommand)]
pub enum PositionsCommand {
    /// Print a positions file.
    Show {
        /// The file.
        file: PathBuf,
    },
    /// Save the position of the newest message of each channel (for a plain consumer resuming
    /// after it with `consume --from-positions`).
    Save {
        /// Channels (comma-separated).
        #[arg(long, value_delimiter = ',', required = true)]
        channels: Vec<String>,
        /// Where to write.
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
    },
}

/// Shows or saves positions.
pub async fn positions(factory: &Factory, command: PositionsCommand) -> Result<ExitCode> {
    match command {
        PositionsCommand::Show { file } => {
            println!(
                "{:<40} {:>20} {:<20} {:>12}",
                "channel", "msg_id", "group", "timestamp"
            );
            for p in positions_file::load(&file)? {
                println!(
                    "{:<40} {:>20} {:<20} {:>12}",
                    p.channel_name,
                    short_id(&p.msg_id),
                    p.msg_group,
                    p.timestamp
                );
            }
        }
        PositionsCommand::Save { channels, out } => {
            let mut stream = factory.msg_stream();
            let refs: Vec<&str> = channels.iter().map(String::as_str).collect();
            stream
                .as_consumer(&refs, "msgstream-cli-positions", InitialPosition::Latest)
                .await?;
            let mut saved = Vec::new();
            for channel in &channels {
                match stream.latest_message_id(channel).await? {
                    Some(id) => saved.push(MsgPosition {
                        channel_name: channel.clone(),
                        msg_id: id.as_bytes().to_vec(),
                        msg_group: "msgstream-cli-positions".into(),
                        timestamp: 0,
                        ..MsgPosition::default()
                    }),
                    None => eprintln!("{channel}: empty, no position"),
                }
            }
            stream.close().await;
            positions_file::save(&out, &saved)?;
            println!("saved {} position(s) to {}", saved.len(), out.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Lists topics.
pub async fn topics(factory: &Factory) -> Result<ExitCode> {
    for topic in factory.client().list_topics().await? {
        println!("{topic}");
    }
    Ok(ExitCode::SUCCESS)
}

/// Options of `groups`.
#[derive(Debug, Args)]
pub struct GroupsArgs {
    /// Only this channel (default: every channel).
    #[arg(long)]
    channel: Option<String>,
}

/// Lists subscriptions per channel with their lag.
pub async fn groups(factory: &Factory, args: GroupsArgs) -> Result<ExitCode> {
    let client = factory.client();
    let topics = match args.channel {
        Some(channel) => vec![channel],
        None => client.list_topics().await?,
    };
    println!("{:<40} {:<30} {:>10}", "channel", "subscription", "lag");
    for topic in topics {
        for sub in client.list_subscriptions(&topic).await? {
            let lag = sub.lag.map_or_else(|| "?".to_string(), |l| l.to_string());
            println!("{topic:<40} {:<30} {lag:>10}", sub.name);
        }
    }
    Ok(ExitCode::SUCCESS)
}
