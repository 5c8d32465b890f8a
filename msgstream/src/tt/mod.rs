//! The timetick-aligned stream: many channels read as one sequence of packs cut at timeticks.

mod aligner;
#[cfg(test)]
mod aligner_tests;
#[cfg(test)]
mod capped_tests;
mod driver;
mod feed;
pub(crate) mod runs;
mod stream;
mod summary;
mod time_seek;

pub use crate::consume::LatePolicy;
pub use aligner::{TimetickAligner, WatermarkHolder};
pub use stream::{CappedChannel, TtMsgStream, TtStats};
