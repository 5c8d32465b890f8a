//! Appends with group commit.
//!
//! Producers enqueue their batch; the first one to find no write in progress becomes the
//! *leader*: it takes every queued batch (its own and those that arrived meanwhile, from any
//! topic), assigns ids, writes them all in **one** `WriteBatch` (one WAL write, one sync when the
//! durability asks for it), publishes the new tails and answers the others, then repeats while
//! batches keep arriving. Followers just await their answer. So concurrent producers share writes
//! instead of queueing for a lock one by one, and one producer alone pays no thread hop.
//!
//! Guarantees: ids of a topic are strictly increasing, consecutive within a batch, and assigned in
//! commit order, so a reader never sees id *n+1* before *n*. A batch is acknowledged only after
//! its write (and with it the topic's tail record) is in the WAL; if the write fails, no id is
//! consumed and every caller in the group gets the error. Under a sustained stream of concurrent
//! producers the leader may write several groups before its own call returns; its own batch is
//! always in the first one.

use std::ops::Range;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use msgstream::mq::ProducerMessage;
use msgstream::{Error, Result};
use tokio::sync::oneshot;

use crate::codec::{encode_properties, PageRecord, Tail};
use crate::keys::{message_key, topic_tail_key, CF_MESSAGES, CF_META, CF_PAGES, CF_PROPERTIES};
use crate::store::{Store, BACKEND};
use crate::topics::TopicState;

struct Request {
    topic: Arc<TopicState>,
    messages: Vec<ProducerMessage>,
    reply: oneshot::Sender<Result<Range<u64>>>,
}

#[derive(Default)]
struct Queue {
    pending: Vec<Request>,
    leading: bool,
}

/// The single write path of message data.
pub(crate) struct Writer {
    queue: Mutex<Queue>,
    commit: Mutex<()>,
    page_size: u64,
    syncs: bool,
}

/// Wall-clock milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

impl Writer {
    /// A writer closing pages at `page_size` bytes; `syncs` says whether each write waits for
    /// an fsync, in which case the leader tells a multi-threaded tokio runtime it is blocking.
    pub fn new(page_size: u64, syncs: bool) -> Writer {
        Writer {
            queue: Mutex::default(),
            commit: Mutex::default(),
            page_size: page_size.max(1),
            syncs,
        }
    }

    /// Excludes writes while held: destroy and close take it so no batch straddles them.
    pub fn exclusive(&self) -> MutexGuard<'_, ()> {
        lock(&self.commit)
    }

    /// Appends `messages` to `topic`; returns their ids once durable as configured.
    ///
    /// Cancel-safe in the sense that matters: once called, the batch is written (or fails) even
    /// if the returned future is dropped; only the answer is lost.
    pub async fn append(
        &self,
        store: &Store,
        topic: Arc<TopicState>,
        messages: Vec<ProducerMessage>,
    ) -> Result<Range<u64>> {
        topic.check_live()?;
        if messages.is_empty() {
            let next = topic.tail().next_id;
            return Ok(next..next);
        }
        let (reply, answer) = oneshot::channel();
        let lead = {
            let mut queue = lock(&self.queue);
            queue.pending.push(Request {
                topic,
                messages,
                reply,
            });
            !std::mem::replace(&mut queue.leading, true)
        };
        if lead {
            let multi_threaded = tokio::runtime::Handle::try_current().is_ok_and(|handle| {
                handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread
            });
            if self.syncs && multi_threaded {
                tokio::task::block_in_place(|| self.lead(store));
            } else {
                self.lead(store);
            }
        }
        answer.await.map_err(|_| Error::Closed("rocksmq writer"))?
    }

    fn lead(&self, store: &Store) {
        loop {
            let group = {
                let mut queue = lock(&self.queue);
                if queue.pending.is_empty() {
                    queue.leading = false;
                    return;
                }
                std::mem::take(&mut queue.pending)
            };
            self.commit_group(store, group);
        }
    }

    fn commit_group(&self, store: &Store, group: Vec<Request>) {
        let _commit = lock(&self.commit);
        let mut tails: Vec<(Arc<TopicState>, Tail)> = Vec::new();
        let mut answers: Vec<(oneshot::Sender<Result<Range<u64>>>, Result<Range<u64>>)> =
            Vec::with_capacity(group.len());
        let now = now_ms();
        let written = store.with(|db| {
            let messages_cf = db.cf(CF_MESSAGES)?;
            let properties_cf = db.cf(CF_PROPERTIES)?;
            let pages_cf = db.cf(CF_PAGES)?;
            let meta_cf = db.cf(CF_META)?;
            let mut batch = rocksdb::WriteBatch::default();
            for request in group {
                if let Err(e) = request.topic.check_live() {
                    answers.push((request.reply, Err(e)));
                    continue;
                }
                let slot = match tails
                    .iter()
                    .position(|(t, _)| Arc::ptr_eq(t, &request.topic))
                {
                    Some(slot) => slot,
                    None => {
                        let tail = request.topic.tail();
                        tails.push((request.topic.clone(), tail));
                        tails.len() - 1
                    }
                };
                let topic_id = request.topic.id;
                let tail = &mut tails[slot].1;
                let first = tail.next_id;
                for message in &request.messages {
                    let id = tail.next_id;
                    let key = message_key(topic_id, id);
                    batch.put_cf(messages_cf, key, &message.payload);
                    let mut bytes = message.payload.len() as u64;
                    if !message.properties.is_empty() {
                        let encoded = encode_properties(&message.properties);
                        bytes += encoded.len() as u64;
                        batch.put_cf(properties_cf, key, encoded);
                    }
                    tail.next_id += 1;
                    tail.page_bytes += bytes;
                    if tail.page_bytes >= self.page_size {
                        let page = PageRecord {
                            last_id: id,
                            bytes: tail.page_bytes,
                            closed_ms: now,
                        };
                        batch.put_cf(
                            pages_cf,
                            message_key(topic_id, tail.page_first),
                            page.encode(),
                        );
                        tail.page_first = tail.next_id;
                        tail.page_bytes = 0;
                    }
                }
                batch.put_cf(meta_cf, topic_tail_key(topic_id), tail.encode());
                answers.push((request.reply, Ok(first..tail.next_id)));
            }
            db.write(batch)
        });
        match written {
            Ok(()) => {
                for (topic, tail) in tails {
                    *lock(&topic.tail) = tail;
                    topic.visible.send_replace(tail.next_id);
                }
                for (reply, answer) in answers {
                    // A caller that stopped waiting loses only the answer; its data is written.
                    let _ = reply.send(answer);
                }
            }
            Err(e) => {
                let closed = matches!(e, Error::Closed(_));
                let message = e.to_string();
                let transient = e.is_transient();
                for (reply, answer) in answers {
                    let failure = match answer {
                        Err(own) => own,
                        Ok(_) if closed => Error::Closed("rocksmq client"),
                        Ok(_) if transient => Error::transient(BACKEND, message.clone()),
                        Ok(_) => Error::backend(BACKEND, message.clone()),
                    };
                    let _ = reply.send(Err(failure));
                }
            }
        }
    }
}
