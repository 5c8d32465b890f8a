//! The sparse time index: pure logic, no I/O.
//!
//! Message ids are cut into blocks of [`BLOCK`] consecutive ids. Each block that holds indexed
//! messages has one entry, its **high-water mark**: the largest timestamp
//! ([`msgstream::mq::ProducerMessage::timestamp`]) of every indexed message up to the block's
//! end. High-water marks never decrease from block to block, even though timestamps between
//! two timeticks are unordered, and the first message with timestamp ≥ `ts` lies in the first
//! block whose mark reaches `ts`. So a time search is a binary search over the marks (a
//! RocksDB read per step: O(log n)) and then one block of messages, read forward.
//!
//! A block's mark is written when the block is complete, by the append that writes its last
//! id, in the same `WriteBatch` as those messages, so it is exactly as durable as they are.
//! The open (newest, incomplete) block has no mark, and a missing mark reads as the largest
//! possible one, so a search that gets past the complete blocks reads the open block (at most
//! `BLOCK - 1` messages): exact after any crash, since no mark can lag behind the messages
//! that survived. A single-message append therefore writes one RocksDB record, not two, all
//! but once per block. The high-water mark the next block's mark starts from is kept in
//! memory; after an open, the first append works it out from the last mark and the open
//! block's messages (see [`crate::topics::open_block_high`]). A message sent without a
//! timestamp counts as the largest possible one, which keeps searches exact (they then read
//! from that message on); a mark of that value is not written (missing reads the same).
//! Retention deletes the marks of the blocks it deletes entirely, in the write that deletes
//! their messages.
//!
//! A topic written by a version without the index has no [`crate::keys::time_from_key`]
//! record: its index starts at the first append of this version, which writes that record,
//! and while older (unindexed) messages remain, a search reads from the oldest message (exact,
//! not fast). An entry that does not decode (damaged, or written by another version) is read
//! as the largest possible mark, with a warning: again exact, only longer.

/// Ids per index block: a time search reads at most this many messages after its binary
/// search. 256 keeps that read short (about one RocksDB data block of small messages) while the
/// index stays near 0.1 byte per message.
pub(crate) const BLOCK: u64 = 256;

/// Marks a topic whose index has not started (no message of this version yet).
pub(crate) const NOT_STARTED: u64 = u64::MAX;

/// The first id of the block holding `id`.
pub(crate) fn block_start(id: u64) -> u64 {
    id - id % BLOCK
}

/// The marks one append writes: for messages with ids from `first_id` on and the given
/// timestamps, starting from the topic's high-water mark `high` before them, calls `mark` with
/// the first id and mark of each block the append completes (writes the last id of), in block
/// order, allocating nothing. Returns the new high-water mark.
pub(crate) fn append_marks(
    first_id: u64,
    high: u64,
    timestamps: impl IntoIterator<Item = Option<u64>>,
    mut mark: impl FnMut(u64, u64),
) -> u64 {
    let mut high = high;
    for (id, timestamp) in (first_id..).zip(timestamps) {
        high = high.max(timestamp.unwrap_or(u64::MAX));
        if id % BLOCK == BLOCK - 1 {
            mark(block_start(id), high);
        }
    }
    high
}

/// The first block from `low` to `high` (block first ids, inclusive) whose mark reaches
/// `timestamp`, by binary search over `mark_of` (a missing or unreadable mark must be given as
/// `u64::MAX`); `None` when no block's does.
pub(crate) fn first_block_reaching<E>(
    low: u64,
    high: u64,
    timestamp: u64,
    mut mark_of: impl FnMut(u64) -> Result<u64, E>,
) -> Result<Option<u64>, E> {
    if low > high {
        return Ok(None);
    }
    let (mut lo, mut hi) = (low / BLOCK, high / BLOCK + 1);
    // Invariant: blocks below `lo` stay under `timestamp`; block `hi` (if in range) reaches it.
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if mark_of(mid * BLOCK)? >= timestamp {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    Ok((lo <= high / BLOCK).then_some(lo * BLOCK))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_append_marks_each_block_it_completes_with_its_running_maximum() {
        fn marks(first: u64, high: u64, stamps: &[Option<u64>]) -> (Vec<(u64, u64)>, u64) {
            let mut marks = Vec::new();
            let high = append_marks(first, high, stamps.iter().copied(), |b, m| {
                marks.push((b, m))
            });
            (marks, high)
        }
        // Ids 250..=549: blocks 0 and 256 complete, 512 stays open.
        let stamps: Vec<Option<u64>> = (0..300)
            .map(|i| Some(if i == 3 { 900 } else { i }))
            .collect();
        assert_eq!(marks(250, 5, &stamps), (vec![(0, 900), (256, 900)], 900));
        let stamps: Vec<Option<u64>> = (0..300).map(|i| Some(i + 10)).collect();
        assert_eq!(
            marks(250, 5, &stamps),
            (vec![(0, 15), (256, 271)], 309),
            "a block's mark is the maximum up to its last message"
        );
        assert_eq!(
            marks(1, 0, &[Some(3), None, Some(4)]),
            (vec![], u64::MAX),
            "no timestamp: the largest possible; no block completed"
        );
        assert_eq!(
            marks(255, 7, &[Some(3)]),
            (vec![(0, 7)], 7),
            "the last id of a block"
        );
        assert_eq!(marks(7, 42, &[]), (vec![], 42));
    }

    /// Against a linear scan, over marks that rise with repeats (as blocks of one tick do).
    #[test]
    fn binary_search_finds_the_first_block_reaching_a_time() {
        let marks: Vec<u64> = (0..40u64).map(|b| (b / 3) * 10 + 5).collect();
        let mark_of = |id: u64| Ok::<_, ()>(marks[(id / BLOCK) as usize]);
        let (low, high) = (3 * BLOCK + 17, 39 * BLOCK + 200);
        for timestamp in 0..160 {
            let expected = (3..40u64).find(|&b| marks[b as usize] >= timestamp);
            let found = first_block_reaching(low, high, timestamp, mark_of).expect("search");
            assert_eq!(found, expected.map(|b| b * BLOCK), "timestamp {timestamp}");
        }
        assert_eq!(first_block_reaching(10, 5, 0, mark_of), Ok(None));
    }
}
