//! The admin server's connections: at most `max_connections` at a time, each closed when its
//! request headers do not arrive within `header_timeout` (a slow-loris client sending a byte
//! now and then) or when it has been idle, with no request being answered and no byte moving
//! either way, for `idle_timeout` (a client that opens connections and forgets them).
//!
//! A connection over the bound is answered `503` and closed rather than left waiting in the
//! listen queue, so a client learns why.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

use super::activity::{Activity, Watched};
use crate::signals::Stop;

/// How connections are bounded.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections served at once.
    pub max_connections: usize,
    /// Time for a request's headers to arrive in full.
    pub header_timeout: Duration,
    /// Time a connection may stay open with nothing happening.
    pub idle_timeout: Duration,
}

/// The pause after a failed accept.
const ACCEPT_RETRY: Duration = Duration::from_millis(100);

/// What a connection over the bound is told before it is closed.
const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n\
Content-Length: 40\r\nConnection: close\r\n\r\ntoo many connections to msgstream admin\n";

/// Serves `router` on `listener` until `stop`; connections still open then are closed (a
/// request being answered is cut off) before this returns, so the backend can be closed next.
pub async fn serve(listener: TcpListener, router: Router, limits: Limits, stop: &Stop) {
    let mut tasks = JoinSet::new();
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    // Refusing takes a moment too: as many refusals as connections at once, beyond that a
    // connection is closed without a word.
    let refusals = Arc::new(Semaphore::new(limits.max_connections));
    loop {
        let accepted = tokio::select! {
            () = stop.wait() => break,
            Some(_) = tasks.join_next(), if !tasks.is_empty() => continue,
            accepted = listener.accept() => accepted,
        };
        let socket = match accepted {
            Ok((socket, _)) => socket,
            // Out of file descriptors and the like: the next accept may succeed once a
            // connection closes; retrying at once would spin.
            Err(e) => {
                tracing::warn!(error = %e, "admin server: cannot accept a connection");
                tokio::time::sleep(ACCEPT_RETRY).await;
                continue;
            }
        };
        match slots.clone().try_acquire_owned() {
            Ok(slot) => {
                let router = router.clone();
                tasks.spawn(connection(socket, slot, router, limits));
            }
            Err(_) => {
                if let Ok(refusal) = refusals.clone().try_acquire_owned() {
                    tasks.spawn(async move {
                        refuse(socket, limits.header_timeout).await;
                        drop(refusal);
                    });
                }
            }
        }
    }
    tasks.shutdown().await;
}

/// Serves one connection until it ends or a timeout closes it; its slot is freed as its
/// socket closes.
async fn connection(socket: TcpStream, slot: OwnedSemaphorePermit, router: Router, limits: Limits) {
    let activity = Activity::new();
    let tracker = activity.clone();
    let service = TowerToHyperService::new(router);
    let service = hyper::service::service_fn(move |request| {
        let busy = tracker.busy();
        let answer = hyper::service::Service::call(&service, request);
        async move {
            let response = answer.await;
            drop(busy);
            response
        }
    });
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    let io = TokioIo::new(Watched::new(socket, activity.clone(), slot));
    let served = builder.serve_connection(io, service);
    tokio::select! {
        result = served => {
            if let Err(e) = result {
                tracing::debug!(error = %e, "admin server: connection ended");
            }
        }
        () = activity.idle_for(limits.idle_timeout) => {
            tracing::debug!("admin server: closing an idle connection");
        }
    }
}

/// Tells a connection over the bound so, and closes it. The request it sent is read and
/// dropped (a little of it, for a short while): closing a socket with unread bytes resets the
/// connection, and the client would lose the answer.
async fn refuse(mut socket: TcpStream, within: Duration) {
    let answer = async {
        socket.write_all(BUSY).await?;
        socket.shutdown().await?;
        let mut sink = [0u8; 4096];
        let mut left = 64 * 1024;
        while left > 0 {
            let read = socket.read(&mut sink).await?;
            if read == 0 {
                break;
            }
            left -= read.min(left);
        }
        Ok::<(), std::io::Error>(())
    };
    let _ = tokio::time::timeout(within, answer).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_busy_answer_is_a_whole_response() {
        let text = std::str::from_utf8(BUSY).expect("text");
        let (head, body) = text.split_once("\r\n\r\n").expect("head and body");
        let length = head
            .lines()
            .find_map(|l| l.strip_prefix("Content-Length: "))
            .expect("length");
        assert_eq!(length.parse::<usize>().ok(), Some(body.len()));
    }
}
