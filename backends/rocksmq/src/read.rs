//! Reading messages in id order, and cursors that wait for new ones.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use msgstream::mq::{MessageId, Properties};
use msgstream::{Error, Result};

use crate::codec::decode_properties;
use crate::keys::{message_id_from_key, message_key, topic_prefix, CF_MESSAGES, CF_PROPERTIES};
use crate::read_placement::{thread_disk_read_bytes, ReadPlacement};
use crate::store::{db_error, Db, Store};
use crate::topics::TopicState;

/// Whether this thread runs a multi-thread tokio runtime's tasks, where
/// `tokio::task::block_in_place` can take a blocking call off the async workers (on a
/// current-thread runtime it cannot, and would panic).
fn on_a_multi_thread_runtime() -> bool {
    tokio::runtime::Handle::try_current()
        .is_ok_and(|runtime| runtime.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread)
}

/// A message as stored: id, payload and properties.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredMessage {
    /// Its id in the topic.
    pub id: u64,
    /// Payload as produced.
    pub payload: Bytes,
    /// Properties as produced.
    pub properties: Properties,
}

/// Most visible messages a read fetches by key instead of through an iterator (see
/// [`ReadScratch::read_range`]).
const POINT_READS_MAX: u64 = 4;

/// Payload bytes read into one shared buffer before a read stops early.
const READ_CHUNK_BYTES: usize = 4 << 20;

/// Reads expecting at least this many messages read table files ahead by
/// [`BACKLOG_READAHEAD_BYTES`] (see [`backlog_read_options`]).
const READAHEAD_MIN_MESSAGES: usize = 64;

/// How far ahead a backlog read's iterator reads table files: 64 KiB, the best for 128 B and
/// 1 KiB messages alike in the consume bench (larger readahead no longer fits the core's cache).
/// Part of [`backlog_scan_options`].
pub const BACKLOG_READAHEAD_BYTES: usize = 64 << 10;

/// Memory a cursor keeps between reads, so that a steady consumer allocates nothing per read.
///
/// The payloads of one read share a single buffer: the iterator pass copies them into it back
/// to back, and each message's `Bytes` is split off it afterwards, so a read costs one
/// allocation (more only if later payloads outgrow the estimate made from the first), not one
/// per message. The cursor keeps the buffer's empty tail; once every message split off it has
/// been dropped, the next read reclaims the whole buffer in place (memory already mapped and
/// in cache). While messages are still held, the next read starts a new buffer. So a cursor
/// keeps at most one read's buffer (≤ 4 MiB plus one payload) alive beyond what the caller
/// holds, and room for the ids and lengths of its largest read (40 bytes per message: 40 KiB
/// for the consumers' default buffer of 1024).
#[derive(Debug, Default)]
pub(crate) struct ReadScratch {
    buffer: BytesMut,
    /// The messages of the iterator pass of a read, whose payloads lie back to back at the end
    /// of `buffer`; emptied by each read's second pass, kept for its capacity.
    spans: Vec<Span>,
}

/// A message read by the iterator pass of [`ReadScratch::read_range`], payload aside.
#[derive(Debug)]
struct Span {
    id: u64,
    len: usize,
    properties: Properties,
}

