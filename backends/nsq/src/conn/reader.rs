//! The reading side: frames off the socket, each within the read timeout, the handshake's
//! replies, and the task that answers heartbeats and hands every other frame to a sink.

use std::sync::Arc;

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::net::tcp::OwnedReadHalf;
use tokio::sync::watch;

use super::config::ConnConfig;
use super::io;
use super::write_state::WriteFailed;
use super::writer::Writer;
use crate::codec::{decode_frame, CodecError, Command, Frame, RawMessage, ServerError, HEARTBEAT};
use crate::error::{Error, Result};

/// A frame, as the reader task hands it on.
#[derive(Debug)]
pub enum Event {
    /// A response other than a heartbeat.
    Response(bytes::Bytes),
    /// An error frame; fatal ones are followed by `Closed`.
    Error(ServerError),
    /// A message.
    Message(RawMessage),
    /// The connection ended; `None` when the socket closed cleanly (either side) between
    /// frames. An end in the middle of a frame is [`CodecError::Truncated`]; a write that
    /// failed or timed out is the write's error.
    Closed(Option<Error>),
}

/// Reads until one whole frame is buffered. `Ok(None)` when the peer closed between frames
/// (nothing of a next frame buffered); a close in the middle of a frame is
/// [`CodecError::Truncated`]. A write that failed meanwhile (see `write_loop`) ends the wait
/// with its error: a server that stopped reading may never answer.
pub(super) async fn read_frame(
    addr: &str,
    read: &mut (impl AsyncRead + Unpin),
    buf: &mut BytesMut,
    config: &ConnConfig,
    write_failed: &mut watch::Receiver<Option<WriteFailed>>,
) -> Result<Option<Frame>> {
    loop {
        match decode_frame(buf, config.max_frame_size) {
            Ok(Some(frame)) => return Ok(Some(frame)),
            Ok(None) => {}
            Err(source) => {
                return Err(Error::Codec {
                    addr: addr.to_string(),
                    source,
                })
            }
        }
        buf.reserve(16 * 1024);
        let write_failed = async {
            let failed = write_failed.wait_for(Option::is_some).await.map(|f| *f);
            match failed {
                Ok(failed) => failed,
                // The write side is gone without failing: only the read matters.
                Err(_) => std::future::pending().await,
            }
        };
        let read = tokio::time::timeout(config.read_timeout, read.read_buf(buf));
        let n = tokio::select! {
            // The read first: the failure is waited for (a waiter registered) only while the
            // read has to wait anyway.
            biased;
            n = read => n
                .map_err(|_| Error::Timeout {
                    addr: addr.to_string(),
                    what: "read",
                    after: config.read_timeout,
                })?
                .map_err(io(addr))?,
            Some(failed) = write_failed => {
                return Err(failed.error(addr, config.write_timeout));
            }
        };
        if n == 0 {
            if buf.is_empty() {
                return Ok(None);
            }
            // `decode_frame` accepted the size field if it is there.
            let needed = match buf.get(..4) {
                Some(&[a, b, c, d]) => 4 + u32::from_be_bytes([a, b, c, d]) as usize,
                _ => 4,
            };
            return Err(Error::Codec {
                addr: addr.to_string(),
                source: CodecError::Truncated {
                    what: "frame (the connection closed mid-frame)",
                    needed,
                    got: buf.len(),
                },
            });
        }
    }
}

/// Reads the reply to a handshake command: a response, or the server's error.
pub(super) async fn read_reply(
    addr: &str,
    read: &mut OwnedReadHalf,
    buf: &mut BytesMut,
    config: &ConnConfig,
    write_failed: &mut watch::Receiver<Option<WriteFailed>>,
) -> Result<bytes::Bytes> {
    loop {
        match read_frame(addr, read, buf, config, write_failed).await? {
            None => {
                return Err(Error::Io {
                    addr: addr.to_string(),
                    source: std::io::ErrorKind::UnexpectedEof.into(),
                })
            }
            Some(Frame::Response(data)) if data.as_ref() == HEARTBEAT => continue,
            Some(Frame::Response(data)) => return Ok(data),
            Some(Frame::Error(error)) => {
                return Err(Error::Server {
                    addr: addr.to_string(),
                    error,
                })
            }
            Some(Frame::Message(_)) => {
                return Err(Error::Protocol {
                    addr: addr.to_string(),
                    what: "a message before SUB".into(),
                })
            }
        }
    }
}

pub(super) async fn read_loop(
    addr: String,
    mut read: OwnedReadHalf,
    mut buf: BytesMut,
    config: ConnConfig,
    positions: bool,
    writer: Arc<Writer>,
    mut sink: impl FnMut(Event, &Arc<Writer>),
) {
    // Sees a failure that happened before it subscribed: `wait_for` checks the current value.
    let mut write_failed = writer.shared.failed.subscribe();
    // The reply to every publish, taken off the buffer as it is: decoding slices each frame
    // out of the buffer (a reference count up and down, per publish).
    const OK_FRAME: [u8; 10] = [0, 0, 0, 6, 0, 0, 0, 0, b'O', b'K'];
    let end = loop {
        if buf.starts_with(&OK_FRAME) {
            bytes::Buf::advance(&mut buf, OK_FRAME.len());
            sink(Event::Response(bytes::Bytes::from_static(b"OK")), &writer);
            continue;
        }
        let frame = match read_frame(&addr, &mut read, &mut buf, &config, &mut write_failed).await {
            Ok(Some(frame)) => frame,
            Ok(None) => break None,
            Err(e) => break Some(e),
        };
        match frame {
            Frame::Response(data) if data.as_ref() == HEARTBEAT => {
                if let Err(e) = writer.send(Command::Nop).await {
                    // A failed write closed the writer: report why.
                    break Some(writer.failure().unwrap_or(e));
                }
            }
            Frame::Response(data) => sink(Event::Response(data), &writer),
            Frame::Error(error) => sink(Event::Error(error), &writer),
            Frame::Message(data) => match RawMessage::parse(data, positions) {
                Ok(message) => sink(Event::Message(message), &writer),
                Err(source) => {
                    break Some(Error::Codec {
                        addr: addr.clone(),
                        source,
                    })
                }
            },
        }
    };
    writer.shutdown().await;
    sink(Event::Closed(end), &writer);
}

#[cfg(test)]
#[path = "reader_tests.rs"]
mod tests;
