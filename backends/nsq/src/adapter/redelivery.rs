//! Reporting a message nsqd delivers again.
//!
//! A delivery with `attempts > 1` is a message that came back: its msg_timeout expired (the
//! connection it went out on was lost, or it was held past the server's `max_msg_timeout`), or
//! a consumer requeued it (on close). Upstream nsqd puts such a message at the back of the
//! channel's queue when it comes back, so it arrives after messages published later; the fork
//! requeues a lost connection's messages at once, in no fixed order. Either way the order of
//! the channel is broken there: the message is delivered as it comes, never dropped, and
//! reported with a warning naming it and the `msgstream.redeliveries` metric.

use super::BACKEND;
use crate::message::Message as NsqMessage;

/// Reports `nsq`, delivered again on `subscription` of `topic`.
pub(crate) fn report(topic: &str, subscription: &str, nsq: &NsqMessage) {
    tracing::warn!(
        topic,
        subscription,
        id = ?nsq.id(),
        attempts = nsq.attempts(),
        "nsqd delivered a message again: it may come after newer messages (it timed out on a \
         lost connection, or a closing consumer requeued it)"
    );
    msgstream::metrics::record_redelivery(BACKEND, topic);
}
