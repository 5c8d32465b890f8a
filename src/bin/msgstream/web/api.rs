//! The admin server's routes: the page and its assets, the JSON API under `/api/`, and
//! `/metrics` in the Prometheus text format.
//!
//! Every route is behind the guard (`guard.rs`): a foreign `Host`, or a write without a JSON
//! body and the page's `Origin`, is refused before any handler runs.
//!
//! Deleting is refused unless the server was started with `--allow-admin-writes`, and even
//! then the request must repeat the name being deleted as `confirm`, so a stray or replayed
//! request cannot delete something else.

use std::sync::{Arc, RwLock};

use axum::extract::{Query, State as Extract};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use msgstream_facade::msgstream::mq::Client;
use serde::Deserialize;
use serde_json::{json, Value};

use super::browse::Browser;
use super::guard::Guard;
use super::state::State;
use super::views;
use crate::commands::admin::{delete_group, delete_topic};
use crate::metrics::{prometheus_text, Telemetry};

/// What every handler shares.
#[derive(Clone)]
pub struct App {
    /// The backend.
    pub client: Arc<dyn Client>,
    /// The message browser.
    pub browser: Browser,
    /// What the watcher saw.
    pub state: Arc<RwLock<State>>,
    /// The process's instruments, for `/metrics`.
    pub telemetry: Telemetry,
    /// `--allow-admin-writes`.
    pub writes: bool,
}

/// The router of the admin server; `guard` decides first which requests it answers.
pub fn router(app: App, guard: Guard) -> Router {
    Router::new()
        .route(
            "/",
            get(|| async { asset("text/html; charset=utf-8", PAGE) }),
        )
        .route(
            "/app.js",
            get(|| async { asset("text/javascript", SCRIPT) }),
        )
        .route("/app.css", get(|| async { asset("text/css", STYLE) }))
        .route("/api/overview", get(overview))
        .route("/api/channels", get(channels))
        .route("/api/timetick", get(timetick))
        .route("/api/messages", get(messages))
        .route("/api/delete", post(delete))
        .route("/metrics", get(metrics))
        .with_state(app)
        .layer(axum::middleware::from_fn_with_state(
            Arc::new(guard),
            super::guard::middleware,
        ))
}

const PAGE: &str = include_str!("assets/index.html");
const SCRIPT: &str = include_str!("assets/app.js");
const STYLE: &str = include_str!("assets/app.css");

fn asset(content_type: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}

fn failure(status: StatusCode, message: String) -> Response {
    (status, Json(json!({ "error": message }))).into_response()
}

async fn overview(Extract(app): Extract<App>) -> Json<Value> {
    let caps = app.client.capabilities();
    Json(json!({
        "backend": app.client.backend_name(),
        "writes_allowed": app.writes,
        "capabilities": {
            "readers": caps.readers,
            "seek": caps.seek,
            "seek_time": caps.seek_time,
            "latest_id": caps.latest_id,
            "delete_subscriptions": caps.delete_subscriptions,
            "delete_topics": caps.delete_topics,
        },
    }))
}

async fn channels(Extract(app): Extract<App>) -> Response {
    match app.state.read() {
        Ok(state) => Json(views::channels(&state, app.client.backend_name())).into_response(),
        Err(_) => failure(StatusCode::INTERNAL_SERVER_ERROR, "state poisoned".into()),
    }
}

/// `?channels=a,b`: the channels of the timetick view (default: every one that ticked).
#[derive(Deserialize)]
struct Chosen {
    channels: Option<String>,
}

async fn timetick(Extract(app): Extract<App>, Query(chosen): Query<Chosen>) -> Response {
    let chosen: Vec<String> = chosen
        .channels
        .unwrap_or_default()
        .split(',')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    let readers = app.client.capabilities().readers;
    match app.state.read() {
        Ok(state) => Json(views::timetick(
            &state,
            &chosen,
            readers,
            app.client.backend_name(),
        ))
        .into_response(),
        Err(_) => failure(StatusCode::INTERNAL_SERVER_ERROR, "state poisoned".into()),
    }
}

/// `/api/messages`: a page of one channel's messages (parameters in `browse`).
async fn messages(
    Extract(app): Extract<App>,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Response {
    let (status, body) = app.browser.answer(app.client.as_ref(), &pairs).await;
    (status, Json(body)).into_response()
}

/// A delete request: a channel, or one subscription of it; `confirm` repeats the name deleted.
#[derive(Deserialize)]
struct Delete {
    channel: String,
    subscription: Option<String>,
    confirm: String,
}

async fn delete(Extract(app): Extract<App>, Json(request): Json<Delete>) -> Response {
    if !app.writes {
        return failure(
            StatusCode::FORBIDDEN,
            "read-only: start msgstream admin with --allow-admin-writes to delete".into(),
        );
    }
    let target = request.subscription.as_deref().unwrap_or(&request.channel);
    if request.confirm != target {
        return failure(
            StatusCode::BAD_REQUEST,
            format!("confirm must repeat {target:?}"),
        );
    }
    let client = app.client.as_ref();
    let done = match &request.subscription {
        Some(sub) => delete_group(client, &request.channel, sub).await,
        None => delete_topic(client, &request.channel).await,
    };
    match done {
        Ok(message) => Json(json!({ "done": message })).into_response(),
        Err(e) => failure(StatusCode::CONFLICT, e.to_string()),
    }
}

async fn metrics(Extract(app): Extract<App>) -> Response {
    match app.telemetry.snapshot() {
        Ok(snapshot) => (
            [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
            prometheus_text(&snapshot),
        )
            .into_response(),
        Err(e) => failure(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}
