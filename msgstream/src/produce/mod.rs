//! The producing side both streams share: producers per channel and repacking.

pub(crate) mod producers;
mod repack;

pub use producers::{ChannelIds, Producers};
pub use repack::{default_repack, RepackFn};
