//! [`DeliveryEpoch`]: refusing acks of messages delivered before a seek or a re-subscribe.

use std::sync::atomic::{AtomicU64, Ordering};

use super::Message;
use crate::{Error, Result};

/// A consumer's current delivery epoch, stamped on every message it delivers
/// ([`super::Delivery::epoch`]) and checked on every ack.
///
/// A seek or reconnect moves the consumer to a new epoch ([`DeliveryEpoch::renew`] with a fresh
/// value, or [`DeliveryEpoch::bump`]); a message of any other epoch is then refused with
/// [`Error::StaleDelivery`] instead of moving the cursor back to where the consumer no longer
/// is. Epochs drawn from a counter shared by all consumers of a queue also refuse another
/// consumer's messages.
#[derive(Debug)]
pub struct DeliveryEpoch(AtomicU64);

impl DeliveryEpoch {
    /// Starts at `epoch`.
    pub fn new(epoch: u64) -> DeliveryEpoch {
        DeliveryEpoch(AtomicU64::new(epoch))
    }

    /// The epoch to stamp on a delivery now.
    pub fn current(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }

    /// Moves to `epoch` (a fresh value from a shared counter).
    pub fn renew(&self, epoch: u64) {
        self.0.store(epoch, Ordering::Release);
    }

    /// Moves to the next epoch of this consumer.
    pub fn bump(&self) {
        self.0.fetch_add(1, Ordering::AcqRel);
    }

    /// [`Error::StaleDelivery`] unless `message` was delivered in the current epoch.
    pub fn check(&self, message: &Message) -> Result<()> {
        let epoch = self.current();
        if message.delivery.epoch != epoch {
            return Err(Error::StaleDelivery(format!(
                "message {:?} was delivered in epoch {}, the consumer is at epoch {epoch} (it seeked or was re-created since)",
                message.id, message.delivery.epoch
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mq::{Delivery, MessageId};

    fn delivered(epoch: &DeliveryEpoch) -> Message {
        Message {
            topic: "t".into(),
            id: MessageId::from_u64(1),
            payload: Default::default(),
            properties: Default::default(),
            delivery: Delivery {
                epoch: epoch.current(),
            },
        }
    }

    #[test]
    fn a_delivery_of_the_current_epoch_passes() {
        let epoch = DeliveryEpoch::new(7);
        epoch.check(&delivered(&epoch)).expect("current");
    }

    #[test]
    fn a_bump_makes_earlier_deliveries_stale() {
        let epoch = DeliveryEpoch::new(0);
        let before = delivered(&epoch);
        epoch.bump();
        assert_eq!(epoch.current(), 1);
        assert!(matches!(epoch.check(&before), Err(Error::StaleDelivery(_))));
        epoch
            .check(&delivered(&epoch))
            .expect("delivered after the bump");
    }

    #[test]
    fn a_renewal_makes_earlier_deliveries_stale() {
        let epoch = DeliveryEpoch::new(3);
        let before = delivered(&epoch);
        epoch.renew(9);
        assert_eq!(epoch.current(), 9);
        let Err(Error::StaleDelivery(why)) = epoch.check(&before) else {
            panic!("a delivery of epoch 3 passed at epoch 9");
        };
        assert!(why.contains("epoch 3") && why.contains("epoch 9"), "{why}");
    }
}
