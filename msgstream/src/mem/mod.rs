//! The in-memory backend: the executable definition of the mq contract.
//!
//! Everything the traits promise, with no I/O: strict per-channel order, durable subscriptions
//! (for the life of the [`MemoryBroker`]), cumulative acks, seek, readers and latest id. Several
//! [`MemoryClient`]s can share one broker, which is how tests "restart" a consumer process.
//! Not a backend for production data: it forgets everything when the broker is dropped.

mod broker;
mod client;
mod consumer;
mod reader;

pub use broker::MemoryBroker;
pub use client::MemoryClient;

/// Backend name used in errors and configs.
pub const BACKEND: &str = "memory";
