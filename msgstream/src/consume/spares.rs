//! [`Spares`]: the emptied vectors of a channel's batches, handed back to its pump for the
//! next batches.
//!
//! Why: a pump allocates a batch's vectors (the messages' block, their `end_ts`s and their ack
//! tokens) on its worker, and the tt stream empties them on the application's task, usually on
//! another worker; freeing them there contends with the pump's next allocation in the
//! allocator. Handed back instead, the same vectors go round.
//!
//! Bounded by room, not by count: the spares of each kind hold room for at most as many
//! messages as the channel's queue, so a channel never keeps more memory aside than a full
//! queue of its batches takes (which it needed a moment before: a pump refills its queue in
//! bursts, and the stream drains it in bursts, so spares come back many at a time). Whatever
//! does not fit is dropped. A stream that hands nothing back (the plain stream takes its
//! batches apart message by message) finds no spares, and its pumps allocate as before.

use std::collections::VecDeque;
use std::sync::Mutex;

use super::batch::Batch;
use super::commit::AckToken;
use crate::msg::TsMsg;

/// The spare batch vectors of one channel, shared by its pump (which takes) and the stream
/// reading its batches (which gives back).
#[derive(Debug)]
pub(crate) struct Spares {
    /// Room (in messages) the spares of each kind may hold together.
    limit: usize,
    kept: Mutex<Kept>,
}

#[derive(Debug, Default)]
struct Kept {
    /// The room a whole run takes, as the pump last expected it: a spare with less is not
    /// kept, since making it bigger would copy it (`realloc` copies an empty vector's whole
    /// block all the same).
    wanted: usize,
    msgs: Shelf<Vec<TsMsg>>,
    ends: Shelf<Vec<u64>>,
    tokens: Shelf<VecDeque<AckToken>>,
}

/// Spares of one kind, and the room they hold together.
#[derive(Debug)]
struct Shelf<V> {
    spares: Vec<V>,
    room: usize,
}

impl<V> Default for Shelf<V> {
    fn default() -> Self {
        Shelf {
            spares: Vec::new(),
            room: 0,
        }
    }
}

impl<V> Shelf<V> {
    /// Keeps `spare` (of room `capacity`) if it is empty, has room for `wanted` messages (and
    /// for one), and fits under `limit`.
    fn put(&mut self, spare: V, empty: bool, capacity: usize, wanted: usize, limit: usize) {
        if empty && capacity >= wanted.max(1) && self.room + capacity <= limit {
            self.room += capacity;
            self.spares.push(spare);
        }
    }

    fn take(&mut self, capacity: impl Fn(&V) -> usize) -> Option<V> {
        let spare = self.spares.pop()?;
        self.room -= capacity(&spare);
        Some(spare)
    }
}

impl Spares {
    /// No spares yet, room for `limit` messages in each kind (the channel's queue capacity).
    pub(crate) fn new(limit: usize) -> Self {
        Spares {
            limit,
            kept: Mutex::new(Kept::default()),
        }
    }

    /// An empty batch of `channel` in `generation` with room for `capacity` messages, on spare
    /// vectors where there are some (which may hold more). `run` is the room the pump expects
    /// a whole run to take (0: not known yet); spares with less are not kept from now on.
    pub(crate) fn batch<S: Default>(
        &self,
        channel: usize,
        generation: u64,
        capacity: usize,
        run: usize,
    ) -> Batch<S> {
        let mut batch = Batch::new(channel, generation, 0);
        if let Ok(mut kept) = self.kept.lock() {
            if run > 0 {
                kept.wanted = run;
            }
            if let Some(msgs) = kept.msgs.take(Vec::capacity) {
                batch.msgs = VecDeque::from(msgs);
            }
            if let Some(ends) = kept.ends.take(Vec::capacity) {
                batch.ends = VecDeque::from(ends);
            }
            if let Some(tokens) = kept.tokens.take(VecDeque::capacity) {
                batch.tokens = tokens;
            }
        }
        batch.msgs.reserve(capacity);
        batch.ends.reserve(capacity);
        batch.tokens.reserve(capacity);
        batch
    }

