//! The names an application needs, in one import: `use msgstream_facade::prelude::*;` brings
//! [`Config`] and [`Factory`] with the core's prelude (streams, messages, packs, positions).

pub use crate::{Config, Factory};
pub use msgstream::prelude::*;
