//! The consuming machinery both streams share, below both of them: a pump per channel that
//! receives and decodes ([`pump`]), the bounded queues it hands batches over in ([`queue`],
//! [`batch`]), the commit log of what the application has had ([`commit`]), and the set-up both
//! streams do when they subscribe, seek or read. Nothing here knows either stream.

pub(crate) mod batch;
pub(crate) mod commit;
mod options;
pub(crate) mod pump;
pub(crate) mod queue;
mod readers;
pub(crate) mod runs;
pub(crate) mod signal;
pub(crate) mod spares;
mod subscribe;

pub(crate) use commit::CommitLog;
pub use options::{LatePolicy, StreamOptions, MAX_BUFFER};
pub(crate) use readers::Readers;
pub(crate) use subscribe::{
    check_distinct, check_topic_valid, precheck_targets, resolve_position, subscribe_all,
};
