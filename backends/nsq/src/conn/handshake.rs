//! Dialling and identifying: the I/O around the pure IDENTIFY negotiation of `identify`.

use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use tokio::net::tcp::OwnedReadHalf;
use tokio::net::TcpStream;
use tokio::sync::watch;

use super::config::ConnConfig;
use super::identify::{
    after_refusal, identify_body, parse_identify, refuses_msg_timeout, AfterRefusal, Negotiated,
};
use super::io;
use super::reader::read_reply;
use super::write_state::WriteFailed;
use super::writer::Writer;
use crate::codec::{Command, MAGIC_V2};
use crate::error::{Error, Result};

/// A dialled connection that sent the magic and IDENTIFY and read the reply.
pub(super) struct Handshake {
    pub read: OwnedReadHalf,
    pub writer: Arc<Writer>,
    pub buf: BytesMut,
    pub write_failed: watch::Receiver<Option<WriteFailed>>,
    pub negotiated: Negotiated,
}

impl Handshake {
    /// Dials and identifies asking for `config.msg_timeout`, capped at the server's
    /// `max_msg_timeout` (see [`ConnConfig::msg_timeout`]): the maximum comes only in the
    /// reply to IDENTIFY, and a server asked for more refuses and closes, so a refusal of the
    /// timeout costs one connection that asks for nothing (to learn the maximum) and, unless
    /// the server's default is the maximum, one that asks for exactly it.
    pub(super) async fn capped(addr: &str, config: &ConnConfig) -> Result<Handshake> {
        let Some(asked) = config.msg_timeout else {
            return Handshake::identify(addr, config, None).await;
        };
        let refused = match Handshake::identify(addr, config, Some(asked)).await {
            Err(Error::Server { error, .. }) if refuses_msg_timeout(&error) => Error::Server {
                addr: addr.to_string(),
                error,
            },
            other => return other,
        };
        let probe = Handshake::identify(addr, config, None).await?;
        let max = match after_refusal(asked, &probe.negotiated) {
            AfterRefusal::Refused => return Err(refused),
            AfterRefusal::KeepProbe => return Ok(probe),
            AfterRefusal::AskFor(max) => max,
        };
        drop(probe);
        tracing::debug!(
            addr,
            ?asked,
            ?max,
            "msg_timeout above the server's max_msg_timeout; asking for the maximum"
        );
        Handshake::identify(addr, config, Some(max)).await
    }

    /// Dials, sends the magic and IDENTIFY (asking for `msg_timeout`, or the server's default)
    /// and reads the reply.
    async fn identify(
        addr: &str,
        config: &ConnConfig,
        msg_timeout: Option<Duration>,
    ) -> Result<Handshake> {
        let stream = tokio::time::timeout(config.dial_timeout, TcpStream::connect(addr))
            .await
            .map_err(|_| Error::Timeout {
                addr: addr.to_string(),
                what: "connect",
                after: config.dial_timeout,
            })?
            .map_err(io(addr))?;
        let _ = stream.set_nodelay(true);
        let (mut read, write) = stream.into_split();
        let writer = Writer::spawn(addr, write, config.write_timeout);
        let mut write_failed = writer.shared.failed.subscribe();
        let identify = identify_body(config, msg_timeout);
        let mut buf = BytesMut::from(&MAGIC_V2[..]);
        Command::Identify(identify.as_bytes()).encode(&mut buf);
        writer.send_raw(&buf).await?;
        let mut buf = BytesMut::new();
        let reply = read_reply(addr, &mut read, &mut buf, config, &mut write_failed).await?;
        let negotiated = parse_identify(addr, &reply)?;
        Ok(Handshake {
            read,
            writer,
            buf,
            write_failed,
            negotiated,
        })
    }
}
