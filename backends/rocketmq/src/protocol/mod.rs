//! What travels inside remoting frames: codes, routes, properties and stored messages.

pub mod codes;
pub mod properties;
pub mod route;
pub mod stored;
