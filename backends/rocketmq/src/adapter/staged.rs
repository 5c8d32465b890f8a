//! [`Staged`]: the consumers of one client with acks staged by a stream's commit and not yet
//! flushed, so that one flush persists them all, one request per queue, concurrently.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};

use msgstream::sync::lock;
use msgstream::{Error, Result};

use super::consumer::Acks;
use crate::BACKEND;

/// The ackers of one client with staged acks not yet flushed.
#[derive(Default)]
pub(crate) struct Staged {
    pending: Mutex<Vec<Weak<Acks>>>,
}

impl Staged {
    pub(super) fn add(&self, acks: Weak<Acks>) {
        let mut pending = lock(&self.pending);
        if !pending.iter().any(|p| p.ptr_eq(&acks)) {
            pending.push(acks);
        }
    }

    /// Persists every pending acker's queue offset concurrently; the first error is returned
    /// and the ackers that failed stay pending.
    pub(super) async fn flush(&self) -> Result<()> {
        let pending: Vec<Arc<Acks>> = std::mem::take(&mut *lock(&self.pending))
            .iter()
            .filter_map(Weak::upgrade)
            // A closed consumer persisted its offset at close.
            .filter(|acks| !acks.closed.load(Ordering::Acquire))
            .collect();
        let mut tasks = tokio::task::JoinSet::new();
        for acks in pending {
            tasks.spawn(async move {
                let outcome = acks.persist().await;
                (acks, outcome)
            });
        }
        let mut first_error = None;
        while let Some(joined) = tasks.join_next().await {
            match joined {
                Ok((_, Ok(()))) => {}
                Ok((acks, Err(e))) => {
                    self.add(Arc::downgrade(&acks));
                    first_error.get_or_insert(e);
                }
                Err(e) => {
                    first_error.get_or_insert(Error::backend(
                        BACKEND,
                        format!("persisting a staged offset failed: {e}"),
                    ));
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}
