//! # msgstream-nsq
//!
//! An NSQ protocol V2 client written on tokio, and the `msgstream::mq` backend over it.
//!
//! Layers, each its own module: [`codec`] (bytes ↔ commands and frames, no I/O), [`conn`]
//! (one negotiated connection), [`producer`] (PUB/MPUB/DPUB/PUB_TRACE over a pool with
//! failover), [`consumer`] (go-nsq's push model: RDY flow control, backoff, attempts, lookupd
//! discovery, graceful stop), and the Youzan extensions (partitions, ordered and offset
//! subscriptions) threaded through them.
#![deny(clippy::unwrap_used)]
#![warn(missing_docs)]

mod adapter;
pub mod backoff;
pub mod codec;
mod config;
pub mod conn;
pub mod consumer;
mod consumer_config;
mod engine;
mod error;
mod handler;
mod http;
pub mod lookup;
pub mod message;
pub mod offset;
pub mod producer;
pub mod rdy;
mod spool;
mod stats;

pub use adapter::NsqClient;
pub use backoff::{BackoffConfig, Strategy};
pub use codec::{CodecError, ConsumeOffset};
pub use config::{Extensions, NsqConfig, SpoolSync};
pub use conn::{ConnConfig, Negotiated, OutputBuffer};
pub use consumer::{Consumer, ConsumerConfig, FailedCallback, Stats, SubscribeMode};
pub use error::{Error, Result};
pub use handler::spawn_handlers;
pub use message::{Message, Origin};
pub use offset::{set_channel_offset, OffsetSet};
pub use producer::{Producer, ProducerConfig, PublishReceipt};

/// Backend name in errors and configs.
pub const BACKEND: &str = "nsq";
