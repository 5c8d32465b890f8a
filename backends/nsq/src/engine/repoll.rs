//! Asking lookupd again soon while it knows no nsqd for the topic.
//!
//! nsqlookupd lists a topic only once some nsqd has it, and upstream nsqd creates a topic on its
//! first PUB (or SUB). A consumer that discovers through lookupd and starts before anything was
//! published finds nothing; at the regular `lookupd_poll_interval` (a minute by default) it
//! would connect, and start receiving, that long after the first publish. So a lookup that
//! leaves the consumer without any connection is followed by another after [`FIRST`], doubling
//! up to the regular interval; once it has a connection the waits start over.

use std::time::{Duration, Instant};

use super::{spawn_after, Engine, Ev};

/// The first quick re-poll after an empty lookup.
const FIRST: Duration = Duration::from_millis(500);

/// The pending quick re-poll, if any, and the wait before the next one.
#[derive(Debug)]
pub(super) struct Repoll {
    due: Option<Instant>,
    after: Duration,
}

impl Default for Repoll {
    fn default() -> Self {
        Repoll {
            due: None,
            after: FIRST,
        }
    }
}

impl Engine {
    /// After a lookup was acted on: schedules a quick re-poll when the consumer is still
    /// without any connection (at most one pending), or starts the waits over when it has one.
    pub(super) fn repoll_while_unknown(&mut self) {
        if !(self.links.is_empty() && self.connecting.is_empty()) {
            self.repoll = Repoll::default();
            return;
        }
        let now = Instant::now();
        if self.stopping || self.repoll.due.is_some_and(|due| due > now) {
            return;
        }
        let wait = self.repoll.after.min(self.config.lookupd_poll_interval);
        self.repoll.due = Some(now + wait);
        self.repoll.after = (wait * 2).min(self.config.lookupd_poll_interval);
        spawn_after(&self.tx, wait, Ev::Poll);
    }
}
