//! The remoting layer: frame codec, connections, and a pool with one connection per address.

pub mod codec;
mod conn;
mod pool;

pub use codec::Command;
pub use conn::Connection;
pub use pool::{check, Remoting, RemotingOptions};

/// A request the server sent us that the client acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerRequest {
    /// The membership of a consumer group changed: rebalance it.
    ConsumerIdsChanged {
        /// The group.
        group: String,
    },
}
