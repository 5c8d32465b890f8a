//! `produce --input`: the user's own messages, from a file or standard input.
//!
//! Lines are read and parsed on a thread of their own (reading a terminal or a pipe blocks, and
//! must not hold up the runtime or a Ctrl-C), and written in batches of what has already
//! arrived, so `tail -f log | msgstream produce --input -` writes each line promptly. The
//! thread reads ahead of the writer by at most [`READ_AHEAD_BYTES`] of payload (and one line).

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use crate::error::{Error, Result};
use msgstream_facade::msgstream::msg::TsMsg;
use msgstream_facade::msgstream::stream::MsgStream;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

use super::input::{Format, Record, Records};
use super::placer::Placer;
use super::{pack, BATCH, MAX_PAYLOAD};
use crate::commands::kinds::Kind;
use crate::out;
use crate::signals::Stop;

/// Payload bytes the reading thread may hold ahead of the writer: with lines of up to 64 MiB,
/// a bound in records alone would let a slow backend pile up gigabytes.
pub const READ_AHEAD_BYTES: u32 = 256 << 20;

/// A record with its share of the read-ahead budget, given back once it is written.
pub struct Read {
    record: Record,
    held: OwnedSemaphorePermit,
}

/// The records of an input as its reading thread sends them.
pub type Lines = mpsc::Receiver<Result<Read, (u64, String)>>;

/// What `--input` reads and how.
pub struct Input {
    /// A file, or `-` for standard input.
    pub path: PathBuf,
    /// Raw lines or JSON lines.
    pub format: Format,
    /// The kind of raw lines and of JSON lines without `kind`.
    pub kind: Kind,
    /// Payload bytes read ahead of the writer at most ([`READ_AHEAD_BYTES`]).
    pub read_ahead: u32,
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
            let io = |source| msgstream_facade::Error::Io {
                path: self.path.clone(),
                source,
            };
            let file = std::fs::File::open(&self.path).map_err(io)?;
            // A directory opens, and fails only at the first read: say so before anything.
            if file.metadata().map_err(io)?.is_dir() {
                return Err(Error::from(io(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "is a directory, not a file of messages",
                ))));
            }
            Box::new(std::io::BufReader::new(file))
        };
        let (tx, rx) = mpsc::channel(BATCH);
        let records = Records::new(reader, self.format, self.kind, MAX_PAYLOAD);
        let read_ahead = self.read_ahead.max(1);
        let budget = Arc::new(Semaphore::new(read_ahead as usize));
        let runtime = tokio::runtime::Handle::current();
        std::thread::spawn(move || {
            for record in records {
                let read = match record {
                    Ok(record) => {
                        let bytes = u32::try_from(record.payload.len())
                            .unwrap_or(u32::MAX)
                            .clamp(1, read_ahead);
                        let owed = budget.clone().acquire_many_owned(bytes);
                        let Ok(held) = runtime.block_on(owed) else {
                            break;
                        };
                        Ok(Read { record, held })
                    }
                    Err(bad) => Err(bad),
                };
                let bad = read.is_err();
                if tx.blocking_send(read).is_err() || bad {
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
///
/// The channels are created only once the first record is read and placed: an input that
/// cannot be read (a directory) or whose first line is bad leaves the backend untouched, with
/// no channel and no timetick.
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
    let first = tokio::select! {
        () = stop.wait() => {
            eprintln!("interrupted before the first line: nothing written");
            return Ok(ExitCode::from(130));
        }
        record = rx.recv() => record,
    };
    let first = first
        .map(|read| place(&mut placer, read))
        .transpose()
        .map_err(bad)?;
    let refs: Vec<&str> = channels.iter().map(String::as_str).collect();
    stream.as_producer(&refs).await?;
    let mut ticks = 0u64;
    let mut since_tick = 0u64;
    let mut failure = None;
    let mut interrupted = false;
    let mut next = first.map(Ok);
    'read: loop {
        let Some(mut placed) = next.take() else {
            let record = tokio::select! {
                () = stop.wait() => { interrupted = true; break; }
                record = rx.recv() => record,
            };
            match record {
                Some(read) => next = Some(place(&mut placer, read)),
                None => break,
            }
            continue;
        };
        let mut batch: Vec<TsMsg> = Vec::new();
        // The read-ahead budget of the batch, given back once it is written.
        let mut held = Vec::new();
        loop {
            match placed {
                Ok((msg, budget)) => {
                    batch.push(msg);
                    held.push(budget);
                }
                Err(e) => failure = Some(bad(e)),
            }
            since_tick += 1;
            let tick_now = tick_every > 0 && since_tick == tick_every;
            if (tick_now || failure.is_some() || batch.len() >= BATCH) && !batch.is_empty() {
                stream.produce(&pack(std::mem::take(&mut batch))).await?;
                held.clear();
            }
            if failure.is_some() {
                break 'read;
            }
            if tick_now {
                let ts = placer.tick();
                stream.broadcast(&pack(vec![TsMsg::time_tick(ts)])).await?;
                ticks += 1;
                since_tick = 0;
            }
            match rx.try_recv() {
                Ok(read) => placed = place(&mut placer, read),
                Err(_) => break,
            }
        }
        if !batch.is_empty() {
            stream.produce(&pack(batch)).await?;
        }
    }
    let last = placer.tick();
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

/// The message of a record as read with its read-ahead budget, or `(line, what is wrong)`.
fn place(
    placer: &mut Placer,
    read: Result<Read, (u64, String)>,
) -> Result<(TsMsg, OwnedSemaphorePermit), (u64, String)> {
    read.and_then(|Read { record, held }| {
        let line = record.line;
        let msg = placer.place(record).map_err(|message| (line, message))?;
        Ok((msg, held))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_reading_thread_holds_at_most_the_read_ahead_budget() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("in.txt");
        let line = "x".repeat(100);
        std::fs::write(&path, format!("{line}\n{line}\n{line}\n")).expect("write");
        let input = Input {
            path,
            format: Format::Raw,
            kind: Kind::Insert,
            read_ahead: 250,
        };
        let mut rx = input.spawn().expect("spawn");
        let first = rx.recv().await.expect("first").expect("ok");
        let second = rx.recv().await.expect("second").expect("ok");
        let third = tokio::time::timeout(std::time::Duration::from_millis(300), rx.recv()).await;
        assert!(third.is_err(), "a third line would pass the budget");
        drop(first);
        let third = rx.recv().await.expect("third").expect("ok");
        assert_eq!(third.record.line, 3);
        drop((second, third));
        assert!(rx.recv().await.is_none(), "the end");
    }
}
