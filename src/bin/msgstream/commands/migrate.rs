//! `msgstream migrate`: the facade's [`Migration`] between two configured backends, with a
//! lag line while it runs and the throughput at the end.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use msgstream_facade::migrate::{
    same_store, MigrateOptions, Migration, MigrationEvent, MigrationProgress,
};
use msgstream_facade::{positions as positions_file, Config, Factory};

use crate::error::{Error, Result};
use crate::out;
use crate::signals::Stop;

/// A lag line goes to a non-terminal stderr (a log) once per this many progress reports.
const LOG_EVERY: u32 = 10;

/// `msgstream migrate` arguments.
#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// Configuration of the source backend (TOML, read as written: `MSGSTREAM_*` variables
    /// would apply to both files, so they apply to neither).
    #[arg(long, value_name = "FILE")]
    from: PathBuf,
    /// Configuration of the target backend.
    #[arg(long, value_name = "FILE")]
    to: PathBuf,
    /// Channels to copy (comma-separated); they keep their names.
    #[arg(long, value_delimiter = ',', required = true)]
    channels: Vec<String>,
    /// A positions file saved on the source (by `consume --save-positions`), to translate.
    #[arg(long, value_name = "FILE", requires = "positions_out")]
    positions: Option<PathBuf>,
    /// Where to write the translated positions, once every channel caught up.
    #[arg(long, value_name = "FILE", requires = "positions")]
    positions_out: Option<PathBuf>,
    /// Keep copying new messages until Ctrl-C or SIGTERM, showing the lag.
    #[arg(long)]
    follow: bool,
    /// Messages per write at most (also bounds what is held in memory per channel).
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=65536))]
    batch: u32,
    /// Milliseconds a target channel's end must stay put before a run resumes after it: a
    /// write of a killed run may still land at a broker for a moment.
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    settle_ms: u64,
}

