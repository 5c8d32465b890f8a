//! The remoting layer: frame codec, connections, and a pool with one connection per address.

pub(crate) mod backoff;
pub mod codec;
mod conn;
pub mod liveness;
mod pool;

pub use codec::Command;
pub use conn::{Connection, HeartbeatBody};
pub use pool::{check, client_id, heartbeat_body, Remoting, RemotingOptions};

/// A request the server sent us that the client acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerRequest {
    /// The membership of a consumer group changed: rebalance it.
    ConsumerIdsChanged {
        /// The group.
        group: String,
    },
}
