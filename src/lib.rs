//! msgstream facade: wires the backends by configuration.
//!
//! The core API lives in the [`msgstream`] crate and is re-exported here.
pub use msgstream::*;
