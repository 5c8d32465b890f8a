//! `msgstream admin`: one local web page over the configured backend, with a JSON API under
//! `/api/` and `/metrics`.
//!
//! It listens on loopback unless told otherwise, because the page can show every channel's
//! names and, with `--allow-admin-writes`, delete them: exposing it is a decision to make
//! explicitly. Even on loopback a web page elsewhere can reach it through the browser, so it
//! answers only requests naming it by its own host names, and writes only from the page itself
//! (`guard.rs`); connections are bounded in number and time (`serve.rs`).

mod activity;
mod api;
mod browse;
mod checkpoints;
mod guard;
mod serve;
mod state;
mod views;
mod watch;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use crate::error::{Error, Result};
use clap::Args;
use msgstream_facade::Factory;

use crate::metrics::Telemetry;
use crate::out;
use crate::signals::Stop;

/// Options of `admin`.
#[derive(Debug, Args)]
pub struct AdminArgs {
    /// Address to serve on. The default is loopback only; give another address to expose the
    /// page (it has no authentication).
    #[arg(long, default_value = "127.0.0.1:7777")]
    listen: SocketAddr,
    /// Allow deleting channels and subscriptions from the page (each needs a confirmation).
    /// Only the page itself can write: a request needs `Content-Type: application/json` and
    /// the page's `Origin` (from a script: `-H 'Origin: http://127.0.0.1:7777'`).
    #[arg(long)]
    allow_admin_writes: bool,
    /// How often the backend is looked at, in milliseconds.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(100..=60_000))]
    refresh_ms: u64,
    /// Another host name the page may be opened by (repeatable, or comma-separated), e.g. the
    /// machine's DNS name or a proxy's. Requests naming any other host are refused (403), so a
    /// web page elsewhere cannot reach the server by pointing its own name at this address
    /// (DNS rebinding). Always accepted: the listen address, and `localhost` when listening on
    /// loopback or on every interface (where any IP address is accepted too: a request naming
    /// an address cannot be a rebound name).
    #[arg(long, value_name = "NAME", value_delimiter = ',')]
    allow_host: Vec<String>,
    /// Connections served at once; one more is answered 503 and closed.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    max_connections: u64,
    /// Seconds a client has to send a request's headers in full before the connection is
    /// closed (a client trickling bytes holds nothing for long).
    #[arg(long, value_name = "SECS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    header_timeout: u64,
    /// Seconds a connection may stay open with no request and no byte moving before it is
    /// closed.
    #[arg(long, value_name = "SECS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=3600))]
    idle_timeout: u64,
}

/// Serves until Ctrl-C or SIGTERM.
pub async fn run(
    factory: &Factory,
    args: AdminArgs,
    telemetry: &Telemetry,
    stop: &Stop,
) -> Result<ExitCode> {
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| Error::Usage(format!("cannot listen on {}: {e}", args.listen)))?;
    let address = listener
        .local_addr()
        .map_err(|e| Error::Usage(format!("cannot listen on {}: {e}", args.listen)))?;
    let state = Arc::new(RwLock::new(state::State::default()));
    let checkpoints = Arc::new(checkpoints::Checkpoints::default());
    let mut watcher = watch::Watcher::new(factory.client(), state.clone(), checkpoints.clone());
    watcher.look_once().await;
    let watcher = tokio::spawn(watcher.run(Duration::from_millis(args.refresh_ms)));
    let app = api::App {
        client: factory.client(),
        browser: browse::Browser {
            registry: factory.stream_options().registry.clone(),
            checkpoints,
            budget: browse::PAGE_BUDGET,
            timestamps: factory.timestamps(),
        },
        state,
        telemetry: telemetry.clone(),
        writes: args.allow_admin_writes,
    };
    let guard = guard::Guard::new(address, &args.allow_host);
    let limits = serve::Limits {
        max_connections: usize::try_from(args.max_connections).unwrap_or(usize::MAX),
        header_timeout: Duration::from_secs(args.header_timeout),
        idle_timeout: Duration::from_secs(args.idle_timeout),
    };
    // The address line is the one scripts wait for (with port 0 it is how they learn the port).
    out::line(format_args!(
        "admin page on http://{address}/ over {}{}",
        factory.backend().name(),
        if args.allow_admin_writes {
            " (writes allowed)"
        } else {
            " (read-only)"
        }
    ))?;
    serve::serve(listener, api::router(app, guard), limits, stop).await;
    watcher.abort();
    Ok(ExitCode::SUCCESS)
}
