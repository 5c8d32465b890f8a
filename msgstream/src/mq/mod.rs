//! The mq layer: what every backend implements, and nothing a backend does not need.
//!
//! One trait per concern ([`Client`], [`Producer`], [`Consumer`], [`Reader`]), plain data for
//! everything that crosses it ([`Message`], [`MessageId`], options), and [`Capabilities`] so that
//! callers ask what a backend can do instead of guessing. The streams in [`crate::stream`] and
//! [`crate::tt`] are written against these traits only.

mod capabilities;
mod client;
mod epoch;
mod lease;
mod message;
mod options;
mod sending;
pub mod time;

pub use crate::base::{MessageId, Properties};
pub use capabilities::{Capabilities, Ordering};
pub use client::{Acker, Client, Consumer, Producer, Reader};
pub use epoch::DeliveryEpoch;
pub use lease::{Lease, Leases};
pub use message::{Delivery, Message, ProducerMessage};
pub use options::{
    validate_channel_name, ConsumerOptions, InitialPosition, ReaderOptions, SubscriptionInfo,
};
pub use sending::Sending;
pub use time::{message_timestamp, scan_to_time, TimePosition, Timestamps};
