//! The plain message stream.

#[cfg(test)]
pub(crate) mod panic_tests;
mod plain;
#[cfg(test)]
mod rollback_tests;

pub use crate::consume::{StreamOptions, MAX_BUFFER};
pub use crate::produce::{default_repack, ChannelIds, Producers, RepackFn};
pub use plain::MsgStream;
