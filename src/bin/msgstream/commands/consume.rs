//! `msgstream consume`: packs to standard output, committed only once shown.
//!
//! The stream is built with auto-commit off and each pack is committed right after its lines
//! were written and flushed. A reader that goes away (`| head`) therefore never has a pack
//! committed that it did not get, and the command stops before asking the stream for another.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use crate::error::{Error, Result};
use clap::{Args, ValueEnum};
use msgstream_facade::msgstream::mq::InitialPosition;
use msgstream_facade::msgstream::msg::{MsgPack, MsgPosition};
use msgstream_facade::msgstream::stream::MsgStream;
use msgstream_facade::msgstream::tt::TtMsgStream;
use msgstream_facade::{positions as positions_file, Factory};

use crate::metrics::{self, Telemetry};
use crate::signals::Stop;

mod show;

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
    #[arg(long, value_name = "FILE", conflicts_with = "from_time")]
    from_positions: Option<PathBuf>,
    /// Start at a time: the first message stamped at or after it (with --tt: exactly the packs
    /// after the last timetick before it). A timestamp (a number), or with `[stream]
    /// timestamps = "hybrid"` a date such as 2026-12-04T17:00:00Z.
    #[arg(long, value_name = "TS")]
    from_time: Option<String>,
    /// Write the positions to resume from when stopping (left as it was if nothing arrived).
    #[arg(long, value_name = "FILE")]
    save_positions: Option<PathBuf>,
    /// Stop after this many packs.
    #[arg(long)]
    max_packs: Option<u64>,
    /// Stop after this many messages (a tt stream stops after the pack that reaches it).
    #[arg(long, value_name = "N")]
    count: Option<u64>,
    /// `text`: a line per message (under a header per pack with --tt); `json`: one object per
    /// pack with its messages and end positions.
    #[arg(long, value_enum, default_value = "text")]
    format: show::Format,
    /// Print a summary of the stream's metrics (messages and bytes per channel, the tt
    /// watermark and its holder) on stderr at the end.
    #[arg(long)]
    stats: bool,
    /// Stop when no pack arrives for this many seconds.
    #[arg(long, value_name = "SECS")]
    idle_timeout: Option<u64>,
}

enum Either {
    Plain(MsgStream),
    Tt(TtMsgStream),
}

impl Either {
    async fn open(factory: &Factory, args: &ConsumeArgs) -> Result<Either> {
        let refs: Vec<&str> = args.channels.iter().map(String::as_str).collect();
        let initial = match args.from {
            From::Earliest => InitialPosition::Earliest,
            From::Latest => InitialPosition::Latest,
        };
        let from_time = match &args.from_time {
            Some(text) => Some(
                crate::time_arg::parse("--from-time", text, factory.timestamps())
                    .map_err(Error::Usage)?,
            ),
            None => None,
        };
        let options = factory.stream_options().clone().with_auto_commit(false);
        let client = factory.client();
        Ok(if args.tt {
            let mut s = TtMsgStream::new(client, options);
            s.as_consumer(&refs, &args.subscription, initial).await?;
            if let Some(file) = &args.from_positions {
                s.seek(&positions_file::load(file)?).await?;
            }
            if let Some(timestamp) = from_time {
                s.seek_to_time(timestamp).await?;
            }
            Either::Tt(s)
        } else {
            let mut s = MsgStream::new(client, options);
            s.as_consumer(&refs, &args.subscription, initial).await?;
            if let Some(file) = &args.from_positions {
                s.seek(&positions_file::load(file)?).await?;
            }
            if let Some(timestamp) = from_time {
                s.seek_to_time(timestamp).await?;
            }
            Either::Plain(s)
        })
    }

    async fn next_pack(&mut self) -> Option<msgstream_facade::msgstream::Result<MsgPack>> {
        match self {
            Either::Plain(s) => s.next_pack().await,
            Either::Tt(s) => s.next_pack().await,
        }
    }

    async fn commit(&mut self, positions: &[MsgPosition]) -> Result<()> {
        match self {
            Either::Plain(s) => s.commit(positions).await?,
            Either::Tt(s) => s.commit(positions).await?,
        }
        Ok(())
    }

    async fn close(&mut self) {
        match self {
            Either::Plain(s) => s.close().await,
            Either::Tt(s) => s.close().await,
        }
    }
}

/// Why the loop ended.
enum End {
    /// `--max-packs`, `--idle-timeout`, the stream's end, Ctrl-C/SIGTERM, or a closed stdout.
    Clean,
    /// A failure the stream cannot continue past.
    Failed(Error),
}

/// Reads packs until Ctrl-C/SIGTERM, `--max-packs`, `--idle-timeout`, a closed stdout or the
/// stream's end; saves positions and closes. Exit code 1 on a permanent failure, or when the
/// stream ended right after a failure it reported.
pub async fn run(
    factory: &Factory,
    args: ConsumeArgs,
    telemetry: &Telemetry,
    stop: &Stop,
) -> Result<ExitCode> {
    let stream = Either::open(factory, &args).await?;
    eprintln!(
        "consuming {} as {}",
        args.channels.join(","),
        args.subscription
    );
    let result = drain(stream, &args, stop).await;
    if args.stats {
        for line in metrics::summary(&telemetry.snapshot()?) {
            eprintln!("{line}");
        }
    }
    result
}

