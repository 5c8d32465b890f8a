//! Base types every other module uses: message ids, shared strings, properties.
//!
//! They depend on nothing else in the crate, so that the error type, the mq layer and the
//! message model can all name them without importing one another.

mod message_id;
mod shared_str;

use std::collections::BTreeMap;

pub use message_id::MessageId;
pub use shared_str::SharedStr;

/// Message properties (trace context, user key/values). They travel beside the payload in the
/// backend's own header mechanism, never inside it.
pub type Properties = BTreeMap<String, String>;
