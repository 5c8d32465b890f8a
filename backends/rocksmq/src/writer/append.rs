//! One commit's `WriteBatch`: messages, their properties and the records of the pages they
//! close, appended at their topics' tails.

use std::ops::Range;

use msgstream::mq::ProducerMessage;
use msgstream::Result;

use super::now_ms;
use crate::codec::{encode_properties, PageRecord};
use crate::keys::{message_key, CF_MESSAGES, CF_PAGES, CF_PROPERTIES, MESSAGE_KEY_LEN};
use crate::store::Db;
use crate::topics::{Tail, TopicState};

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
    let messages = batches.into_iter().flatten();
    HEADER
        + messages
            .map(|message| RECORD + MESSAGE_KEY_LEN + message.payload.len())
            .sum::<usize>()
}

/// A `WriteBatch` being filled for one write.
pub(super) struct Appender<'a, 'db> {
    db: &'a Db<'db>,
    batch: rocksdb::WriteBatch,
    messages_cf: &'a rocksdb::ColumnFamily,
    page_size: u64,
}

impl<'a, 'db> Appender<'a, 'db> {
    /// An empty batch of `capacity` bytes (see [`batch_bytes`]) closing pages at `page_size`.
    pub fn new(db: &'a Db<'db>, capacity: usize, page_size: u64) -> Result<Appender<'a, 'db>> {
        Ok(Appender {
            db,
            batch: rocksdb::WriteBatch::with_capacity_bytes(capacity),
            messages_cf: db.cf(CF_MESSAGES)?,
            page_size,
        })
    }

    /// Adds `messages` of `topic` (checked live by the caller) at `tail`, which it moves past
    /// them, with the record of any page they close; returns their ids. An error fails the
    /// whole write.
    pub fn append(
        &mut self,
        topic: &TopicState,
        tail: &mut Tail,
        messages: &[ProducerMessage],
    ) -> Result<Range<u64>> {
        let first = tail.next_id;
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
        Ok(first..tail.next_id)
    }

    /// Writes the batch with the queue's durability.
    pub fn write(self) -> Result<()> {
        self.db.write(self.batch)
    }
}
