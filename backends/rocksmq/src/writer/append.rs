//! One commit's `WriteBatch`: messages, their properties and the records of the pages they
//! close, appended at their topics' tails.

use std::ops::Range;

use msgstream::mq::ProducerMessage;
use msgstream::Result;

use super::now_ms;
use crate::codec::{encode_properties, PageMark, PageRecord};
use crate::keys::{
    message_key, page_mark_key, time_from_key, time_mark_key, CF_MESSAGES, CF_META, CF_PAGES,
    CF_PROPERTIES, MESSAGE_KEY_LEN,
};
use crate::store::{db_error, is_stall, Db};
use crate::time_index;
use crate::topics::{open_block_high, Tail, TopicState};

/// The `WriteBatch` size of the messages of `batches` (header, then per message its record's
/// tag, column family, key and payload with their lengths), properties and page records aside:
/// a batch reserved at that size is allocated once, where one grown put by put is reallocated
/// (three times for a single 128-byte message), and those allocations were the costliest part
/// of a single-message append after RocksDB's own write.
pub(super) fn batch_bytes<'m>(batches: impl IntoIterator<Item = &'m [ProducerMessage]>) -> usize {
    /// `WriteBatch`'s header: sequence number and count.
    const HEADER: usize = 12;
    /// Tag, column-family id and the two length varints, at most.
    const RECORD: usize = 1 + 5 + 5 + 5;
    /// Time index marks (tag, column family, key and value with their lengths): one for each
    /// block an append completes (see [`crate::time_index`]); room for two.
    const TIME_MARKS: usize = 2 * (RECORD + 17 + 8);
    let messages = batches.into_iter().flatten();
    HEADER
        + TIME_MARKS
        + messages
            .map(|message| RECORD + MESSAGE_KEY_LEN + message.payload.len())
            .sum::<usize>()
}

/// A `WriteBatch` being filled for one write.
pub(super) struct Appender<'a, 'db> {
    db: &'a Db<'db>,
    batch: rocksdb::WriteBatch,
    messages_cf: &'a rocksdb::ColumnFamily,
    /// Looked up once: the time index marks go into it.
    meta_cf: &'a rocksdb::ColumnFamily,
    page_size: u64,
}

impl<'a, 'db> Appender<'a, 'db> {
    /// An empty batch of `capacity` bytes (see [`batch_bytes`]) closing pages at `page_size`.
    pub fn new(db: &'a Db<'db>, capacity: usize, page_size: u64) -> Result<Appender<'a, 'db>> {
        Ok(Appender {
            db,
            batch: rocksdb::WriteBatch::with_capacity_bytes(capacity),
            messages_cf: db.cf(CF_MESSAGES)?,
            meta_cf: db.cf(CF_META)?,
            page_size,
        })
    }

    /// Adds `messages` of `topic` (checked live by the caller) at `tail`, which it moves past
    /// them, with the record of any page they close and the topic's [`PageMark`] when one is
    /// due; returns their ids. An error fails the whole write.
    pub fn append(
        &mut self,
        topic: &TopicState,
        tail: &mut Tail,
        messages: &[ProducerMessage],
    ) -> Result<Range<u64>> {
        let before = *tail;
        for message in messages {
            let id = tail.next_id;
            let key = message_key(topic.id, id);
            self.batch.put_cf(self.messages_cf, key, &message.payload);
            let mut bytes = message.payload.len() as u64;
            if !message.properties.is_empty() {
                topic.note_properties();
                let encoded = encode_properties(&message.properties);
                bytes += encoded.len() as u64;
                self.batch.put_cf(self.db.cf(CF_PROPERTIES)?, key, encoded);
            }
            tail.next_id += 1;
            tail.page_bytes += bytes;
            if tail.page_bytes >= self.page_size {
                let page = PageRecord {
                    last_id: id,
                    bytes: tail.page_bytes,
                    closed_ms: now_ms(),
                };
                self.batch.put_cf(
                    self.db.cf(CF_PAGES)?,
                    message_key(topic.id, tail.page_first),
                    page.encode(),
                );
                tail.page_first = tail.next_id;
                tail.page_bytes = 0;
            }
        }
        if let Some(mark) = page_mark(before, *tail) {
            self.batch
                .put_cf(self.meta_cf, page_mark_key(topic.id), mark.encode());
        }
        self.index_times(topic, before.next_id, tail, messages)?;
        Ok(before.next_id..tail.next_id)
    }