impl ReadScratch {
    /// Reads up to `limit` visible messages of `topic` from id `from` on, in id order, appending
    /// `make(message)` for each to `out` (the caller builds its own message type in place: no
    /// intermediate copy). Returns the id after the last one read, or the topic's visible end
    /// when the range held no more than that (ids removed by retention are skipped, never
    /// waited for).
    pub(crate) fn read_range<T>(
        &mut self,
        db: &Db<'_>,
        topic: &TopicState,
        from: u64,
        limit: usize,
        out: &mut Vec<T>,
        mut make: impl FnMut(StoredMessage) -> T,
    ) -> Result<u64> {
        // `visible` first: the properties flag is raised before the ids that need it are.
        let upto = topic.visible();
        let with_properties = topic.has_properties();
        if from >= upto || limit == 0 {
            return Ok(from);
        }
        if let Some(next) = topic.recent.read(from, upto, limit, |m| out.push(make(m))) {
            return Ok(next);
        }
        let first = out.len();
        // A consumer that keeps up is woken for the one or few messages just written: those
        // are in the memtable, and a lookup by key finds each there without building an
        // iterator over every level and seeking each (the larger part of a tailing read's
        // cost). Properties need their own column family, so their topics take the iterator.
        let from = if upto - from <= POINT_READS_MAX && !with_properties {
            let next = self.read_by_key(db, topic, from..upto, limit, out, &mut make)?;
            if next >= upto || out.len() - first == limit {
                return Ok(next);
            }
            // A missing id (retention removed it): the iterator below skips the gap.
            next
        } else {
            from
        };
        let start = message_key(topic.id, from);
        let end = message_key(topic.id, upto);
        // Ids are dense apart from retention gaps: the range bounds the read's size.
        let expected = usize::try_from(upto - from).map_or(limit, |n| n.min(limit));
        // The messages iterator stops at `end` by the loop's own key check (the key is read and
        // parsed anyway), which is cheaper than RocksDB comparing every key with an upper bound;
        // it reads at most one key past the range. Properties are rare: their iterator exists
        // only for topics that have any, and is advanced only to the ids that have them.
        let mut messages = db
            .db
            .raw_iterator_cf_opt(db.cf(CF_MESSAGES)?, backlog_read_options(expected));
        messages.seek(start);
        let mut properties = if with_properties {
            let mut options = rocksdb::ReadOptions::default();
            options.set_iterate_upper_bound(end);
            let mut iter = db.db.raw_iterator_cf_opt(db.cf(CF_PROPERTIES)?, options);
            iter.seek(start);
            Some(iter)
        } else {
            None
        };
        let property_id = |it: &rocksdb::DBRawIterator<'_>| {
            it.key().and_then(|k| message_id_from_key(topic.id, k))
        };
        let mut next_property = properties.as_ref().and_then(property_id);
        let (data, spans) = (&mut self.buffer, &mut self.spans);
        // A read that failed part-way left its payloads behind.
        spans.clear();
        data.clear();
        // Looked up by key above, when the range began with a few new ids.
        let by_key = out.len() - first;
        let mut bytes = 0;
        let mut next = upto;
        let prefix = topic_prefix(topic.id);
        while let (Some(key), Some(value)) = (messages.key(), messages.value()) {
            // `key >= end`, without comparing 16 bytes through a `memcmp` call per message:
            // keys from `start` on with another prefix are past this topic, and keys of this
            // topic compare as their big-endian ids do.
            let id = match key.split_first_chunk::<8>() {
                Some((head, rest)) if *head == prefix => match <[u8; 8]>::try_from(rest) {
                    Ok(id) => u64::from_be_bytes(id),
                    Err(_) if key >= end.as_slice() => break,
                    Err(_) => {
                        return Err(Error::Corrupt {
                            channel: topic.name.clone(),
                            id: MessageId::from_backend_bytes(key),
                            detail: "malformed message key".into(),
                        })
                    }
                },
                _ => break,
            };
            if id >= upto {
                break;
            }
            let read = by_key + spans.len();
            if read == limit || bytes >= READ_CHUNK_BYTES {
                next = id;
                break;
            }
            if spans.is_empty() {
                let expected = expected.min(1024);
                out.reserve(expected);
                spans.reserve(expected);
                data.reserve(value.len().saturating_mul(expected).min(READ_CHUNK_BYTES));
            }
            let mut props = Properties::new();
            if let Some(iter) = properties.as_mut() {
                while next_property.is_some_and(|p| p < id) {
                    iter.next();
                    next_property = property_id(iter);
                }
                if next_property == Some(id) {
                    if let Some(value) = iter.value() {
                        props = decode_properties(value).map_err(|e| Error::Corrupt {
                            channel: topic.name.clone(),
                            id: MessageId::from_u64(id),
                            detail: format!("its properties record does not decode: {e}"),
                        })?;
                    }
                }
            }
            bytes += value.len();
            data.extend_from_slice(value);
            spans.push(Span {
                id,
                len: value.len(),
                properties: props,
            });
            messages.next();
        }
        messages
            .status()
            .map_err(|e| db_error("reading messages", e))?;
        if let Some(iter) = &properties {
            iter.status()
                .map_err(|e| db_error("reading message properties", e))?;
        }
        // The second pass: the payloads are slices of one frozen buffer, and the caller's
        // messages are built in a loop of their own. Interleaved with the iterator's calls, the
        // building code and RocksDB's evicted each other from the instruction cache (ten more
        // misses per message than a plain iterate-and-copy loop, by cachegrind).
        let mut payloads = data.split().freeze();
        for span in spans.drain(..) {
            out.push(make(StoredMessage {
                id: span.id,
                payload: payloads.split_to(span.len),
                properties: span.properties,
            }));
        }
        Ok(next)
    }

    /// Reads the ids of `range` (at most `limit`) one lookup each, stopping at the first id
    /// that is missing (removed by retention). Returns the id after the last one read.
    fn read_by_key<T>(
        &mut self,
        db: &Db<'_>,
        topic: &TopicState,
        range: std::ops::Range<u64>,
        limit: usize,
        out: &mut Vec<T>,
        make: &mut impl FnMut(StoredMessage) -> T,
    ) -> Result<u64> {
        let messages = db.cf(CF_MESSAGES)?;
        let options = rocksdb::ReadOptions::default();
        let mut id = range.start;
        let mut read = 0;
        while id < range.end && read < limit {
            let value = db
                .db
                .get_pinned_cf_opt(messages, message_key(topic.id, id), &options)
                .map_err(|e| db_error("reading a message", e))?;
            let Some(value) = value else {
                break;
            };
            out.push(make(stored(
                &mut self.buffer,
                id,
                &value,
                Properties::new(),
            )));
            id += 1;
            read += 1;
        }
        Ok(id)
    }
}

