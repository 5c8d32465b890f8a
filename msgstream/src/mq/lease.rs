//! [`Leases`] and [`Lease`]: one live consumer per subscription.
//!
//! A subscription's position is moved by whoever acks on it, so two live consumers of one
//! subscription would move it past each other's unprocessed messages. A backend keeps one
//! [`Leases`] table for the scope in which it can see every consumer (an embedded queue: the
//! whole database; a network client: that client) and takes a [`Lease`] before a consumer is
//! handed out. Exclusivity holds within that scope only.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use crate::sync::lock;
use crate::{Error, Result};

/// The (topic, subscription) pairs that have a live consumer. Clones share the table.
#[derive(Debug, Clone, Default)]
pub struct Leases(Arc<Mutex<HashSet<(String, String)>>>);

impl Leases {
    /// An empty table.
    pub fn new() -> Leases {
        Leases::default()
    }

    /// Takes the lease of `subscription` on `topic`, or [`Error::SubscriptionBusy`] if a live
    /// consumer holds it.
    pub fn take(&self, topic: &str, subscription: &str) -> Result<Lease> {
        let key = (topic.to_owned(), subscription.to_owned());
        if !lock(&self.0).insert(key.clone()) {
            return Err(Error::SubscriptionBusy {
                topic: key.0,
                subscription: key.1,
            });
        }
        Ok(Lease {
            leases: self.clone(),
            key: Some(key),
        })
    }

    /// [`Error::SubscriptionBusy`] if `subscription` of `topic` (any subscription of it, when
    /// `None`) is leased: what deleting a subscription or a topic checks first.
    pub fn check_free(&self, topic: &str, subscription: Option<&str>) -> Result<()> {
        let held = lock(&self.0);
        let busy = held
            .iter()
            .find(|(t, s)| t == topic && subscription.is_none_or(|wanted| wanted == s));
        match busy {
            Some((topic, subscription)) => Err(Error::SubscriptionBusy {
                topic: topic.clone(),
                subscription: subscription.clone(),
            }),
            None => Ok(()),
        }
    }
}

/// The exclusive hold of one subscription, from subscribe until the consumer is closed
/// ([`Lease::release`]) or dropped.
#[derive(Debug)]
pub struct Lease {
    leases: Leases,
    key: Option<(String, String)>,
}

impl Lease {
    /// Gives the lease back, so the subscription can be consumed again (idempotent).
    pub fn release(&mut self) {
        if let Some(key) = self.key.take() {
            lock(&self.leases.0).remove(&key);
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_busy(result: Result<impl std::fmt::Debug>, topic: &str, subscription: &str) -> bool {
        matches!(result, Err(Error::SubscriptionBusy { topic: t, subscription: s })
            if t == topic && s == subscription)
    }

    #[test]
    fn a_leased_subscription_is_busy_until_released() {
        let leases = Leases::new();
        let mut lease = leases.take("t", "s").expect("free");
        assert!(is_busy(leases.take("t", "s"), "t", "s"));
        assert!(is_busy(leases.check_free("t", Some("s")), "t", "s"));
        assert!(is_busy(leases.check_free("t", None), "t", "s"));
        lease.release();
        lease.release();
        leases.check_free("t", None).expect("released");
        leases.take("t", "s").expect("free again");
    }

    #[test]
    fn a_dropped_lease_is_released() {
        let leases = Leases::new();
        drop(leases.take("t", "s").expect("free"));
        leases.check_free("t", Some("s")).expect("released on drop");
        let _held = leases.take("t", "s").expect("free again");
    }

    #[test]
    fn leases_are_per_topic_and_subscription() {
        let leases = Leases::new();
        let _held = leases.take("t", "s").expect("free");
        let _other_subscription = leases.take("t", "s2").expect("another subscription");
        let _other_topic = leases.take("u", "s").expect("another topic");
        leases.check_free("t", Some("s3")).expect("not leased");
        leases.check_free("v", None).expect("no lease on the topic");
    }

    #[test]
    fn clones_share_the_table() {
        let leases = Leases::new();
        let _held = leases.clone().take("t", "s").expect("free");
        assert!(is_busy(leases.take("t", "s"), "t", "s"));
    }
}
