//! `msgstream`: the command-line tool. Run `msgstream --help`.

mod bench;
mod commands;
mod demo;
mod error;
mod metrics;
mod out;
mod progress;
mod signals;
mod time_arg;
mod web;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::error::{Error, Result};
use clap::{Parser, Subcommand, ValueEnum};
use msgstream_facade::{BackendKind, Config, Factory};

use commands::{admin, consume, migrate, positions, produce};
use signals::Stop;

/// One message-stream API over several brokers: produce, consume (plain or timetick-aligned),
/// positions, topics, groups, benchmarks, and an end-to-end demo.
#[derive(Debug, Parser)]
#[command(name = "msgstream", version, propagate_version = true)]
struct Cli {
    /// Configuration file (TOML). Default: $MSGSTREAM_CONFIG, else ./msgstream.toml if present,
    /// else the embedded rocksmq backend in ./data/rocksmq.
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Backend to use, overriding the configuration.
    #[arg(long, global = true, value_name = "NAME", value_enum)]
    backend: Option<Backend>,
    #[command(subcommand)]
    command: Command,
}

/// `--backend` values: every backend the facade knows, compiled in or not (one that is not says
/// so when opened).
#[derive(Debug, Clone, Copy, ValueEnum)]
enum Backend {
    /// The embedded RocksDB queue.
    Rocksmq,
    /// A RocketMQ cluster (`[rocketmq]` in the config).
    Rocketmq,
    /// NSQ-protocol servers (`[nsq]` in the config).
    Nsq,
    /// In-process, gone when the command ends.
    Memory,
}

impl From<Backend> for BackendKind {
    fn from(backend: Backend) -> Self {
        match backend {
            Backend::Rocksmq => BackendKind::Rocksmq,
            Backend::Rocketmq => BackendKind::Rocketmq,
            Backend::Nsq => BackendKind::Nsq,
            Backend::Memory => BackendKind::Memory,
        }
    }
}

#[derive(Debug, Subcommand)]
enum Command {
    /// End to end in a few seconds: 4 channels, a tt consumer that stops midway and a new one
    /// resuming from the saved positions; checks nothing was lost or duplicated.
    Demo(demo::DemoArgs),
    /// Write insert messages (and timeticks) to channels; Ctrl-C or SIGTERM stops after the
    /// current batch.
    Produce(produce::ProduceArgs),
    /// Read channels as packs, plain or timetick-aligned; Ctrl-C or SIGTERM stops cleanly.
    Consume(consume::ConsumeArgs),
    /// Show or save stored positions.
    #[command(subcommand)]
    Positions(positions::PositionsCommand),
    /// List the channels the backend holds, or delete one.
    Topics(admin::TopicsArgs),
    /// List subscriptions (consumer groups) and their lag, or delete one.
    Groups(admin::GroupsArgs),
    /// Throughput and latency over the configured backend; deletes its channels at the end.
    Bench(bench::BenchArgs),
    /// A local web page (and JSON API, and /metrics) over the backend: channels, subscriptions
    /// with lag, rates, timetick alignment. Read-only unless --allow-admin-writes.
    Admin(web::AdminArgs),
    /// Copy channels from one backend to another (messages and timeticks, in order), and
    /// translate saved positions; run again after any failure to continue, `--follow` to keep
    /// copying until producers switched over.
    Migrate(migrate::MigrateArgs),
}

fn config(cli: &Cli) -> Result<Config> {
    let mut config = Config::load(cli.config.as_deref())?;
    if let Some(backend) = cli.backend {
        config.backend = backend.into();
    }
    Ok(config)
}

async fn run(cli: Cli, stop: Stop) -> Result<ExitCode> {
    // Reading a file needs no backend, and opening one can fail while another process holds it
    // (rocksmq locks its database): a running consumer's positions stay readable.
    if let Command::Positions(positions::PositionsCommand::Show { file }) = &cli.command {
        return positions::show(file);
    }
    // Two backends, each from its own file: the global config and backend do not apply.
    if let Command::Migrate(args) = &cli.command {
        return migrate::run(args, &stop).await;
    }
    let config = config(&cli)?;
    // Before the factory: the core creates its instruments from the provider global then.
    let telemetry = metrics::Telemetry::install();
    let factory = Factory::new(&config).await?;
    let result = match cli.command {
        Command::Demo(args) => demo::run(&factory, args, &stop).await,
        Command::Produce(args) => produce::run(&factory, args, &stop).await,
        Command::Consume(args) => consume::run(&factory, args, &telemetry, &stop).await,
        Command::Bench(args) => bench::run(&factory, args, &telemetry, &stop).await,
        Command::Admin(args) => web::run(&factory, args, &telemetry, &stop).await,
        Command::Positions(command) => until_stopped(&stop, admin_command(&factory, command)).await,
        Command::Topics(args) => until_stopped(&stop, admin::topics(&factory, args)).await,
        Command::Groups(args) => until_stopped(&stop, admin::groups(&factory, args)).await,
        Command::Migrate(args) => migrate::run(&args, &stop).await,
    };
    factory.close().await;
    result
}

async fn admin_command(
    factory: &Factory,
    command: positions::PositionsCommand,
) -> Result<ExitCode> {
    match command {
        positions::PositionsCommand::Show { file } => positions::show(&file),
        positions::PositionsCommand::Save { channels, out } => {
            positions::save(factory, &channels, &out).await
        }
    }
}

/// Short commands are dropped on a stop request, between two backend calls: what the backend
/// acknowledged stays, and the client is closed as on any other exit.
async fn until_stopped(
    stop: &Stop,
    command: impl std::future::Future<Output = Result<ExitCode>>,
) -> Result<ExitCode> {
    tokio::select! {
        result = command => result,
        () = stop.wait() => {
            eprintln!("interrupted");
            Ok(ExitCode::from(130))
        }
    }
}

fn main() -> ExitCode {
    // Colours only for a terminal: escape codes in a log file or a pipe are noise to grep.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        let stop =
            Stop::listen().map_err(|e| Error::Usage(format!("cannot handle signals: {e}")))?;
        run(cli, stop).await
    });
    match result {
        Ok(code) => code,
        // The reader of our output went away (`| head`): stop quietly, as command-line tools do.
        Err(Error::OutputClosed) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
