//! # msgstream-rocketmq
//!
//! The Apache RocketMQ backend of msgstream, on a small client of its own (tokio, bytes,
//! serde_json): the remoting protocol ([`remoting`]), name servers ([`namesrv`]), topic and
//! offset administration ([`Admin`]), a [`Producer`], a lite pull consumer
//! ([`LitePullConsumer`]), and the `msgstream::mq` adapter ([`RocketMqClient`]).
//!
//! ## Mapping onto the mq contract
//! A channel is a topic with **one** queue on one broker (so order is strict), created on first
//! use; a subscription is the consumer group `<group_prefix><topic>%<subscription>`, whose
//! committed offset is the acked position; a message id is the queue offset as a big-endian
//! `u64`. Subscriptions are exclusive per client (see the crate README for what RocketMQ
//! cannot enforce, and for where the rocketmq-rust server deviates from Java's).
//!
//! ## Server compatibility
//! Requests are sent with JSON headers carrying `serializeTypeCurrentRPC` and string-only
//! fields (the rocketmq-rust server drops connections otherwise); responses are decoded in
//! both header forms.
#![deny(clippy::unwrap_used)]
#![warn(missing_docs)]

mod adapter;
mod admin;
mod config;
pub mod consumer;
mod error;
pub mod namespace;
pub mod namesrv;
mod producer;
pub mod protocol;
pub mod remoting;
#[cfg(feature = "testserver")]
pub mod testserver;

pub use adapter::{RocketMqClient, RocketMqConsumer, RocketMqProducer, RocketMqReader};
pub use admin::Admin;
pub use config::{
    ConnectionConfig, RocketMqConfig, DEFAULT_COMPRESS_OVER_BYTES, DEFAULT_MAX_MESSAGE_BYTES,
};
pub use consumer::{
    ConsumeFrom, ConsumeRequest, ConsumeResult, ConsumerOptions, LitePullConsumer, Selector,
};
pub use error::{Error, Result, BACKEND};
pub use producer::{OutgoingMessage, Producer, QueueSelector, SendResult};
pub use protocol::route::MessageQueue;
pub use protocol::stored::StoredMessage;
