//! The crate's test servers (`msgstream_rocketmq::testserver`), plus names for tests.
#![allow(dead_code, unused_imports)]

pub mod lite;
pub mod proxy;
pub mod raw;

pub use msgstream_rocketmq::testserver::*;

/// A name no other test (or earlier run against a shared cluster) uses.
pub fn unique(prefix: &str) -> String {
    msgstream::testkit::unique(prefix)
}
