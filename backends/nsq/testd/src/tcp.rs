//! One TCP client connection: magic, command parsing, replies and heartbeats, as nsqd 1.3.0
//! (and, with extensions on, the Youzan fork) behaves on the wire.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::io::{AsyncReadExt, BufReader};
use tokio::net::tcp::OwnedReadHalf;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Notify};
use tokio::task::JoinHandle;

use crate::commands::{Fail, Session};
use crate::output::{write_frames, Buffering};
use crate::store::{frame, ClientState};
use crate::Shared;

/// Frame types.
pub(crate) const RESPONSE: i32 = 0;
pub(crate) const ERROR: i32 = 1;

/// Longest command line accepted (names are ≤ 64 bytes; offsets and numbers are short).
const MAX_LINE: usize = 1024;

/// Accepts connections until the listener fails.
pub(crate) async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let _ = stream.set_nodelay(true);
                tokio::spawn(connection(stream, shared.clone()));
            }
            Err(e) => {
                tracing::warn!("accept failed: {e}");
                return;
            }
        }
    }
}

/// A parsed command: name, space-separated params, and the raw id of FIN/REQ/TOUCH.
pub(crate) struct Line {
    pub name: Vec<u8>,
    pub params: Vec<Vec<u8>>,
}

async fn connection(stream: TcpStream, shared: Arc<Shared>) {
    let id = shared.next_client();
    if let Ok(remote) = stream.peer_addr() {
        shared
            .store()
            .connections
            .insert(id, crate::connections::Connection::new(remote));
    }
    let mut dropped = shared.drops.subscribe();
    let (rd, wr) = stream.into_split();
    let (tx, rx) = mpsc::unbounded_channel::<Bytes>();
    let buffering = Arc::new(std::sync::Mutex::new(
        if shared.options.extensions.partitions() {
            Buffering::none()
        } else {
            Buffering::nsqd()
        },
    ));
    let writer: JoinHandle<()> = tokio::spawn(write_frames(wr, rx, buffering.clone()));
    let mut reader = BufReader::new(rd);
    let mut session = Session::new(shared.clone(), id, tx.clone(), buffering);
    let mut magic = [0u8; 4];
    let magic_ok = matches!(
        tokio::time::timeout(session.read_deadline(), reader.read_exact(&mut magic)).await,
        Ok(Ok(_))
    );
    if magic_ok && &magic != b"  V2" {
        let _ = tx.send(frame(ERROR, b"E_BAD_PROTOCOL"));
    }
    if magic_ok && &magic == b"  V2" {
        let closer = session.closer();
        loop {
            let silent_at = tokio::time::Instant::now() + session.read_deadline();
            // Biased: once `drop_connections` was called, no further command of this
            // connection is executed, even one already read (an unbiased pick could execute a
            // PUB that arrived after the drop and then drop its answer, so the client would
            // publish it again: a duplicate no real connection loss after the call produces).
            let read = tokio::select! {
                biased;
                _ = dropped.changed() => {
                    writer.abort();
                    break;
                }
                _ = closer.notified() => break,
                read = tokio::time::timeout_at(silent_at, read_command(&mut reader, shared.options.extensions.partitions())) => read,
            };
            let line = match read {
                Ok(Ok(line)) => line,
                Ok(Err(Fail { code, text, .. })) => {
                    if !code.is_empty() {
                        let _ = tx.send(frame(ERROR, format!("{code} {text}").as_bytes()));
                    }
                    break;
                }
                Err(_) => {
                    session.silent_until(silent_at);
                    break;
                }
            };
            match session.execute(line, &mut reader).await {
                Ok(()) => {}
                Err(fail) => {
                    let _ = tx.send(frame(
                        ERROR,
                        format!("{} {}", fail.code, fail.text).as_bytes(),
                    ));
                    if fail.fatal {
                        break;
                    }
                }
            }
        }
    }
    session.end();
    drop(tx);
}

/// Reads one command line. With `positional_ids` (the Youzan parser) FIN, REQ and TOUCH take
/// their 16-byte id by position, so ids may contain spaces and newlines; upstream splits the
/// line, as nsqd does.
async fn read_command(
    reader: &mut BufReader<OwnedReadHalf>,
    positional_ids: bool,
) -> Result<Line, Fail> {
    let mut name = Vec::new();
    let mut ended = false;
    loop {
        let b = reader.read_u8().await.map_err(Fail::io)?;
        match b {
            b'\n' => {
                ended = true;
                break;
            }
            b' ' => break,
            _ if name.len() >= 64 => return Err(Fail::fatal("E_INVALID", "command name too long")),
            _ => name.push(b),
        }
    }
    if name.last() == Some(&b'\r') {
        name.pop();
    }
    let mut params = Vec::new();
    if ended {
        return Ok(Line { name, params });
    }
    if positional_ids && matches!(name.as_slice(), b"FIN" | b"REQ" | b"TOUCH") {
        let mut id = vec![0u8; 16];
        reader.read_exact(&mut id).await.map_err(Fail::io)?;
        params.push(id);
        let rest = read_line(reader).await?;
        params.extend(
            rest.split(|b| *b == b' ')
                .filter(|p| !p.is_empty())
                .map(<[u8]>::to_vec),
        );
        return Ok(Line { name, params });
    }
    let rest = read_line(reader).await?;
    params.extend(rest.split(|b| *b == b' ').map(<[u8]>::to_vec));
    Ok(Line { name, params })
}

async fn read_line(reader: &mut BufReader<OwnedReadHalf>) -> Result<Vec<u8>, Fail> {
    let mut line = Vec::new();
    loop {
        let b = reader.read_u8().await.map_err(Fail::io)?;
        if b == b'\n' {
            break;
        }
        if line.len() >= MAX_LINE {
            return Err(Fail::fatal("E_INVALID", "command line too long"));
        }
        line.push(b);
    }
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    Ok(line)
}

/// Reads `[u32 size][size bytes]`, refusing sizes outside `1..=max` before reading them.
pub(crate) async fn read_body(
    reader: &mut BufReader<OwnedReadHalf>,
    max: usize,
    what: &str,
) -> Result<Vec<u8>, Fail> {
    let size = reader.read_u32().await.map_err(Fail::io)? as usize;
    if size == 0 || size > max {
        return Err(Fail::fatal(
            "E_BAD_BODY",
            &format!("{what} invalid body size {size}"),
        ));
    }
    let mut body = vec![0u8; size];
    reader.read_exact(&mut body).await.map_err(Fail::io)?;
    Ok(body)
}

/// A fresh client record for the store.
pub(crate) fn client_state(
    out: mpsc::UnboundedSender<Bytes>,
    closer: Arc<Notify>,
    msg_timeout: Duration,
) -> ClientState {
    ClientState {
        out,
        closer,
        rdy: 0,
        in_flight: 0,
        sub: None,
        positions: false,
        closing: false,
        msg_timeout,
        user_agent: String::new(),
        finish_count: 0,
        requeue_count: 0,
        message_count: 0,
        timeout_count: 0,
    }
}

/// Now, for deadlines.
pub(crate) fn now() -> Instant {
    Instant::now()
}