    /// Hands back a batch's message block and `end_ts`s, emptied (as the aligner returns
    /// them); anything not empty is dropped, never reused.
    pub(crate) fn give_back(&self, msgs: Vec<TsMsg>, ends: Vec<u64>) {
        if let Ok(mut kept) = self.kept.lock() {
            let (empty, capacity) = (msgs.is_empty(), msgs.capacity());
            let wanted = kept.wanted;
            kept.msgs.put(msgs, empty, capacity, wanted, self.limit);
            let (empty, capacity) = (ends.is_empty(), ends.capacity());
            kept.ends.put(ends, empty, capacity, wanted, self.limit);
        }
    }

    /// Hands back a batch's ack tokens, emptied.
    pub(crate) fn give_back_tokens(&self, tokens: VecDeque<AckToken>) {
        if let Ok(mut kept) = self.kept.lock() {
            let (empty, capacity) = (tokens.is_empty(), tokens.capacity());
            let wanted = kept.wanted;
            kept.tokens.put(tokens, empty, capacity, wanted, self.limit);
        }
    }

    /// Spares kept, of each kind: messages, `end_ts`s, tokens.
    #[cfg(test)]
    fn counts(&self) -> (usize, usize, usize) {
        self.kept
            .lock()
            .map(|k| {
                (
                    k.msgs.spares.len(),
                    k.ends.spares.len(),
                    k.tokens.spares.len(),
                )
            })
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::{InsertRequest, MsgBody};

    #[test]
    fn a_given_back_block_is_the_next_batch_block() {
        let spares = Spares::new(1024);
        let mut msgs = Vec::with_capacity(64);
        msgs.push(TsMsg::new(MsgBody::Insert(InsertRequest::default())));
        msgs.clear();
        let block = msgs.as_ptr();
        spares.give_back(msgs, Vec::with_capacity(64));
        spares.give_back_tokens(VecDeque::with_capacity(64));
        assert_eq!(spares.counts(), (1, 1, 1));
        let batch = spares.batch::<()>(2, 5, 10, 0);
        assert_eq!((batch.channel, batch.generation, batch.len()), (2, 5, 0));
        assert_eq!(
            batch.msgs.as_slices().0.as_ptr(),
            block,
            "the same block, no allocation"
        );
        assert!(batch.msgs.capacity() >= 64 && batch.tokens.capacity() >= 64);
        assert_eq!(spares.counts(), (0, 0, 0));
        // None left: a fresh batch, sized as asked.
        assert!(spares.batch::<()>(2, 5, 10, 0).msgs.capacity() >= 10);
    }

    #[test]
    fn keeps_only_empty_allocated_vectors_within_the_queue_room() {
        let spares = Spares::new(100);
        spares.give_back(vec![TsMsg::time_tick(1)], vec![1]);
        spares.give_back(Vec::new(), Vec::new());
        assert_eq!(
            spares.counts(),
            (0, 0, 0),
            "nothing held or unallocated is kept"
        );
        for _ in 0..10 {
            spares.give_back(Vec::with_capacity(30), Vec::with_capacity(30));
            spares.give_back_tokens(VecDeque::with_capacity(30));
        }
        assert_eq!(
            spares.counts(),
            (3, 3, 3),
            "3 × 30 fit in 100, a fourth does not"
        );
        // Taking one makes room for one again.
        drop(spares.batch::<()>(0, 0, 1, 0));
        spares.give_back(Vec::with_capacity(30), Vec::new());
        assert_eq!(spares.counts(), (3, 2, 2));
        // Once the pump expects runs of 40, a spare with less would have to grow: dropped.
        drop(spares.batch::<()>(0, 0, 10, 40));
        spares.give_back(Vec::with_capacity(30), Vec::with_capacity(40));
        assert_eq!(spares.counts(), (2, 2, 1));
    }
}
