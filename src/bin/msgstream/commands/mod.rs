//! The commands other than `demo` and `bench`, one module each.

pub mod admin;
pub mod consume;
pub mod kinds;
pub mod migrate;
pub mod positions;
pub mod printed;
pub mod produce;

use msgstream_facade::msgstream::Error as StreamError;
use msgstream_facade::Factory;

/// A message id as people read it: the number for 8-byte ids (every built-in backend), hex
/// otherwise.
pub fn short_id(id: &[u8]) -> String {
    match <[u8; 8]>::try_from(id) {
        Ok(bytes) => u64::from_be_bytes(bytes).to_string(),
        Err(_) => id.iter().map(|b| format!("{b:02x}")).collect(),
    }
}

/// Deletes channels a command created for itself (`demo`, `bench`), with their groups. A
/// backend that cannot delete channels leaves them and says so once; other failures are
/// warnings, since the command's own result is already known.
pub async fn delete_own_channels(factory: &Factory, channels: &[String], command: &str) {
    let client = factory.client();
    for channel in channels {
        match client.delete_topic(channel).await {
            Ok(()) => {}
            Err(e @ StreamError::Unsupported { .. }) => {
                eprintln!("note: {e}; the {command} channels stay");
                return;
            }
            Err(e) => eprintln!("warning: {command} channel {channel} not deleted: {e}"),
        }
    }
}
