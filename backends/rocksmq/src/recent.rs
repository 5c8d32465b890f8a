//! A topic's latest small write, kept in memory for the consumers that wait for it.
//!
//! A consumer that keeps up sleeps until the writer publishes, then reads the one or few
//! messages just written. Reading them back from RocksDB (a memtable lookup per message, on a
//! thread whose caches went cold while it slept) was about three microseconds of the queue's
//! produce→consume latency, with the write and the thread wake-up the rest. So a write that
//! someone waits for also leaves its messages here (their payloads by reference count), and
//! a read whose whole range is here takes them from memory.
//!
//! Correctness does not depend on it: ids are never reused within a topic, so whatever is held
//! is exactly what is stored under those ids. The two ways that could stop holding are
//! covered: a write that fails drops what it offered (its ids will be given again), and
//! retention drops the run after deleting pages (its ids may be gone). The run is offered
//! *before* the write, so retention, which can only see a page after the write that closed it,
//! always forgets after the offer.

use std::sync::{Arc, Mutex, PoisonError};

use msgstream::mq::ProducerMessage;

use crate::read::StoredMessage;

/// Most messages a write may have to be kept: the latency case is one message per write, and
/// larger writes are read in batches anyway, where one iterator is cheap per message.
const MAX_MESSAGES: usize = 16;

/// Most payload bytes a write may have to be kept (what one topic can hold on to, counted as
/// payload lengths: a payload sliced out of a larger buffer keeps that buffer alive with it).
const MAX_BYTES: usize = 64 << 10;

/// Messages `first..first + messages.len()` of one topic, as written (one allocation: the
/// writer pays for it on a write a consumer waits for).
#[derive(Clone)]
pub(crate) struct Run {
    first: u64,
    messages: Arc<[ProducerMessage]>,
}

/// The latest write a consumer was waiting for, if it was small (see the module docs).
///
/// Holds at most [`MAX_MESSAGES`] messages of at most [`MAX_BYTES`] payload bytes, kept until a
/// later such write, a failed write or a retention pass replaces or drops them.
#[derive(Default)]
pub(crate) struct RecentWrite {
    run: Mutex<Option<Run>>,
}

impl RecentWrite {
    /// Keeps `messages`, about to be written as ids `first..`, if they are small enough;
    /// otherwise leaves what is held (still exactly what is stored). Returns what it replaced:
    /// the writer drops that after publishing, so freeing the previous write's payloads is not
    /// on the path between the write and the consumer's wake-up.
    #[must_use = "drop the replaced run after publishing"]
    pub fn offer(&self, first: u64, messages: &[ProducerMessage]) -> Option<Run> {
        if messages.len() > MAX_MESSAGES
            || messages.iter().map(|m| m.payload.len()).sum::<usize>() > MAX_BYTES
        {
            return None;
        }
        let run = Run {
            first,
            messages: Arc::from(messages),
        };
        self.run
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .replace(run)
    }

    /// Drops what is held: after a failed write (its ids will be given to other messages) and
    /// after retention deleted pages.
    pub fn forget(&self) {
        *self.run.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// If every id of `from..upto` is held, passes up to `limit` of them, in order, to `take`
    /// and returns the id after the last one passed; otherwise `None` (read the store).
    pub fn read(
        &self,
        from: u64,
        upto: u64,
        limit: usize,
        mut take: impl FnMut(StoredMessage),
    ) -> Option<u64> {
        let run = self
            .run
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()?;
        let end = run.first + run.messages.len() as u64;
        if from < run.first || upto > end {
            return None;
        }
        let skip = usize::try_from(from - run.first).ok()?;
        let count = usize::try_from(upto - from).map_or(limit, |n| n.min(limit));
        for (id, message) in (from..).zip(run.messages.iter().skip(skip).take(count)) {
            take(StoredMessage {
                id,
                payload: message.payload.clone(),
                properties: message.properties.clone(),
            });
        }
        Some(from + count as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(n: usize, size: usize) -> Vec<ProducerMessage> {
        (0..n)
            .map(|i| ProducerMessage::new(vec![i as u8; size]))
            .collect()
    }

    fn read(recent: &RecentWrite, from: u64, upto: u64, limit: usize) -> Option<Vec<(u64, u8)>> {
        let mut out = Vec::new();
        let next = recent.read(from, upto, limit, |m| out.push((m.id, m.payload[0])))?;
        assert_eq!(
            next,
            from + out.len() as u64,
            "next follows what was passed"
        );
        Some(out)
    }

    #[test]
    fn serves_only_ranges_it_holds_whole() {
        let recent = RecentWrite::default();
        assert_eq!(read(&recent, 1, 2, 10), None, "nothing held");
        let _ = recent.offer(10, &messages(3, 8));
        assert_eq!(
            read(&recent, 10, 13, 10),
            Some(vec![(10, 0), (11, 1), (12, 2)])
        );
        assert_eq!(read(&recent, 11, 13, 1), Some(vec![(11, 1)]), "limit");
        assert_eq!(read(&recent, 12, 13, 10), Some(vec![(12, 2)]));
        assert_eq!(read(&recent, 9, 13, 10), None, "starts before the run");
        assert_eq!(read(&recent, 10, 14, 10), None, "ends after the run");
        recent.forget();
        assert_eq!(read(&recent, 10, 13, 10), None, "forgotten");
    }

    #[test]
    fn large_writes_are_not_kept_and_leave_the_previous_run() {
        let recent = RecentWrite::default();
        let _ = recent.offer(1, &messages(1, 8));
        let _ = recent.offer(2, &messages(MAX_MESSAGES + 1, 8));
        let _ = recent.offer(2, &messages(1, MAX_BYTES + 1));
        assert_eq!(read(&recent, 1, 2, 10), Some(vec![(1, 0)]));
        assert_eq!(read(&recent, 2, 3, 10), None);
        let _ = recent.offer(2, &messages(MAX_MESSAGES, MAX_BYTES / MAX_MESSAGES));
        assert_eq!(read(&recent, 1, 2, 10), None, "replaced by the later run");
        assert_eq!(read(&recent, 2, 4, 10), Some(vec![(2, 0), (3, 1)]));
    }
}
