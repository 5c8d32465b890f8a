//! `msgstream admin`: one local web page over the configured backend, with a JSON API under
//! `/api/` and `/metrics`.
//!
//! It listens on loopback unless told otherwise, because the page can show every channel's
//! names and, with `--allow-admin-writes`, delete them: exposing it is a decision to make
//! explicitly.

mod api;
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
    #[arg(long)]
    allow_admin_writes: bool,
    /// How often the backend is looked at, in milliseconds.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(100..=60_000))]
    refresh_ms: u64,
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
    let mut watcher = watch::Watcher::new(factory.client(), state.clone());
    watcher.look_once().await;
    let watcher = tokio::spawn(watcher.run(Duration::from_millis(args.refresh_ms)));
    let app = api::App {
        client: factory.client(),
        state,
        telemetry: telemetry.clone(),
        writes: args.allow_admin_writes,
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
    let stop = stop.clone();
    let served = axum::serve(listener, api::router(app))
        .with_graceful_shutdown(async move { stop.wait().await })
        .await;
    watcher.abort();
    served.map_err(|e| Error::Usage(format!("admin server failed: {e}")))?;
    Ok(ExitCode::SUCCESS)
}
