//! Ctrl-C (SIGINT) and SIGTERM as one stop request.
//!
//! The handlers are installed before a command starts, so a signal that arrives at any point
//! after the first line of output is seen. Long-running commands check [`Stop::requested`]
//! between batches or race [`Stop::wait`] against the call they wait in, then finish cleanly:
//! every write and ack already acknowledged stays, positions are saved, and what the command
//! created for itself is deleted.

use tokio::sync::watch;

/// A shared, cheap-to-clone view of whether a stop was asked for.
#[derive(Clone)]
pub struct Stop {
    requested: watch::Receiver<bool>,
}

impl Stop {
    /// Installs the handlers (on the current runtime) and starts listening.
    pub fn listen() -> std::io::Result<Stop> {
        let (tx, rx) = watch::channel(false);
        let signals = Signals::install()?;
        tokio::spawn(async move {
            signals.recv().await;
            let _ = tx.send(true);
        });
        Ok(Stop { requested: rx })
    }

    /// Whether a stop was asked for.
    pub fn requested(&self) -> bool {
        *self.requested.borrow()
    }

    /// Completes once a stop is asked for (never, if the listener is gone).
    pub async fn wait(&self) {
        let mut rx = self.requested.clone();
        if rx.wait_for(|stop| *stop).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

#[cfg(unix)]
struct Signals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
}

#[cfg(unix)]
impl Signals {
    fn install() -> std::io::Result<Signals> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Signals {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
        })
    }

    async fn recv(mut self) {
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.terminate.recv() => {}
        }
    }
}

#[cfg(not(unix))]
struct Signals;

#[cfg(not(unix))]
impl Signals {
    fn install() -> std::io::Result<Signals> {
        Ok(Signals)
    }

    async fn recv(self) {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}
