//! `[rocksmq]`, `[rocketmq]` and `[nsq]`: each backend's section is that backend's own
//! configuration type, so a setting is declared once, in its backend, and the factory hands the
//! section over as it is.
//!
//! A build without a backend keeps its section as the raw table that was written (unchecked),
//! so one configuration file stays valid across builds; opening that backend is then
//! [`crate::Error::BackendNotCompiled`].

/// `[rocksmq]`: the embedded queue's settings.
#[cfg(feature = "rocksmq")]
pub type RocksmqSection = msgstream_rocksmq::RocksmqConfig;
/// `[rocksmq]` in a build without the rocksmq backend: the table as written.
#[cfg(not(feature = "rocksmq"))]
pub type RocksmqSection = toml::Table;

/// `[rocketmq]`: a RocketMQ cluster reached through its name servers.
#[cfg(feature = "rocketmq")]
pub type RocketmqSection = msgstream_rocketmq::RocketMqConfig;
/// `[rocketmq]` in a build without the rocketmq backend: the table as written.
#[cfg(not(feature = "rocketmq"))]
pub type RocketmqSection = toml::Table;

/// `[nsq]`: NSQ-protocol servers.
#[cfg(feature = "nsq")]
pub type NsqSection = msgstream_nsq::NsqConfig;
/// `[nsq]` in a build without the nsq backend: the table as written.
#[cfg(not(feature = "nsq"))]
pub type NsqSection = toml::Table;

#[cfg(feature = "rocksmq")]
pub use msgstream_rocksmq::{Durability as SyncMode, Recovery as RecoveryMode, MAX_ACK_GROUP_MS};

#[cfg(feature = "nsq")]
pub use msgstream_nsq::{Extensions as NsqExtensions, SpoolSync as NsqSpoolSync};