/// The read options of an iterator over up to `expected` messages.
///
/// RocksDB starts reading ahead in a table file only after an iterator has read two blocks of
/// it in a row, and that state lives in the iterator. Each read makes an iterator of its own
/// (see [`Cursor`]), so without a fixed readahead a consumer working through a backlog would
/// start every batch from single block reads. Cached blocks and the memtable are read from no
/// file, so a tailing consumer pays nothing for it; a read expecting few messages keeps
/// RocksDB's automatic readahead, so as not to read 64 KiB for a handful of them.
///
/// A backlog read also leaves RocksDB's block cache alone ([`backlog_scan_options`]).
fn backlog_read_options(expected: usize) -> rocksdb::ReadOptions {
    if expected >= READAHEAD_MIN_MESSAGES {
        backlog_scan_options()
    } else {
        rocksdb::ReadOptions::default()
    }
}

/// The read options of a backlog read: [`BACKLOG_READAHEAD_BYTES`] of readahead, and the
/// blocks read not put into RocksDB's block cache. A consumer reads its backlog once, in order,
/// so its blocks are not read again from the cache; filling it with them only evicted what
/// tailing consumers and look-ups read again, and cost every read an insert (in the
/// timetick bench, reading 256 channels at once on two threads, that made the reads take
/// about 40 % longer than the same reads on one thread). The next backlog read decompresses again
/// the one block where the last stopped. Public so that benchmarks can give raw RocksDB the
/// same options.
pub fn backlog_scan_options() -> rocksdb::ReadOptions {
    let mut options = rocksdb::ReadOptions::default();
    options.set_readahead_size(BACKLOG_READAHEAD_BYTES);
    options.fill_cache(false);
    options
}

/// Copies a stored value into the read's shared buffer and splits it off as the payload of
/// message `id` (see [`ReadScratch`]), for the reads by key.
#[inline(always)]
fn stored(buffer: &mut BytesMut, id: u64, value: &[u8], properties: Properties) -> StoredMessage {
    buffer.extend_from_slice(value);
    StoredMessage {
        id,
        payload: buffer.split().freeze(),
        properties,
    }
}

/// A position in one topic that can wait for messages to appear after it.
///
/// Non-durable on its own: consumer groups persist their position separately. Waiting registers
/// on the topic's `Notify` before checking the visible id, and the writer notifies after raising
/// it, so a waiter wakes as soon as a message is visible, never misses one and never polls.
pub(crate) struct Cursor {
    pub topic: Arc<TopicState>,
    /// The next id to return.
    pub next: u64,
    scratch: ReadScratch,
    /// Where its backlog reads run.
    placement: ReadPlacement,
}

impl std::fmt::Debug for Cursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cursor")
            .field("topic", &self.topic.name)
            .field("next", &self.next)
            .finish()
    }
}

impl Cursor {
    pub fn new(topic: Arc<TopicState>, next: u64) -> Cursor {
        Cursor {
            topic,
            next,
            scratch: ReadScratch::default(),
            placement: ReadPlacement::default(),
        }
    }

