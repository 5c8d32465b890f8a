//! `msgstream produce`: the user's messages (`--input`) or synthetic inserts, with timeticks,
//! stoppable between batches.

mod from_input;
mod input;
mod placer;

use std::path::PathBuf;
use std::process::ExitCode;

use crate::error::{Error, Result};
use clap::Args;
use msgstream_facade::msgstream::msg::{
    Blob, InsertRequest, MsgBase, MsgBody, MsgPack, MsgType, TsMsg,
};
use msgstream_facade::Factory;

use crate::commands::kinds::Kind;
use crate::out;
use crate::signals::Stop;
use input::Format;

/// The largest row payload `produce` and `bench` accept: 64 MiB. A payload is allocated up
/// front, so without a bound a typo aborts the process instead of failing.
pub const MAX_PAYLOAD: u64 = 64 << 20;

/// Messages per produce call when no timetick cuts the batch earlier.
const BATCH: usize = 256;

/// Options of `produce`.
#[derive(Debug, Args)]
pub struct ProduceArgs {
    /// Channels to write to (comma-separated); rows are spread over them by key.
    #[arg(long, value_delimiter = ',', required = true)]
    channels: Vec<String>,
    /// Read the messages from FILE (`-`: standard input), one per line, instead of writing
    /// synthetic inserts. A line longer than 64 MiB (the largest payload) is refused, naming
    /// it. Nothing is written, not even a channel, until the first line has been read and
    /// found good.
    #[arg(long, value_name = "FILE")]
    input: Option<PathBuf>,
    /// How --input lines are read: `raw` (each line is a payload) or `json` (each line an
    /// object: payload or payload_base64, and optionally channel or key, timestamp, kind,
    /// properties).
    #[arg(long, value_enum, default_value = "raw", requires = "input")]
    format: Format,
    /// Kind of the --input messages that do not say (every raw line).
    #[arg(long, value_enum, default_value = "insert", requires = "input")]
    kind: Kind,
    /// Number of synthetic insert messages.
    #[arg(long, default_value_t = 1000, conflicts_with = "input")]
    count: u64,
    /// Synthetic row payload size in bytes (at most 64 MiB).
    #[arg(long, default_value_t = 128, conflicts_with = "input", value_parser = clap::value_parser!(u64).range(0..=MAX_PAYLOAD))]
    payload_size: u64,
    /// Broadcast a timetick after every this many messages (0: none).
    #[arg(long, default_value_t = 100)]
    tick_every: u64,
    /// Timestamp of the first message (later ones count up from it; --input lines may give
    /// their own). At least 1: a timetick-aligned consumer's first pack starts after 0. Every
    /// message's timestamp must be from 1 to 2^64-2, leaving room for the timetick after it;
    /// an --input line outside that is refused, naming its line.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    start_ts: u64,
}

impl ProduceArgs {
    /// The timestamp of the final timetick: one per insert and per tick after `start_ts`, and
    /// the final tick. Refused when it does not fit in a u64, since a wrapped timestamp would go
    /// back to 0 and break every tt consumer's order.
    fn last_ts(&self) -> Result<u64> {
        let ticks = self.count.checked_div(self.tick_every).unwrap_or(0);
        self.count
            .checked_add(ticks)
            .and_then(|n| self.start_ts.checked_add(n))
            .ok_or_else(|| {
                Error::Usage(format!(
                    "--start-ts {} with --count {} and --tick-every {} passes the largest \
                     timestamp ({}): lower --start-ts or --count",
                    self.start_ts,
                    self.count,
                    self.tick_every,
                    u64::MAX
                ))
            })
    }
}

fn insert_row(id: i64, ts: u64, payload: &[u8]) -> TsMsg {
    TsMsg::new(MsgBody::Insert(InsertRequest {
        base: Some(MsgBase::new(MsgType::Insert as i32, id, ts)),
        timestamps: [ts].into(),
        row_ids: [id].into(),
        row_data: [Blob {
            value: payload.to_vec().into(),
        }]
        .into(),
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

/// Writes the `--input` messages, or `count` synthetic inserts, with their timeticks.
pub async fn run(factory: &Factory, args: ProduceArgs, stop: &Stop) -> Result<ExitCode> {
    let mut stream = factory.msg_stream();
    let refs: Vec<&str> = args.channels.iter().map(String::as_str).collect();
    let Some(path) = args.input.clone() else {
        args.last_ts()?;
        stream.as_producer(&refs).await?;
        return synthetic(stream, args, stop).await;
    };
    let input = from_input::Input {
        path,
        format: args.format,
        kind: args.kind,
        read_ahead: from_input::READ_AHEAD_BYTES,
    };
    // The input is opened first: a mistyped file name creates no channel.
    let records = input.spawn()?;
    let result = from_input::run(
        &mut stream,
        &args.channels,
        (&input, records),
        args.tick_every,
        args.start_ts,
        stop,
    )
    .await;
    stream.close().await;
    result
}

/// Writes `count` inserts, a tick after every `tick_every`, and a final tick. A stop request
/// ends it after the batch being written, still with the final tick, so a tt consumer gets
/// every insert that was written; the exit code is then 130.
async fn synthetic(
    mut stream: msgstream_facade::msgstream::stream::MsgStream,
    args: ProduceArgs,
    stop: &Stop,
) -> Result<ExitCode> {
    let refs = &args.channels;
    let payload = vec![b'x'; usize::try_from(args.payload_size).unwrap_or(usize::MAX)];
    eprintln!(
        "producing {} inserts to {} channel(s)",
        args.count,
        refs.len()
    );
    let mut ts = args.start_ts;
    let mut batch = Vec::new();
    let mut written = 0u64;
    let mut ticks = 0u64;
    let mut interrupted = false;
    for id in 0..args.count {
        batch.push(insert_row(id as i64, ts, &payload));
        ts += 1;
        let tick_now = args.tick_every > 0 && (id + 1) % args.tick_every == 0;
        if tick_now || batch.len() >= BATCH || id + 1 == args.count {
            written += batch.len() as u64;
            stream.produce(&pack(std::mem::take(&mut batch))).await?;
        }
        if tick_now {
            stream.broadcast(&pack(vec![TsMsg::time_tick(ts)])).await?;
            ts += 1;
            ticks += 1;
        }
        if batch.is_empty() && stop.requested() {
            interrupted = true;
            break;
        }
    }
    stream.broadcast(&pack(vec![TsMsg::time_tick(ts)])).await?;
    stream.close().await;
    let summary = format!(
        "produced {written} inserts and {} timeticks to {} channel(s); last timestamp {ts}",
        ticks + 1,
        refs.len()
    );
    if interrupted {
        eprintln!("interrupted: {summary}");
        return Ok(ExitCode::from(130));
    }
    out::line(summary)?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(count: u64, tick_every: u64, start_ts: u64) -> ProduceArgs {
        ProduceArgs {
            channels: vec!["a".into()],
            input: None,
            format: Format::Raw,
            kind: Kind::Insert,
            count,
            payload_size: 0,
            tick_every,
            start_ts,
        }
    }

    #[test]
    fn timestamps_that_would_wrap_are_refused() {
        assert_eq!(args(40, 10, 1).last_ts().expect("fits"), 45);
        assert_eq!(args(0, 0, u64::MAX).last_ts().expect("just fits"), u64::MAX);
        let message = args(1, 0, u64::MAX)
            .last_ts()
            .expect_err("wraps")
            .to_string();
        assert!(message.contains("--start-ts"), "{message}");
        assert!(args(u64::MAX, 1, 1).last_ts().is_err());
    }
}
