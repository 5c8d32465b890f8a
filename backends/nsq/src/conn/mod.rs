//! One negotiated connection to an nsqd: magic, IDENTIFY (feature negotiation), AUTH, then a
//! reader task that answers heartbeats with NOP and hands every other frame to a sink.
//!
//! Guarantees: every read and write has a deadline (a silent server, or one that stops
//! reading, is an error, not a hang); the server's `max_rdy_count`, `max_msg_timeout` and
//! `auth_required` are honoured; frames are bounded by `max_frame_size`; a connection that
//! ends in the middle of a frame is an error ([`CodecError::Truncated`]), only an end between
//! frames is a clean close; the sink hears `Closed` exactly once, last.
//!
//! One concept per file: [`ConnConfig`] (`config`), the IDENTIFY negotiation without I/O
//! (`identify`) and the dialling around it (`handshake`), the [`Writer`] handle (`writer`)
//! over the state it shares (`write_state`) with its write task (`write_task`), the
//! commands the server answers (`requests`), and the reader task (`reader`).

mod config;
mod handshake;
mod identify;
mod reader;
mod requests;
mod write_state;
mod write_task;
mod writer;

use std::sync::Arc;

use tokio::task::JoinHandle;

pub use config::{ConnConfig, OutputBuffer};
pub use identify::Negotiated;
pub use reader::Event;
pub(crate) use requests::ReplyTo;
pub use writer::Writer;

#[cfg(doc)]
use crate::codec::CodecError;
use crate::codec::Command;
use crate::error::{Error, Result};
use handshake::Handshake;
use reader::{read_loop, read_reply};

/// A connected, identified connection; the reader task runs until the socket ends.
#[derive(Debug)]
pub struct Conn {
    /// Commands go here.
    pub writer: Arc<Writer>,
    /// What the server granted.
    pub negotiated: Negotiated,
    reader: JoinHandle<()>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl Conn {
    /// Dials `addr`, negotiates, authenticates, sends `subscribe` (a SUB variant) and waits
    /// for its `OK`, then starts the reader task feeding `sink`, which gets the connection's
    /// writer along so a consumer can hand out and answer messages on the reader's task.
    /// `positions` says whether deliveries carry offset and raw size (SUB_ADVANCED,
    /// SUB_ORDERED). A server that refuses the configured message timeout as above its
    /// maximum costs up to two more dials (see [`ConnConfig::msg_timeout`]).
    pub async fn connect(
        addr: &str,
        config: &ConnConfig,
        subscribe: Option<Command<'_>>,
        positions: bool,
        sink: impl FnMut(Event, &Arc<Writer>) + Send + 'static,
    ) -> Result<Conn> {
        let Handshake {
            mut read,
            writer,
            mut buf,
            mut write_failed,
            negotiated,
        } = Handshake::capped(addr, config).await?;
        if negotiated.auth_required {
            let secret = config
                .auth_secret
                .as_ref()
                .ok_or_else(|| Error::Unsupported {
                    addr: addr.to_string(),
                    what: "the server requires AUTH and no secret is configured".into(),
                })?;
            writer.send(Command::Auth(secret.as_bytes())).await?;
            read_reply(addr, &mut read, &mut buf, config, &mut write_failed).await?;
        }
        if let Some(command) = subscribe {
            writer.send(command).await?;
            read_reply(addr, &mut read, &mut buf, config, &mut write_failed).await?;
        }
        let reader = tokio::spawn(read_loop(
            addr.to_string(),
            read,
            buf,
            config.clone(),
            positions,
            writer.clone(),
            sink,
        ));
        Ok(Conn {
            writer,
            negotiated,
            reader,
        })
    }

    /// Shuts the write side; the server closes the socket and the sink hears `Closed`.
    pub async fn close(&self) {
        self.writer.shutdown().await;
    }
}

/// Maps a socket error to the crate's, naming the peer.
fn io(addr: &str) -> impl Fn(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        addr: addr.to_string(),
        source,
    }
}
