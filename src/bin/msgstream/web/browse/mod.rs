//! The message browser: `GET /api/messages`, one page of one channel's messages, each shown as
//! `consume` shows it. Read-only: it reads through readers (non-durable cursors), so it takes
//! no subscription and moves none.
//!
//! Parameters (each at most once; any other is refused):
//!
//! | parameter | meaning |
//! |---|---|
//! | `channel` | the channel (required) |
//! | `from` | start at this message id, inclusive, as the page and `consume` print ids |
//! | `from_time` | start at a timestamp (see [`query::Start::Time`]) |
//! | `cursor` | the `next_cursor` of the page before: continue just past it, same order |
//! | `order` | `oldest` (default: channel order) or `newest` (reverse) |
//! | `limit` | messages per page, 1 to [`query::MAX_LIMIT`]; default [`query::DEFAULT_LIMIT`] |
//!
//! At most one of `from`, `from_time`, `cursor`; with none, the page starts at the channel's
//! first message (oldest first) or its last (newest first).
//!
//! The answer is `{channel, order, limit, messages, next_cursor, from_time_found_by,
//! messages_read}`: `next_cursor` is `null` on the last page; `from_time_found_by` says how a
//! `from_time` was found (`"time index"`, or `"scan"` from the channel's first message where
//! the backend has no time index), `null` without one; `messages_read` is how many messages the
//! page's readers read (newest first reads up to the page, from a checkpoint of the watcher's
//! where it has one: `checkpoints.rs`). A backend without readers answers
//! `{channel, unavailable}`, with no `messages`, never an empty list standing for messages it
//! cannot read. A refused request is `{error, kind}` with a 4xx status ([`query::Problem`]); a
//! failing backend is 502, a page not read within [`PAGE_BUDGET`] 504.

mod entry;
mod page;
pub mod query;
mod scan;

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use msgstream_facade::msgstream::mq::{Client, Timestamps};
use msgstream_facade::msgstream::msg::DecoderRegistry;
use serde_json::{json, Value};

use crate::commands::short_id;
use crate::web::checkpoints::Checkpoints;
use query::{Order, Problem, Refused};

/// How long reading one page may take before the request is answered 504 instead: a
/// newest-first page of a channel produced faster than it can be read would never end.
pub const PAGE_BUDGET: Duration = Duration::from_secs(30);

/// What the browser needs besides the backend.
#[derive(Clone)]
pub struct Browser {
    /// How messages are decoded, as `consume` decodes them.
    pub registry: Arc<DecoderRegistry>,
    /// Where the watcher's readers passed, for newest-first pages.
    pub checkpoints: Arc<Checkpoints>,
    /// How long reading one page may take ([`PAGE_BUDGET`]).
    pub budget: Duration,
    /// What the configuration's timestamps are: whether a `from_time` may be a date.
    pub timestamps: Timestamps,
}

impl Browser {
    /// The answer to a `/api/messages` request with these query pairs: a status and its JSON.
    pub async fn answer(
        &self,
        client: &dyn Client,
        pairs: &[(String, String)],
    ) -> (StatusCode, Value) {
        match self.browse(client, pairs).await {
            Ok(value) => (StatusCode::OK, value),
            Err(refused) => (
                refused.problem.status(),
                json!({ "error": refused.message, "kind": refused.problem.name() }),
            ),
        }
    }

    async fn browse(
        &self,
        client: &dyn Client,
        pairs: &[(String, String)],
    ) -> Result<Value, Refused> {
        let browse = query::parse(pairs, self.timestamps)?;
        let backend = client.backend_name();
        if !client.capabilities().readers {
            return Ok(json!({
                "channel": browse.channel,
                "unavailable": format!("messages not available from {backend} (no readers)"),
            }));
        }
        // Checked first: opening a reader on a channel that does not exist would create it on
        // some backends, and browsing writes nothing.
        let channels = client.list_topics().await.map_err(|e| {
            Refused::new(
                Problem::Backend,
                format!("cannot list the channels of {backend}: {e}"),
            )
        })?;
        if !channels.contains(&browse.channel) {
            return Err(Refused::new(
                Problem::UnknownChannel,
                format!("{backend} has no channel {:?}", browse.channel),
            ));
        }
        let page = page::read(client, &self.checkpoints, &browse, self.budget).await?;
        let messages: Vec<Value> = page
            .messages
            .iter()
            .map(|m| entry::entry(&self.registry, m))
            .collect();
        Ok(json!({
            "channel": browse.channel,
            "order": match browse.order {
                Order::Oldest => "oldest",
                Order::Newest => "newest",
            },
            "limit": browse.limit,
            "messages": messages,
            "next_cursor": page.next.map(|id| short_id(id.as_bytes())),
            "from_time_found_by": page.time_found_by,
            "messages_read": page.read,
        }))
    }
}

#[cfg(test)]
mod tests;
