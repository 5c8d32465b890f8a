//! A TCP proxy that can turn the connections it carries into black holes: they stop forwarding
//! in both directions without closing, as when a broker's host vanishes or a NAT entry is
//! dropped. Connections accepted afterwards are forwarded normally.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};

/// A running proxy; stops accepting when dropped.
pub struct Proxy {
    /// Each accepted connection's number (1, 2, …), as it is accepted.
    pub accepted: mpsc::UnboundedReceiver<usize>,
    freeze: watch::Sender<usize>,
    count: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Listens on `listen` and forwards every connection to `upstream`.
    pub async fn start(listen: &str, upstream: &str) -> Proxy {
        let listener = TcpListener::bind(listen)
            .await
            .unwrap_or_else(|e| panic!("proxy cannot listen on {listen}: {e}"));
        let (accepted_tx, accepted) = mpsc::unbounded_channel();
        let (freeze, frozen) = watch::channel(0usize);
        let count = Arc::new(AtomicUsize::new(0));
        let upstream = upstream.to_owned();
        let counter = count.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let number = counter.fetch_add(1, Ordering::SeqCst) + 1;
                let Ok(server) = TcpStream::connect(&upstream).await else {
                    continue;
                };
                let _ = accepted_tx.send(number);
                let (cr, cw) = client.into_split();
                let (sr, sw) = server.into_split();
                tokio::spawn(pump(cr, sw, number, frozen.clone()));
                tokio::spawn(pump(sr, cw, number, frozen.clone()));
            }
        });
        Proxy {
            accepted,
            freeze,
            count,
            task,
        }
    }

    /// Every connection accepted so far stops forwarding and stays open.
    pub fn black_hole_existing(&self) {
        self.freeze.send_replace(self.count.load(Ordering::SeqCst));
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Copies `from` to `to` until either closes, or holds both open forever once connection
/// `number` is frozen (numbers up to the watched value are).
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    number: usize,
    mut frozen: watch::Receiver<usize>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let read = tokio::select! {
            read = from.read(&mut buf) => read,
            _ = frozen.wait_for(|upto| *upto >= number) => break,
        };
        let n = match read {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if *frozen.borrow() >= number {
            break;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
    // Black hole: `from` and `to` stay open, neither read nor written, until the test ends.
    std::future::pending::<()>().await;
}