    /// Reads up to `limit` visible messages from the cursor on into `out` (built by `make`),
    /// advancing it. Never waits.
    pub fn read<T>(
        &mut self,
        store: &Store,
        limit: usize,
        out: &mut Vec<T>,
        make: impl FnMut(StoredMessage) -> T,
    ) -> Result<()> {
        self.topic.check_live()?;
        let (topic, from, scratch) = (&self.topic, self.next, &mut self.scratch);
        self.next = store.with(|db| scratch.read_range(db, topic, from, limit, out, make))?;
        Ok(())
    }

    /// Waits for at least one message, then reads up to `limit` (built by `make`). Cancel-safe:
    /// the cursor moves only in the synchronous read after a completed wait.
    pub async fn next_batch<T>(
        &mut self,
        store: &Store,
        limit: usize,
        mut make: impl FnMut(StoredMessage) -> T,
    ) -> Result<Vec<T>> {
        let mut out = Vec::new();
        loop {
            if self.reads_a_backlog(limit) && on_a_multi_thread_runtime() {
                self.read_backlog(store, limit, &mut out, &mut make)?;
            } else {
                self.read(store, limit, &mut out, &mut make)?;
            }
            if !out.is_empty() {
                return Ok(out);
            }
            self.wait(store).await?;
        }
    }

    /// A backlog read, which goes to table files and may wait for the disk: on the async
    /// worker while this cursor's reads find their files in memory, else with the worker's
    /// other tasks handed to another thread for its time (see [`ReadPlacement`]).
    fn read_backlog<T>(
        &mut self,
        store: &Store,
        limit: usize,
        out: &mut Vec<T>,
        make: impl FnMut(StoredMessage) -> T,
    ) -> Result<()> {
        let before = thread_disk_read_bytes();
        let read = if before.is_some() && !self.placement.off_worker() {
            self.read(store, limit, out, make)
        } else {
            tokio::task::block_in_place(|| self.read(store, limit, out, make))
        };
        // Measured on this thread: `block_in_place` runs the read here too.
        let fetched = before
            .zip(thread_disk_read_bytes())
            .map(|(before, after)| after > before);
        self.placement.record(fetched);
        read
    }

    /// Whether the next read of up to `limit` messages is a backlog read: at least
    /// [`READAHEAD_MIN_MESSAGES`] visible and asked for, read through table files rather than
    /// from memory or by key.
    fn reads_a_backlog(&self, limit: usize) -> bool {
        let ahead = self.topic.visible().saturating_sub(self.next);
        limit >= READAHEAD_MIN_MESSAGES && ahead >= READAHEAD_MIN_MESSAGES as u64
    }

