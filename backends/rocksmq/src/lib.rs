//! # msgstream-rocksmq
//!
//! The embedded, zero-setup backend of msgstream: a durable, multi-topic message queue in one
//! RocksDB database ([`Rocksmq`]), and the `msgstream::mq` client over it ([`RocksmqClient`]).
//!
//! ## Layout
//! Column families `messages` and `properties` (both keyed `topic id ‖ u64 BE message id`),
//! `groups` (consumer-group positions), `pages` (closed pages, for retention) and `meta` (topic
//! names, ids, id floors and page marks, which bound what opening reads to recover each
//! topic's open page). Keys start with a fixed-width numeric topic id, never the name, so
//! topics `a` and `ab` are independent and no character of a name is ever key syntax.
//!
//! ## Guarantees
//! - Ids of a topic are strictly increasing and consecutive within a batch, and survive reopen.
//! - A produced message is acknowledged once it is in the write-ahead log (always on); whether
//!   the log is also synced is [`Durability`].
//! - Consumer-group positions are durable; delivery is at least once and in id order; acks are
//!   cumulative, and written when [`AckWrite`] says (by the `ack` call, by default).
//! - After `close` every operation returns `Error::Closed`; a database held by another process
//!   is a clear error, never a panic.
#![deny(clippy::unwrap_used)]
#![warn(missing_docs)]

mod ack_grouping;
mod acks;
mod adapter;
mod codec;
mod config;
mod durability;
mod engine;
mod group;
mod keys;
mod ledger;
mod options;
mod read;
mod read_placement;
mod recent;
pub mod retention;
mod store;
mod subscription;
mod time_index;
mod time_search;
mod topics;
mod writer;

pub use ack_grouping::AckWrite;
pub use adapter::{RocksmqClient, RocksmqConsumer, RocksmqProducer, RocksmqReader};
pub use config::{RocksmqConfig, MAX_ACK_GROUP_MS};
pub use durability::Durability;
pub use engine::{LostMessages, Rocksmq};
pub use group::GroupInfo;
pub use ledger::{LEDGER_FILE, LEDGER_INTERVAL};
pub use options::{Recovery, RocksmqOptions};
pub use read::{backlog_scan_options, StoredMessage, BACKLOG_READAHEAD_BYTES};
pub use retention::{RetentionProgress, RetentionReport};
pub use store::{column_family_options, database_options, INFO_LOG_FILES, INFO_LOG_MAX_BYTES};
pub use subscription::{Subscription, TopicReader};
pub use writer::WriteStats;

/// First id a topic gives out: id 0 precedes every message.
pub const FIRST_MESSAGE_ID: u64 = topics::FIRST_MESSAGE_ID;
