//! `msgstream`: the command-line tool. Run `msgstream --help`.

mod bench;
mod commands;
mod demo;
mod progress;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use msgstream_facade::{BackendKind, Config, Factory, Result};

/// One message-stream API over several brokers: produce, consume (plain or timetick-aligned),
/// positions, topics, groups, benchmarks, and an end-to-end demo.
#[derive(Debug, Parser)]
#[command(name = "msgstream", version, propagate_version = true)]
struct Cli {
    /// Configuration file (TOML). Default: $MSGSTREAM_CONFIG, else ./msgstream.toml if present,
    /// else the embedded rocksmq backend in ./data/rocksmq.
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Backend to use, overriding the configuration: rocksmq | memory.
    #[arg(long, global = true, value_name = "NAME")]
    backend: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// End to end in a few seconds: 4 channels, a tt consumer that stops midway and a new one
    /// resuming from the saved positions; checks nothing was lost or duplicated.
    Demo(demo::DemoArgs),
    /// Write insert messages (and timeticks) to channels.
    Produce(commands::ProduceArgs),
    /// Read channels as packs, plain or timetick-aligned; Ctrl-C stops cleanly.
    Consume(commands::ConsumeArgs),
    /// Show or save stored positions.
    #[command(subcommand)]
    Positions(commands::PositionsCommand),
    /// List the channels the backend holds.
    Topics,
    /// List subscriptions (consumer groups) and their lag.
    Groups(commands::GroupsArgs),
    /// Throughput and latency over the configured backend.
    Bench(bench::BenchArgs),
}

fn config(cli: &Cli) -> Result<Config> {
    let mut config = Config::load(cli.config.as_deref())?;
    if let Some(name) = &cli.backend {
        config.backend = BackendKind::parse(name)?;
    }
    Ok(config)
}

async fn run(cli: Cli) -> Result<ExitCode> {
    let config = config(&cli)?;
    let factory = Factory::new(&config).await?;
    let handles_ctrl_c = matches!(cli.command, Command::Consume(_));
    let command = async {
        match cli.command {
            Command::Demo(args) => demo::run(&factory, args).await,
            Command::Produce(args) => commands::produce(&factory, args).await,
            Command::Consume(args) => commands::consume(&factory, args).await,
            Command::Positions(cmd) => commands::positions(&factory, cmd).await,
            Command::Topics => commands::topics(&factory).await,
            Command::Groups(args) => commands::groups(&factory, args).await,
            Command::Bench(args) => bench::run(&factory, args).await,
        }
    };
    // `consume` handles Ctrl-C itself (it saves positions first). Elsewhere Ctrl-C drops the
    // command between two backend calls: every write and ack already acknowledged is durable,
    // and the client is closed below as on any other exit.
    let interrupted = async {
        if handles_ctrl_c || tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    let result = tokio::select! {
        result = command => result,
        () = interrupted => {
            eprintln!("interrupted");
            Ok(ExitCode::from(130))
        }
    };
    factory.close().await;
    result
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
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
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
