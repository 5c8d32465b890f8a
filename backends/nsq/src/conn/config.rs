//! What a connection asks of the server and how long it waits for it.

use std::time::Duration;

#[cfg(doc)]
use super::Negotiated;
#[cfg(doc)]
use crate::error::Error;

/// Connection settings shared by producers and consumers.
#[derive(Debug, Clone)]
pub struct ConnConfig {
    /// `client_id` sent in IDENTIFY.
    pub client_id: String,
    /// `user_agent` sent in IDENTIFY.
    pub user_agent: String,
    /// Heartbeat interval asked for; the server disconnects after two silent intervals.
    pub heartbeat_interval: Duration,
    /// Message timeout asked for (`None`: the server's default), never more than the server
    /// allows. nsqd refuses an IDENTIFY asking for more than its `max_msg_timeout`
    /// (`E_BAD_BODY`, closing the connection) and tells that maximum only in its reply, so on
    /// that refusal the client connects again without asking, learns the maximum, and (unless
    /// the server's default already is the maximum) connects once more asking for exactly the
    /// maximum: the timeout in effect is `min(msg_timeout, max_msg_timeout)`, reported in
    /// [`Negotiated::msg_timeout`]. A value below the server's minimum (nsqd: 1 s) is not
    /// raised: the server's refusal is returned.
    pub msg_timeout: Option<Duration>,
    /// TCP connect deadline.
    pub dial_timeout: Duration,
    /// Longest wait for any frame; must exceed the heartbeat interval.
    pub read_timeout: Duration,
    /// Longest one write to the socket may take. A server that stops reading fills the socket
    /// buffers and a write stalls: past this the connection is closed and whatever waits on it
    /// fails with [`Error::Timeout`] (`what: "write"`), a publish's reply included, instead of
    /// hanging until the read timeout.
    pub write_timeout: Duration,
    /// Secret for AUTH, sent when the server says `auth_required`.
    pub auth_secret: Option<String>,
    /// Largest frame accepted (nsqd's max_msg_size plus headers by default).
    pub max_frame_size: usize,
    /// How the server buffers what it writes to this connection.
    pub output_buffer: OutputBuffer,
}

/// How nsqd buffers the frames it writes to a connection (IDENTIFY `output_buffer_size` and
/// `output_buffer_timeout`). nsqd writes deliveries into a buffer and flushes it when the
/// client has no RDY left, when it fills, or on a ticker of `output_buffer_timeout` (250 ms by
/// default): a consumer with RDY to spare gets a lone message up to that long after it was
/// published, so a one-at-a-time round trip takes about the timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutputBuffer {
    /// The server's settings (nsqd: 16 KiB, flushed at least every 250 ms).
    #[default]
    ServerDefault,
    /// Flushed at least this often, in whole milliseconds (nsqd accepts 25 ms to 30 s by
    /// default and refuses the IDENTIFY otherwise).
    FlushEvery(Duration),
    /// No buffering: each frame is written as it is made (`output_buffer_size: -1`), for the
    /// lowest latency at one write per frame on the server.
    Off,
}

impl Default for ConnConfig {
    fn default() -> Self {
        ConnConfig {
            client_id: "msgstream".into(),
            user_agent: concat!("msgstream-nsq/", env!("CARGO_PKG_VERSION")).into(),
            heartbeat_interval: Duration::from_secs(30),
            msg_timeout: None,
            dial_timeout: Duration::from_secs(1),
            read_timeout: Duration::from_secs(60),
            write_timeout: Duration::from_secs(1),
            auth_secret: None,
            max_frame_size: 1024 * 1024 + 1024,
            output_buffer: OutputBuffer::ServerDefault,
        }
    }
}