fn load(path: &Path) -> Result<Config> {
    let text = std::fs::read_to_string(path).map_err(|source| msgstream_facade::Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(Config::parse(
        &text,
        &path.display().to_string(),
        std::iter::empty(),
    )?)
}

/// Runs the migration; exit 130 when a stop request ended it before it caught up.
pub async fn run(args: &MigrateArgs, stop: &Stop) -> Result<ExitCode> {
    let (from, to) = (load(&args.from)?, load(&args.to)?);
    if let Some(store) = same_store(&from, &to) {
        return Err(msgstream_facade::Error::SameStore(store).into());
    }
    let positions = match &args.positions {
        Some(path) => positions_file::load(path)?,
        None => Vec::new(),
    };
    let source = Factory::new(&from).await?;
    let target = match Factory::new(&to).await {
        Ok(target) => target,
        Err(e) => {
            source.close().await;
            return Err(e.into());
        }
    };
    let result = migrate(&source, &target, args, positions, stop).await;
    source.close().await;
    target.close().await;
    result
}

async fn migrate(
    source: &Factory,
    target: &Factory,
    args: &MigrateArgs,
    positions: Vec<msgstream_facade::msgstream::msg::MsgPosition>,
    stop: &Stop,
) -> Result<ExitCode> {
    let mut options = MigrateOptions::new(args.channels.iter().cloned()).with_positions(positions);
    options = options
        .with_batch(args.batch as usize)
        .with_settle(Duration::from_millis(args.settle_ms));
    if args.follow {
        options = options.following();
    }
    let migration = Migration::prepare(source.client(), target.client(), options).await?;
    out::line(format_args!(
        "migrate: {} -> {}{}",
        source.backend().name(),
        target.backend().name(),
        if args.follow {
            ", following until Ctrl-C"
        } else {
            ""
        }
    ))?;
    let mut lag = LagLine::new();
    let mut failed: Option<Error> = None;
    let abort = tokio::sync::Notify::new();
    let stopped = async {
        tokio::select! {
            () = stop.wait() => {}
            () = abort.notified() => {}
        }
    };
    let report = migration
        .run(stopped, |event| {
            let outcome = match event {
                MigrationEvent::Progress(progress) => {
                    lag.show(progress);
                    Ok(())
                }
                MigrationEvent::CaughtUp(progress) => lag.suspend(|| {
                    out::line(format_args!(
                        "caught up: {} messages copied",
                        progress.copied()
                    ))
                }),
                MigrationEvent::Translated(positions) => match &args.positions_out {
                    Some(path) => positions_file::save(path, positions)
                        .map_err(Error::from)
                        .and_then(|()| {
                            lag.suspend(|| {
                                out::line(format_args!(
                                    "positions: {} translated, saved to {}",
                                    positions.len(),
                                    path.display()
                                ))
                            })
                        }),
                    None => Ok(()),
                },
                _ => Ok(()),
            };
            if let Err(e) = outcome {
                if failed.is_none() {
                    failed = Some(e);
                    abort.notify_one();
                }
            }
        })
        .await;
    lag.finish();
    let report = report?;
    if let Some(e) = failed {
        return Err(e);
    }
    let progress = &report.progress;
    let seconds = progress.elapsed.as_secs_f64().max(1e-9);
    let megabytes = progress.bytes() as f64 / 1e6;
    for channel in &progress.channels {
        out::line(format_args!(
            "  {}: {} copied{}",
            channel.channel,
            channel.copied,
            if channel.resumed {
                " (resumed after an earlier run)"
            } else {
                ""
            }
        ))?;
    }
    out::line(format_args!(
        "migrated {} messages ({megabytes:.2} MB) in {seconds:.2} s: {:.0} msgs/s, {:.2} MB/s",
        progress.copied(),
        progress.copied() as f64 / seconds,
        megabytes / seconds
    ))?;
    if report.interrupted {
        eprintln!(
            "interrupted before every channel caught up: run the same command again to continue"
        );
        return Ok(ExitCode::from(130));
    }
    Ok(ExitCode::SUCCESS)
}

/// The lag line: redrawn in place on a terminal, a plain line now and then in a log.
struct LagLine {
    bar: Option<ProgressBar>,
    shown: u32,
}

impl LagLine {
    fn new() -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr_with_hz(5)).with_style(
                ProgressStyle::with_template("{spinner} {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            )
        });
        LagLine { bar, shown: 0 }
    }

    fn show(&mut self, progress: &MigrationProgress) {
        let line = describe(progress);
        self.shown += 1;
        match &self.bar {
            Some(bar) => {
                bar.set_message(line);
                bar.tick();
            }
            None if self.shown.is_multiple_of(LOG_EVERY) => eprintln!("{line}"),
            None => {}
        }
    }

    fn suspend<T>(&self, f: impl FnOnce() -> T) -> T {
        match &self.bar {
            Some(bar) => bar.suspend(f),
            None => f(),
        }
    }

    fn finish(self) {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
    }
}

/// `copying: 1234 messages (560 msgs/s), lag ≤ 0.3 s (behind: b 0.3 s)`.
fn describe(progress: &MigrationProgress) -> String {
    let rate = progress.copied() as f64 / progress.elapsed.as_secs_f64().max(1e-9);
    let lag = match progress.lag() {
        Some(lag) => format!("lag ≤ {:.1} s", lag.as_secs_f64()),
        None => "catching up".to_string(),
    };
    let behind: Vec<String> = progress
        .channels
        .iter()
        .filter(|c| c.lag != Some(Duration::ZERO))
        .map(|c| match c.lag {
            Some(lag) => format!("{} {:.1} s", c.channel, lag.as_secs_f64()),
            None => format!("{} (first pass)", c.channel),
        })
        .collect();
    let behind = if behind.is_empty() {
        String::new()
    } else {
        format!(" (behind: {})", behind.join(", "))
    };
    format!(
        "copying: {} messages ({rate:.0} msgs/s), {lag}{behind}",
        progress.copied()
    )
}