    /// Adds the time index marks of the blocks `messages` (ids from `first_id` on) complete, and
    /// the index's start record with a topic's first indexed append (see
    /// [`crate::time_index`]). The first append after an open works out the high-water mark
    /// it continues from, and removes a mark its open block may hold from an older version,
    /// which marked blocks before they were complete.
    fn index_times(
        &mut self,
        topic: &TopicState,
        first_id: u64,
        tail: &mut Tail,
        messages: &[ProducerMessage],
    ) -> Result<()> {
        if messages.is_empty() {
            return Ok(());
        }
        let meta = self.meta_cf;
        if !tail.time_high_known {
            tail.time_high = open_block_high(self.db, topic, tail)?;
            tail.time_high_known = true;
            let open = time_index::block_start(first_id);
            if open < first_id {
                self.batch.delete_cf(meta, time_mark_key(topic.id, open));
            }
        }
        if tail.time_from == time_index::NOT_STARTED {
            tail.time_from = first_id;
            self.batch
                .put_cf(meta, time_from_key(topic.id), first_id.to_be_bytes());
        }
        let stamps = messages.iter().map(|m| m.timestamp);
        let batch = &mut self.batch;
        tail.time_high =
            time_index::append_marks(first_id, tail.time_high, stamps, |block, mark| {
                // A missing mark reads as the largest possible: that one need not be written.
                if mark != u64::MAX {
                    batch.put_cf(meta, time_mark_key(topic.id, block), mark.to_be_bytes());
                }
            });
        Ok(())
    }

    /// Writes the batch with the write options of the appender's `Db`. `Ok(false)`: RocksDB
    /// refused a `no_slowdown` write it would have stalled, and nothing was written.
    pub fn write(self) -> Result<bool> {
        match self.db.db.write_opt(self.batch, self.db.write_options) {
            Ok(()) => Ok(true),
            Err(e) if is_stall(&e) => Ok(false),
            Err(e) => Err(db_error("write", e)),
        }
    }
}

/// The mark due after an append moved a topic's tail from `before` to `after`: one each time the
/// open page grows past another multiple of [`PageMark::INTERVAL`] (a page the append closed
/// counts from zero again), so a 128-byte message stream writes one every 8,192 messages.
fn page_mark(before: Tail, after: Tail) -> Option<PageMark> {
    let counted = if after.page_first == before.page_first {
        before.page_bytes
    } else {
        0
    };
    (after.page_bytes / PageMark::INTERVAL > counted / PageMark::INTERVAL).then_some(PageMark {
        page_first: after.page_first,
        next_id: after.next_id,
        bytes: after.page_bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = PageMark::INTERVAL;

    fn tail(page_first: u64, next_id: u64, page_bytes: u64) -> Tail {
        Tail {
            time_from: crate::time_index::NOT_STARTED,
            time_high: 0,
            time_high_known: true,
            next_id,
            page_first,
            page_bytes,
        }
    }

    #[test]
    fn a_mark_is_due_each_time_the_open_page_passes_an_interval() {
        assert_eq!(page_mark(tail(1, 5, 10), tail(1, 9, MIB - 1)), None);
        assert_eq!(
            page_mark(tail(1, 5, MIB - 1), tail(1, 6, MIB)),
            Some(PageMark {
                page_first: 1,
                next_id: 6,
                bytes: MIB
            })
        );
        assert_eq!(page_mark(tail(1, 6, MIB), tail(1, 7, 2 * MIB - 1)), None);
        assert!(page_mark(tail(1, 6, MIB), tail(1, 9, 5 * MIB)).is_some());
    }

    #[test]
    fn a_page_closed_by_the_append_counts_from_zero() {
        assert_eq!(page_mark(tail(1, 5, 3 * MIB), tail(40, 42, MIB / 2)), None);
        assert_eq!(
            page_mark(tail(1, 5, 3 * MIB), tail(40, 42, MIB)),
            Some(PageMark {
                page_first: 40,
                next_id: 42,
                bytes: MIB
            })
        );
    }
}
