//! # msgstream
//!
//! One message-stream API over several brokers. Producers append typed messages ([`msg::TsMsg`])
//! to *channels*; consumers read many channels as one stream of [`msg::MsgPack`]s, either one
//! message at a time ([`stream::MsgStream`]) or aligned on timeticks ([`tt::TtMsgStream`]), and
//! can restart from stored positions and get exactly the same packs again.
//!
//! Backends implement the [`mq`] traits; [`mem`] is the in-memory one that defines the contract.
#![deny(clippy::unwrap_used)]
#![warn(missing_docs)]

pub mod base;
mod consume;
pub mod error;
pub mod mem;
pub mod metrics;
pub mod mq;
pub mod msg;
pub mod prelude;
mod produce;
pub mod retry;
pub mod stream;
pub mod sync;
#[cfg(feature = "testkit")]
pub mod testkit;
pub mod trace;
pub mod tt;

pub use error::{Error, Result};