    /// Waits until a message at or after the cursor is visible. Cancel-safe: nothing is consumed
    /// while waiting. `Error::Closed` once the store closes, `InvalidArgument` if the topic is
    /// destroyed.
    pub async fn wait(&mut self, store: &Store) -> Result<()> {
        loop {
            let notified = self.topic.wakeup.notified();
            let mut notified = std::pin::pin!(notified);
            // Counted (so writers notify) and registered from here on: a notification after
            // the checks below is not lost.
            let _waiting = self.topic.waiting();
            notified.as_mut().enable();
            if store.is_closed() {
                return Err(Error::Closed("rocksmq client"));
            }
            self.topic.check_live()?;
            if self.next < self.topic.visible() {
                return Ok(());
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use msgstream::mq::ProducerMessage;

    use super::*;
    use crate::topics::FIRST_MESSAGE_ID;
    use crate::{Rocksmq, RocksmqOptions};

    /// Reads everything `cursor` can see now, `limit` at a time, as (id, payload) pairs.
    fn drain(engine: &Rocksmq, cursor: &mut Cursor, limit: usize) -> Vec<(u64, Vec<u8>)> {
        let mut all = Vec::new();
        loop {
            let mut out = Vec::new();
            cursor
                .read(&engine.inner.store, limit, &mut out, |m| {
                    (m.id, m.payload.to_vec())
                })
                .expect("read");
            if out.is_empty() {
                return all;
            }
            all.extend(out);
        }
    }

    /// A read that fails part-way (a corrupt properties record) leaves nothing behind: a later
    /// read elsewhere, stopping before the damage, hands out the stored payloads, not the
    /// failed read's leftovers.
    #[tokio::test]
    async fn a_read_failing_part_way_leaves_no_payload_behind() {
        let dir = tempfile::tempdir().expect("tempdir");
        let engine = Rocksmq::open(RocksmqOptions::new(dir.path())).expect("open");
        let topic = engine.topic_or_create("t").expect("topic");
        let messages = (0..6u8)
            .map(|i| {
                let mut message = ProducerMessage::new(vec![b'a' + i; 3]);
                message.properties.insert("k".into(), i.to_string());
                message
            })
            .collect();
        engine.produce("t", messages).await.expect("produce");
        let damaged = FIRST_MESSAGE_ID + 4;
        engine
            .inner
            .store
            .with(|db| {
                let key = message_key(topic.id, damaged);
                db.db
                    .put_cf(db.cf(CF_PROPERTIES)?, key, [0xff])
                    .map_err(|e| db_error("damage", e))
            })
            .expect("damage a properties record");
        let mut cursor = Cursor::new(topic.clone(), FIRST_MESSAGE_ID);
        let mut out = Vec::new();
        let failed = cursor.read(&engine.inner.store, 16, &mut out, |m| m.payload);
        assert!(
            matches!(failed, Err(Error::Corrupt { .. })),
            "the damaged record is reported: {failed:?}"
        );
        assert!(out.is_empty(), "a failed read hands out nothing");
        cursor.next = FIRST_MESSAGE_ID + 2;
        cursor
            .read(&engine.inner.store, 2, &mut out, |m| m.payload)
            .expect("the ids before the damage read");
        let expected: Vec<_> = (2..4u8).map(|i| Bytes::from(vec![b'a' + i; 3])).collect();
        assert_eq!(out, expected);
    }

    /// Produces `messages` to `topic` while a cursor at `from` waits for them; returns what
    /// the woken cursor read.
    async fn read_awaited(
        engine: &Rocksmq,
        topic: &Arc<TopicState>,
        from: u64,
        messages: Vec<ProducerMessage>,
    ) -> Vec<StoredMessage> {
        let mut cursor = Cursor::new(topic.clone(), from);
        let store = engine.clone();
        let waiter =
            tokio::spawn(async move { cursor.next_batch(&store.inner.store, 16, |m| m).await });
        // The write is kept only for a cursor already waiting: wait until it is.
        while !topic.awaited() {
            tokio::task::yield_now().await;
        }
        engine
            .produce(&topic.name, messages)
            .await
            .expect("produce");
        waiter.await.expect("waiter").expect("read")
    }

    /// A cursor woken by a small write reads it from memory: exactly what the store holds
    /// (payloads, properties, ids), for the cursor and for any other reader of those ids.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_awaited_write_is_read_from_memory_as_stored() {
        let dir = tempfile::tempdir().expect("tempdir");
        let engine = Rocksmq::open(RocksmqOptions::new(dir.path())).expect("open");
        let topic = engine.topic_or_create("t").expect("topic");
        let mut with_properties = ProducerMessage::new(b"b".to_vec());
        with_properties
            .properties
            .insert("traceparent".into(), "00-x".into());
        let written = vec![ProducerMessage::new(b"a".to_vec()), with_properties];
        let read = read_awaited(&engine, &topic, FIRST_MESSAGE_ID, written).await;
        let ids = FIRST_MESSAGE_ID..FIRST_MESSAGE_ID + 2;
        assert!(
            topic.recent.read(ids.start, ids.end, 16, drop).is_some(),
            "the awaited write is held"
        );
        let mut again = Vec::new();
        Cursor::new(topic.clone(), ids.start)
            .read(&engine.inner.store, 16, &mut again, |m| m)
            .expect("read from memory");
        topic.recent.forget();
        let mut stored = Vec::new();
        Cursor::new(topic.clone(), ids.start)
            .read(&engine.inner.store, 16, &mut stored, |m| m)
            .expect("read from the store");
        assert_eq!(stored.len(), 2);
        assert_eq!(read, stored, "the woken cursor read what is stored");
        assert_eq!(again, stored, "a later reader too");
    }

    /// Retention that deletes the pages of a held write drops it, so no reader gets from
    /// memory a message the store no longer has.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn retention_drops_a_held_write_it_deleted() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut options = RocksmqOptions::new(dir.path());
        options.page_size_bytes = 1;
        options.retention = std::time::Duration::ZERO;
        options.retention_interval = None;
        let engine = Rocksmq::open(options).expect("open");
        let topic = engine.topic_or_create("t").expect("topic");
        let read = read_awaited(
            &engine,
            &topic,
            FIRST_MESSAGE_ID,
            vec![ProducerMessage::new(b"a".to_vec())],
        )
        .await;
        assert_eq!(read.len(), 1);
        let id = read[0].id;
        assert!(topic.recent.read(id, id + 1, 1, drop).is_some());
        let report = engine.run_retention().expect("retention");
        assert_eq!(
            report.messages, 1,
            "the write closed its page, which had no group"
        );
        assert!(
            topic.recent.read(id, id + 1, 1, drop).is_none(),
            "retention dropped the held write"
        );
    }

    /// A tailing read fetches its few messages by key; where an id is missing (retention
    /// removed its page) it must go on past the gap, as the iterator does, and never stop
    /// at the hole or return it.
    #[tokio::test]
    async fn a_short_read_by_key_skips_ids_removed_by_retention() {
        let dir = tempfile::tempdir().expect("tempdir");
        let engine = Rocksmq::open(RocksmqOptions::new(dir.path())).expect("open");
        let topic = engine.topic_or_create("t").expect("topic");
        let batch = (1..=4u8).map(|i| ProducerMessage::new(vec![i])).collect();
        let ids = engine.produce("t", batch).await.expect("produce");

        let mut tail = Cursor::new(topic.clone(), ids.start);
        let read = drain(&engine, &mut tail, 16);
        let expected: Vec<_> = ids
            .clone()
            .zip(1..=4u8)
            .map(|(id, b)| (id, vec![b]))
            .collect();
        assert_eq!(read, expected, "every message, in order, by key");

        engine
            .inner
            .store
            .with(|db| {
                for id in [ids.start, ids.start + 1] {
                    db.db
                        .delete_cf(db.cf(CF_MESSAGES)?, message_key(topic.id, id))
                        .map_err(|e| db_error("delete", e))?;
                }
                Ok(())
            })
            .expect("remove two ids");
        for limit in [1, 2, 16] {
            let mut cursor = Cursor::new(topic.clone(), ids.start);
            assert_eq!(
                drain(&engine, &mut cursor, limit),
                expected[2..].to_vec(),
                "reading {limit} at a time goes on past the gap"
            );
            assert_eq!(cursor.next, ids.end, "the cursor ends at the tail");
        }
    }

    /// Writes `count` messages to topic `t` of a queue in `dir` and leaves them in table files
    /// only (the queue closed, its memtables flushed).
    fn backlog_in_table_files(dir: &std::path::Path, count: usize) {
        let mut options = RocksmqOptions::new(dir);
        options.retention_interval = None;
        let engine = Rocksmq::open(options).expect("open");
        engine.topic_or_create("t").expect("topic");
        let batch = (0..count)
            .map(|i| ProducerMessage::new(format!("m{i}")))
            .collect();
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
            .block_on(engine.produce("t", batch))
            .expect("produce");
        engine.close();
        let db_options = crate::database_options();
        let families = rocksdb::DB::list_cf(&db_options, dir).expect("column families");
        let db = rocksdb::DB::open_cf(&db_options, dir, &families).expect("raw open");
        for name in &families {
            db.flush_cf(db.cf_handle(name).expect("cf")).expect("flush");
        }
    }

    /// Asks the kernel to drop the queue's table files from the page cache, so that the next
    /// read of them waits for the disk. The files are flushed and synced, so their pages are
    /// clean and go.
    fn evict_table_files(dir: &std::path::Path) {
        for entry in std::fs::read_dir(dir).expect("queue dir") {
            let path = entry.expect("entry").path();
            if path.extension().is_some_and(|e| e == "sst") {
                let file = std::fs::File::open(&path).expect("table file");
                rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed).expect("fadvise");
            }
        }
    }

