//! [`Lease`]: the exclusive hold of one (channel, subscription) by a live consumer.
//!
//! RocketMQ itself would let two consumers of a group share (or fight over) the queue, and it
//! cannot tell one process about another's consumers, so exclusivity is enforced per client:
//! two processes consuming one subscription are not detected.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use msgstream::sync::lock;
use msgstream::{Error, Result};

type Leases = Arc<Mutex<HashSet<(String, String)>>>;

/// Held from `subscribe` until the consumer is closed or dropped.
#[derive(Debug)]
pub(crate) struct Lease {
    leases: Leases,
    key: Option<(String, String)>,
}

impl Lease {
    /// Takes the lease of `subscription` on `channel`, or `Error::SubscriptionBusy`.
    pub(crate) fn take(leases: &Leases, channel: &str, subscription: &str) -> Result<Lease> {
        let key = (channel.to_owned(), subscription.to_owned());
        if !lock(leases).insert(key.clone()) {
            return Err(Error::SubscriptionBusy {
                topic: key.0,
                subscription: key.1,
            });
        }
        Ok(Lease {
            leases: leases.clone(),
            key: Some(key),
        })
    }

    /// Gives the lease back (idempotent).
    pub(crate) fn release(&mut self) {
        if let Some(key) = self.key.take() {
            lock(&self.leases).remove(&key);
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.release();
    }
}

/// `Error::SubscriptionBusy` if `subscription` of `channel` (any, when `None`) is leased.
pub(crate) fn check_free(leases: &Leases, channel: &str, subscription: Option<&str>) -> Result<()> {
    let held = lock(leases);
    match held
        .iter()
        .find(|(c, s)| c == channel && subscription.is_none_or(|wanted| wanted == s))
    {
        Some((c, s)) => Err(Error::SubscriptionBusy {
            topic: c.clone(),
            subscription: s.clone(),
        }),
        None => Ok(()),
    }
}
