//! `produce --input`: the user's own messages, from a file or standard input.
//!
//! Lines are read and parsed on a thread of their own (reading a terminal or a pipe blocks, and
//! must not hold up the runtime or a Ctrl-C), and written in batches of what has already
//! arrived, so `tail -f log | msgstream produce --input -` writes each line promptly.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::error::{Error, Result};
use msgstream_facade::msgstream::msg::TsMsg;
use msgstream_facade::msgstream::stream::MsgStream;
use tokio::sync::mpsc;

use super::input::{Format, Record, Records};
use super::placer::Placer;
use super::{pack, BATCH};
use crate::commands::kinds::Kind;
use crate::out;
use crate::signals::Stop;

/// The records of an input as its reading thread sends them.
pub type Lines = mpsc::Receiver<Result<Record, (u64, String)>>;

/// What `--input` reads and how.
pub struct Input {
    /// A file, or `-` for standard input.
    pub path: PathBuf,
    /// Raw lines or JSON lines.
    pub format: Format,
    /// The kind of raw lines and of JSON lines without `kind`.
    pub kind: Kind,
}

impl Input {
    /// The name errors use: the path, or `stdin`.
    fn name(&self) -> String {
        if self.path == Path::new("-") {
            "stdin".to_string()
        } else {
            self.path.display().to_string()
        }
    }

    /// Opens the input and starts the reading thread; records (or the first bad line) arrive
    /// on the receiver.
    pub fn spawn(&self) -> Result<Lines> {
        let reader: Box<dyn BufRead + Send> = if self.path == Path::new("-") {
            Box::new(std::io::BufReader::new(std::io::stdin()))
        } else {
            let file =
                std::fs::File::open(&self.path).map_err(|source| msgstream_facade::Error::Io {
                    path: self.path.clone(),
                    source,
                })?;
            Box::new(std::io::BufReader::new(file))
        };
        let (tx, rx) = mpsc::channel(BATCH);
        let records = Records::new(reader, self.format, self.kind);
        std::thread::spawn(move || {
            for record in records {
                let bad = record.is_err();
                if tx.blocking_send(record).is_err() || bad {
                    break;
                }
            }
        });
        Ok(rx)
    }
}

/// Writes every input record, a timetick after every `tick_every` messages and a final one,
/// also when a line is bad or a stop is requested: what was written before stays readable by a
/// tt consumer. A bad line is then the error (exit 1); a stop exits 130.
pub async fn run(
    stream: &mut MsgStream,
    channels: &[String],
    (input, mut rx): (&Input, Lines),
    tick_every: u64,
    start_ts: u64,
    stop: &Stop,
) -> Result<ExitCode> {
    let mut placer = Placer::new(channels.to_vec(), start_ts);
    let bad = |(line, message)| Error::Input {
        source_name: input.name(),
        line,
        message,
    };
    let mut ticks = 0u64;
    let mut since_tick = 0u64;
    let mut failure = None;
    let mut interrupted = false;
    'read: loop {
        let first = tokio::select! {
            () = stop.wait() => { interrupted = true; break; }
            record = rx.recv() => record,
        };
        let Some(mut next) = first else { break };
        let mut batch: Vec<TsMsg> = Vec::new();
        loop {
            match next.and_then(|record| {
                let line = record.line;
                placer.place(record).map_err(|message| (line, message))
            }) {
                Ok(msg) => batch.push(msg),
                Err(e) => failure = Some(bad(e)),
            }
            since_tick += 1;
            let tick_now = tick_every > 0 && since_tick == tick_every;
            if (tick_now || failure.is_some() || batch.len() >= BATCH) && !batch.is_empty() {
                stream.produce(&pack(std::mem::take(&mut batch))).await?;
            }
            if failure.is_some() {
                break 'read;
            }
            if tick_now {
                let ts = placer.tick().map_err(Error::Usage)?;
                stream.broadcast(&pack(vec![TsMsg::time_tick(ts)])).await?;
                ticks += 1;
                since_tick = 0;
            }
            match rx.try_recv() {
                Ok(record) => next = record,
                Err(_) => break,
            }
        }
        if !batch.is_empty() {
            stream.produce(&pack(batch)).await?;
        }
    }
    let last = placer.tick().map_err(Error::Usage)?;
    stream
        .broadcast(&pack(vec![TsMsg::time_tick(last)]))
        .await?;
    let summary = format!(
        "produced {} messages and {} timeticks to {} channel(s); last timestamp {last}",
        placer.placed(),
        ticks + 1,
        channels.len()
    );
    if let Some(error) = failure {
        eprintln!("{summary} before the bad line");
        return Err(error);
    }
    if interrupted {
        eprintln!("interrupted: {summary}");
        return Ok(ExitCode::from(130));
    }
    out::line(summary)?;
    Ok(ExitCode::SUCCESS)
}