    /// Once a backlog read has waited for the disk, the cursor's next backlog reads run off the
    /// async worker: while one reads, the worker's other tasks go on. With a single worker, a
    /// read that held it would keep the other task from running until the read is over, and
    /// the read here waits for that task.
    #[cfg(target_os = "linux")]
    #[test]
    fn after_a_read_from_disk_backlog_reads_let_the_workers_other_tasks_run() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        let dir = tempfile::tempdir().expect("tempdir");
        let batch = READAHEAD_MIN_MESSAGES;
        backlog_in_table_files(dir.path(), 2 * batch);
        evict_table_files(dir.path());
        let mut options = RocksmqOptions::new(dir.path());
        options.retention_interval = None;
        let engine = Rocksmq::open(options).expect("reopen");
        let topic = engine.topic_or_create("t").expect("topic");
        let mut cursor = Cursor::new(topic, FIRST_MESSAGE_ID);
        let (ran, other_ran) = std::sync::mpsc::channel::<()>();
        let read = runtime.block_on(async {
            evict_table_files(dir.path());
            let first = cursor
                .next_batch(&engine.inner.store, batch, |m| m.id)
                .await
                .expect("first read");
            assert_eq!(first.len(), batch);
            assert!(
                cursor.placement.off_worker(),
                "the first read fetched its table file from the disk"
            );
            evict_table_files(dir.path());
            let reader = engine.clone();
            let other_ran = std::sync::Mutex::new(other_ran);
            let reading = tokio::spawn(async move {
                let mut first = true;
                cursor
                    .next_batch(&reader.inner.store, batch, |m| {
                        if std::mem::take(&mut first) {
                            other_ran
                                .lock()
                                .expect("receiver")
                                .recv_timeout(std::time::Duration::from_secs(5))
                                .expect("the other task ran while the backlog was read");
                        }
                        m.id
                    })
                    .await
            });
            let other = tokio::spawn(async move { ran.send(()) });
            let read = reading.await.expect("the reading task");
            other.await.expect("the other task").expect("signalled");
            read
        });
        assert_eq!(read.expect("read").len(), batch);
    }

    /// A backlog read leaves RocksDB's block cache as it found it (nothing of a backlog is read
    /// twice), while a read of a few messages through table files still caches its block.
    #[test]
    fn backlog_reads_do_not_fill_the_block_cache() {
        let dir = tempfile::tempdir().expect("tempdir");
        backlog_in_table_files(dir.path(), 4 * READAHEAD_MIN_MESSAGES);
        let mut options = RocksmqOptions::new(dir.path());
        options.retention_interval = None;
        let engine = Rocksmq::open(options).expect("reopen");
        let topic = engine.topic_or_create("t").expect("topic");
        let cached = || {
            engine
                .inner
                .store
                .with(|db| {
                    db.db
                        .property_int_value_cf(db.cf(CF_MESSAGES)?, "rocksdb.block-cache-usage")
                        .map_err(|e| db_error("cache usage", e))
                })
                .expect("property")
                .expect("the block cache reports its usage")
        };
        let before = cached();
        let mut cursor = Cursor::new(topic.clone(), FIRST_MESSAGE_ID);
        let mut out = Vec::new();
        cursor
            .read(
                &engine.inner.store,
                4 * READAHEAD_MIN_MESSAGES,
                &mut out,
                |m| m.id,
            )
            .expect("backlog read");
        assert_eq!(out.len(), 4 * READAHEAD_MIN_MESSAGES);
        assert_eq!(cached(), before, "the backlog's blocks are not cached");
        let mut few = Cursor::new(topic, FIRST_MESSAGE_ID + 8);
        few.read(&engine.inner.store, 8, &mut Vec::new(), |m| m.id)
            .expect("a short read");
        assert!(cached() > before, "a short read caches the block it read");
    }

    /// Backlog reads that find their files in memory run on the worker (no hand-off of its
    /// other tasks), read for read.
    #[test]
    fn backlog_reads_served_from_memory_stay_on_the_worker() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .expect("runtime");
        let dir = tempfile::tempdir().expect("tempdir");
        let batch = READAHEAD_MIN_MESSAGES;
        backlog_in_table_files(dir.path(), 4 * batch);
        let mut options = RocksmqOptions::new(dir.path());
        options.retention_interval = None;
        let engine = Rocksmq::open(options).expect("reopen");
        let topic = engine.topic_or_create("t").expect("topic");
        let mut cursor = Cursor::new(topic, FIRST_MESSAGE_ID);
        runtime.block_on(async {
            // The first read may bring the files in; the ones after find them cached.
            cursor
                .next_batch(&engine.inner.store, batch, |m| m.id)
                .await
                .expect("first read");
            cursor.placement = ReadPlacement::default();
            for _ in 0..3 {
                let read = cursor
                    .next_batch(&engine.inner.store, batch, |m| m.id)
                    .await
                    .expect("read");
                assert_eq!(read.len(), batch);
                assert!(!cursor.placement.off_worker());
            }
        });
    }
}
