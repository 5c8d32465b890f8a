//! The cross-backend conformance suite: one test binary, the same contract checks against every
//! backend the build has, plus the facade's own promises (config, CLI, README's capability
//! table).
//!
//! A backend joins with one harness function in `harness.rs` and one line in `backends.rs`.

mod backends;
mod capabilities;
mod cli;
mod cli_admin;
mod cli_admin_guard;
mod cli_admin_messages;
mod cli_data;
mod cli_input_limits;
mod cli_logs;
mod cli_migrate;
mod cli_migrate_input;
mod cli_time;
mod cli_undelivered;
mod harness;
mod migrate;
mod migrate_data;
#[cfg(any(feature = "rocksmq", feature = "rocketmq", feature = "nsq"))]
mod restart;
