//! [`Lease`]: the exclusive hold of one (topic, group) by a live mq consumer.

use msgstream::sync::lock;
use msgstream::{Error, Result};

use crate::Rocksmq;

/// Held by a consumer from `subscribe` until it is closed or dropped. The database itself is
/// locked to one process, so a lease in the engine makes subscriptions exclusive everywhere.
#[derive(Debug)]
pub(crate) struct Lease {
    engine: Rocksmq,
    key: Option<(String, String)>,
}

impl Lease {
    /// Takes the lease of `group` on `topic`, or `Error::SubscriptionBusy` if it is held.
    pub(crate) fn take(engine: &Rocksmq, topic: &str, group: &str) -> Result<Lease> {
        let key = (topic.to_string(), group.to_string());
        if !lock(&engine.inner.leases).insert(key.clone()) {
            return Err(Error::SubscriptionBusy {
                topic: key.0,
                subscription: key.1,
            });
        }
        Ok(Lease {
            engine: engine.clone(),
            key: Some(key),
        })
    }

    /// Gives the lease back (idempotent).
    pub(crate) fn release(&mut self) {
        if let Some(key) = self.key.take() {
            lock(&self.engine.inner.leases).remove(&key);
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.release();
    }
}

/// `Error::SubscriptionBusy` if `group` of `topic` (any group when `None`) has a live consumer.
pub(crate) fn check_free(engine: &Rocksmq, topic: &str, group: Option<&str>) -> Result<()> {
    let leases = lock(&engine.inner.leases);
    let busy = leases
        .iter()
        .find(|(t, g)| t == topic && group.is_none_or(|wanted| wanted == g));
    match busy {
        Some((topic, group)) => Err(Error::SubscriptionBusy {
            topic: topic.clone(),
            subscription: group.clone(),
        }),
        None => Ok(()),
    }
}
