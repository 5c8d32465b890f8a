//! # msgstream facade
//!
//! Wires a backend by configuration ([`Config`] → [`Factory`]) and re-exports the core crate,
//! so an application depends on this one crate and picks its broker in a TOML file:
//!
//! ```no_run
//! # async fn run() -> msgstream_facade::Result<()> {
//! use msgstream_facade::prelude::*; // Config, Factory, the streams, TsMsg, MsgPack, …
//! let factory = Factory::new(&Config::load(None)?).await?;
//! let mut stream = factory.tt_msg_stream();
//! # Ok(()) }
//! ```
//!
//! Each backend is a cargo feature (all on by default): `rocksmq`, `rocketmq` and `nsq`. The
//! in-memory backend is always there.
#![deny(clippy::unwrap_used)]
#![warn(missing_docs)]

pub mod config;
mod error;
pub mod factory;
pub mod migrate;
pub mod positions;
pub mod prelude;

pub use config::{BackendKind, Config};
pub use error::{Error, Result};
pub use factory::Factory;
pub use msgstream;

/// The README's Rust blocks (its hello world) compiled and run as a doc test, so they cannot
/// drift from the API.
#[cfg(all(doctest, feature = "rocksmq"))]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
