//! The tasks of a [`Connection`](super::Connection): the writer, the reader (completing callers, answering
//! server requests) and the liveness monitor.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use msgstream::sync::lock;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{mpsc, watch};

use super::{encode, HeartbeatBody, Shared};
use crate::protocol::codes;
use crate::remoting::codec::{split_frame, Command};
use crate::remoting::liveness::Next;
use crate::remoting::ServerRequest;

pub(super) async fn write_loop(
    shared: Arc<Shared>,
    mut write: OwnedWriteHalf,
    mut rx: mpsc::Receiver<Bytes>,
    mut stopped: watch::Receiver<bool>,
) {
    let reason = loop {
        let frame = tokio::select! {
            frame = rx.recv() => frame,
            _ = stopped.changed() => None,
        };
        let Some(frame) = frame else {
            break "closed".to_owned();
        };
        if shared.dead.load(Ordering::Acquire) {
            break "closed".to_owned();
        }
        match tokio::time::timeout(shared.write_timeout, write.write_all(&frame)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => break format!("write failed: {e}"),
            Err(_) => break format!("a write stalled for {:?}", shared.write_timeout),
        }
    };
    shared.close(&reason);
    let _ = write.shutdown().await;
}

/// Probes when the state machine says so and closes the connection when it is judged dead.
pub(super) async fn monitor(
    shared: Arc<Shared>,
    heartbeat: Option<HeartbeatBody>,
    probe_timeout: Duration,
    mut stopped: watch::Receiver<bool>,
) {
    loop {
        let next = lock(&shared.liveness).next(Instant::now());
        let wait = match next {
            Next::Close => {
                shared.close("judged dead");
                return;
            }
            Next::Probe => {
                let body = heartbeat
                    .as_ref()
                    .map(|b| lock(b).clone())
                    .unwrap_or_default();
                let probe = Command::request(codes::HEART_BEAT, []).with_body(body);
                if let Err(e) = shared.invoke(probe, probe_timeout).await {
                    tracing::debug!(addr = %shared.addr, error = %e, "rocketmq heartbeat failed");
                }
                lock(&shared.liveness).probe_done();
                continue;
            }
            Next::WaitUntil(at) => at,
        };
        let sleep = async {
            match wait {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = sleep => {}
            () = shared.changed.notified() => {}
            _ = stopped.changed() => return,
        }
    }
}

pub(super) struct ReadLoop {
    pub shared: Arc<Shared>,
    pub read: OwnedReadHalf,
    pub max_frame: usize,
    pub notices: Option<mpsc::UnboundedSender<ServerRequest>>,
    pub stopped: watch::Receiver<bool>,
}

pub(super) async fn read_loop(mut r: ReadLoop) {
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let reason = loop {
        if r.shared.dead.load(Ordering::Acquire) {
            break "closed".to_owned();
        }
        match split_frame(&mut buf, r.max_frame) {
            Ok(Some(frame)) => match Command::decode(frame) {
                Ok(command) => {
                    lock(&r.shared.liveness).heard();
                    r.dispatch(command);
                }
                Err(e) => break e.to_string(),
            },
            Ok(None) => {
                let read = tokio::select! {
                    read = r.read.read_buf(&mut buf) => read,
                    _ = r.stopped.changed() => break "closed".to_owned(),
                };
                match read {
                    Ok(0) => break "closed by peer".to_owned(),
                    Ok(_) => {}
                    Err(e) => break e.to_string(),
                }
            }
            Err(e) => break e.to_string(),
        }
    };
    r.shared.close(&reason);
}

impl ReadLoop {
    fn dispatch(&self, command: Command) {
        if command.is_response() {
            if let Some(tx) = lock(&self.shared.pending).remove(&command.opaque) {
                let _ = tx.send(command);
            }
            return;
        }
        let (code, opaque, oneway) = (command.code, command.opaque, command.is_oneway());
        if code == codes::NOTIFY_CONSUMER_IDS_CHANGED {
            if let Some(notices) = &self.notices {
                let group = command.field("consumerGroup").unwrap_or("").to_owned();
                let _ = notices.send(ServerRequest::ConsumerIdsChanged { group });
            }
        } else if !oneway {
            let answer = Command::response(
                codes::REQUEST_CODE_NOT_SUPPORTED,
                opaque,
                format!("request code {code} is not supported by this client"),
            );
            // The reader never waits for the writer: with the queue full the answer is
            // dropped and the server's request times out on its side.
            if let Ok(frame) = encode(&answer) {
                let _ = self.shared.frames.try_send(frame);
            }
        }
    }
}