/// The loop of [`run`] over an opened stream, then saving positions and closing.
async fn drain(mut stream: Either, args: &ConsumeArgs, stop: &Stop) -> Result<ExitCode> {
    let mut resume: BTreeMap<String, MsgPosition> = BTreeMap::new();
    let mut packs = 0u64;
    let mut messages = 0u64;
    let idle = args.idle_timeout.map(Duration::from_secs);
    let mut last_error: Option<Error> = None;
    let mut undelivered = Undelivered::default();
    let end = loop {
        if args.max_packs.is_some_and(|max| packs >= max)
            || args.count.is_some_and(|max| messages >= max)
        {
            break End::Clean;
        }
        let next = async {
            match idle {
                Some(limit) => tokio::time::timeout(limit, stream.next_pack()).await.ok(),
                None => Some(stream.next_pack().await),
            }
        };
        let item = tokio::select! {
            () = stop.wait() => break End::Clean,
            item = next => item,
        };
        let pack = match item {
            None => break End::Clean,
            Some(None) => break last_error.take().map_or(End::Clean, End::Failed),
            Some(Some(Err(e))) if e.is_permanent() => break End::Failed(e.into()),
            Some(Some(Err(e))) => {
                eprintln!("warning: {e}");
                undelivered.note(&e);
                last_error = Some(e.into());
                continue;
            }
            Some(Some(Ok(pack))) => pack,
        };
        last_error = None;
        match show::pack(&pack, packs + 1, args.tt, args.format) {
            Ok(()) => {}
            Err(Error::OutputClosed) => break End::Clean,
            Err(e) => break End::Failed(e),
        }
        packs += 1;
        messages += pack.msgs.len() as u64;
        for position in &pack.end_positions {
            resume.insert(position.channel_name.to_string(), position.clone());
        }
        if let Err(e) = stream.commit(&pack.end_positions).await {
            break End::Failed(e);
        }
    };
    let saved = save(args.save_positions.as_deref(), resume);
    stream.close().await;
    eprintln!("consumed {packs} pack(s)");
    saved?;
    match end {
        End::Clean => undelivered.into_result().map(|()| ExitCode::SUCCESS),
        End::Failed(e) => Err(e),
    }
}

/// The messages the stream reported instead of delivering (a late message a tt pack can no
/// longer hold, a body that does not decode): each is a warning when it happens, and the run
/// then fails at its end, so a script never mistakes a run that lost messages for a clean one.
#[derive(Default)]
struct Undelivered {
    count: u64,
    first: Option<String>,
}

impl Undelivered {
    fn note(&mut self, e: &msgstream_facade::msgstream::Error) {
        use msgstream_facade::msgstream::Error as Core;
        if matches!(e, Core::LateMessage { .. } | Core::Decode(_)) {
            self.count += 1;
            self.first.get_or_insert_with(|| e.to_string());
        }
    }

    fn into_result(self) -> Result<()> {
        match self.first {
            None => Ok(()),
            Some(first) => Err(Error::Undelivered {
                count: self.count,
                first,
            }),
        }
    }
}

/// Saves the resume positions, unless there are none: a run that delivered nothing keeps the
/// file of the run before, which is still where to resume.
fn save(file: Option<&std::path::Path>, resume: BTreeMap<String, MsgPosition>) -> Result<()> {
    let Some(file) = file else {
        return Ok(());
    };
    if resume.is_empty() {
        eprintln!("nothing consumed: {} left as it was", file.display());
        return Ok(());
    }
    let positions: Vec<MsgPosition> = resume.into_values().collect();
    positions_file::save(file, &positions)?;
    eprintln!(
        "saved {} position(s) to {}",
        positions.len(),
        file.display()
    );
    Ok(())
}

#[cfg(test)]
mod failing;

#[cfg(test)]
mod tests {
    use super::failing::FailingClient;
    use super::*;
    use msgstream_facade::msgstream::mem::MemoryClient;
    use msgstream_facade::msgstream::mq::{Client, ProducerMessage};
    use msgstream_facade::msgstream::msg::TsMsg;
    use std::sync::Arc;

    #[tokio::test]
    async fn a_failure_the_stream_cannot_pass_is_an_error_exit() {
        let client: Arc<dyn Client> = Arc::new(FailingClient(MemoryClient::new()));
        let producer = client.create_producer("c").await.expect("producer");
        for ts in [5, 6] {
            producer
                .send(ProducerMessage::new(TsMsg::time_tick(ts).encode()))
                .await
                .expect("send");
        }
        let options =
            msgstream_facade::msgstream::stream::StreamOptions::default().with_auto_commit(false);
        let mut stream = MsgStream::new(client.clone(), options);
        stream
            .as_consumer(&["c"], "g", InitialPosition::Earliest)
            .await
            .expect("subscribe");
        let dir = tempfile::tempdir().expect("tempdir");
        let saved = dir.path().join("p.json");
        let args = ConsumeArgs {
            channels: vec!["c".into()],
            subscription: "g".into(),
            tt: false,
            from: From::Earliest,
            from_positions: None,
            from_time: None,
            save_positions: Some(saved.clone()),
            max_packs: None,
            count: None,
            format: show::Format::Text,
            stats: false,
            idle_timeout: None,
        };
        let stop = Stop::listen().expect("signals");
        let error = drain(Either::Plain(stream), &args, &stop)
            .await
            .expect_err("a permanent failure is an error exit");
        assert!(error.to_string().contains("injected"), "{error}");
        let positions = positions_file::load(&saved).expect("what was shown is saved");
        assert_eq!(positions.len(), 1);
        assert_eq!(positions[0].timestamp, 5);
    }
}
