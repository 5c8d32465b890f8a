//! The server's memory: topics → partitions → an append-only log and its channels, the
//! clients subscribed to them, and the one delivery routine that respects every client's RDY.
//!
//! A channel is a cursor into its partition's log plus a list of messages waiting to be
//! (re)delivered (requeued, timed out, deferred). That is what lets the extensions seek by
//! offset; for upstream behaviour it is equivalent to nsqd's per-channel queue copy: a channel
//! sees every message published after it was created, and the first channel of a topic also
//! gets what was published while the topic had none.
//! Where a message that comes back goes differs: upstream it joins the back of the channel's
//! queue (`redelivery`), the fork delivers it before the channel's undelivered messages.

mod redelivery;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use tokio::sync::mpsc;

pub(crate) use crate::connections::Connection;
use redelivery::Queued;

/// Connection id.
pub(crate) type ClientId = u64;

/// Frame type of a message.
const FRAME_MESSAGE: i32 = 2;

/// One stored message.
pub(crate) struct Stored {
    pub id: [u8; 16],
    pub timestamp: i64,
    pub body: Bytes,
    pub offset: u64,
    pub raw_size: u32,
    /// DPUB: not visible before this instant.
    pub visible_at: Option<Instant>,
}

/// A message waiting to be delivered again.
struct Waiting {
    index: usize,
    attempts: u16,
    ready_at: Instant,
}

/// A delivered, unanswered message.
pub(crate) struct InFlight {
    pub index: usize,
    pub attempts: u16,
    pub client: ClientId,
    pub deadline: Instant,
    /// When it was delivered: TOUCH never extends past this plus `max_msg_timeout`.
    pub delivered: Instant,
}

/// One NSQ channel of one partition.
#[derive(Default)]
pub(crate) struct Channel {
    pub cursor: usize,
    /// The log index the channel started at: every message from there on entered it (nsqd's
    /// channel `message_count`).
    pub first: usize,
    /// `/channel/pause`: nothing is delivered while set.
    pub paused: bool,
    waiting: Vec<Waiting>,
    /// Upstream: messages that came back, in the order they did (see `redelivery`).
    queued: VecDeque<Queued>,
    pub in_flight: HashMap<[u8; 16], InFlight>,
    pub clients: Vec<ClientId>,
    pub ordered: bool,
    next_client: usize,
    pub message_count: u64,
    pub requeue_count: u64,
    pub timeout_count: u64,
    /// The log index of a message the fork had read ahead before a rewind and delivered
    /// first after it: the cursor passes over it once (see [`Channel::rewind`]).
    delivered_ahead: Option<usize>,
    /// The fork's `/stats` histograms of this channel (see [`crate::histogram`]).
    pub latencies: crate::histogram::ChannelLatencies,
}

impl Channel {
    /// `(depth, deferred)` as nsqd reports them: messages ready to go out (not yet delivered,
    /// requeued, timed out) and messages held back until later (DPUB, REQ with a delay).
    pub fn depth(&self, log: &[Stored], now: Instant) -> (usize, usize) {
        let later = |at: Option<Instant>| at.is_some_and(|at| at > now);
        let pending = log.get(self.cursor..).unwrap_or_default();
        let deferred = pending.iter().filter(|m| later(m.visible_at)).count()
            + self
                .waiting
                .iter()
                .filter(|w| later(Some(w.ready_at)))
                .count();
        // A message read ahead before a rewind waits and is still ahead of the cursor: once.
        let twice = usize::from(self.delivered_ahead.is_some_and(|i| i >= self.cursor));
        (
            pending.len() + self.waiting.len() + self.queued.len() - deferred - twice,
            deferred,
        )
    }

    /// A deferred message met at the cursor: it waits until `ready_at`.
    fn defer(&mut self, index: usize, ready_at: Instant) {
        self.waiting.push(Waiting {
            index,
            attempts: 0,
            ready_at,
        });
    }

    /// Puts an in-flight message back, to be delivered at `ready_at`.
    pub fn requeue(&mut self, flight: InFlight, ready_at: Instant) {
        self.waiting.push(Waiting {
            index: flight.index,
            attempts: flight.attempts,
            ready_at,
        });
    }

    /// Moves the cursor (SUB_ADVANCED, `/channel/setoffset`, `/channel/empty`): forgets what
    /// was waiting and what was in flight, as both servers do (nsqd's `Empty` and the fork's
    /// reader reset both start a new in-flight queue). Returns the clients whose in-flight
    /// counts must drop, one entry per forgotten message; a later FIN of one of them fails.
    #[must_use = "the owners' in-flight counts must be released"]
    pub fn reset(&mut self, cursor: usize) -> Vec<ClientId> {
        self.cursor = cursor;
        self.delivered_ahead = None;
        self.waiting.clear();
        self.queued.clear();
        self.in_flight.drain().map(|(_, f)| f.client).collect()
    }

    /// Forgets what is in flight (a later FIN of it fails); returns the owners whose
    /// in-flight counts must drop.
    #[must_use = "the owners' in-flight counts must be released"]
    pub fn forget_in_flight(&mut self) -> Vec<ClientId> {
        self.in_flight.drain().map(|(_, f)| f.client).collect()
    }

    /// `/channel/setoffset` on a channel that exists: [`Channel::reset`], except that the fork's
    /// channel reader has already taken the first undelivered message off the queue when the
    /// channel has a backlog; moved back to or before it, that message goes out first, and only
    /// once (Y6 382-407: rewound to `y6-m2` with `y6-m6` and `y6-m7` undelivered, the consumer
    /// got m6, m2, m3, m4, m5, m7). Moved past it, it is forgotten with everything else. An
    /// ordered channel reads nothing ahead (its backlogs count no read-ahead message: Y4 271
    /// `golden_c5`, Y8 146), so it is moved exactly as [`Channel::reset`] does.
    #[must_use = "the owners' in-flight counts must be released"]
    pub fn rewind(&mut self, cursor: usize, log: &[Stored], now: Instant) -> Vec<ClientId> {
        if self.ordered {
            return self.reset(cursor);
        }
        let ahead = log
            .get(self.cursor)
            .filter(|m| m.visible_at.is_none_or(|at| at <= now))
            .map(|_| self.cursor)
            .filter(|ahead| cursor <= *ahead);
        let owners = self.reset(cursor);
        if let Some(index) = ahead {
            self.waiting.push(Waiting {
                index,
                attempts: 0,
                ready_at: now,
            });
            self.delivered_ahead = Some(index);
        }
        owners
    }

    /// Puts what `client` holds in flight back to be delivered again at once, with the
    /// attempts it had (the next delivery counts the same attempt again). The fork promises
    /// no order among them; both recordings show the oldest last and the others in order
    /// (2, 1 in Y4 218-219; 2, 3, 1 in Y8 127-129), which this server does, so replays of
    /// those runs are deterministic.
    pub fn requeue_client(&mut self, client: ClientId, now: Instant) {
        let mut ids: Vec<[u8; 16]> = self
            .in_flight
            .iter()
            .filter(|(_, f)| f.client == client)
            .map(|(id, _)| *id)
            .collect();
        ids.sort_unstable();
        if !ids.is_empty() {
            ids.rotate_left(1);
        }
        for id in ids {
            if let Some(flight) = self.in_flight.remove(&id) {
                // The fork counts these as requeues (`requeue_count` 4 in Y4 271: two left
                // in flight by a closed consumer, then REQ 0 and REQ 1000).
                self.requeue_count += 1;
                self.waiting.push(Waiting {
                    index: flight.index,
                    attempts: flight.attempts.saturating_sub(1),
                    ready_at: now,
                });
            }
        }
    }

    /// Puts everything in flight back to be delivered again at once and forgets the
    /// consumers (the partition moved to another node, whose clients are other connections).
    pub fn requeue_all(&mut self, now: Instant) {
        let flights: Vec<InFlight> = self.in_flight.drain().map(|(_, f)| f).collect();
        for flight in flights {
            self.requeue(flight, now);
        }
        self.clients.clear();
        self.next_client = 0;
    }

    /// The log index of the first message not yet finished (the fork's confirmed position;
    /// see [`Channel::confirmed_offset`]).
    pub fn confirmed_index(&self) -> usize {
        self.in_flight
            .values()
            .map(|f| f.index)
            .chain(self.waiting.iter().map(|w| w.index))
            .chain(self.queued.iter().map(|q| q.index))
            .fold(self.cursor, usize::min)
    }

    /// Messages taken off the log but not finished: in flight and waiting to go out again.
    pub fn read_unfinished(&self) -> usize {
        self.in_flight.len() + self.waiting.len() + self.queued.len()
    }

    /// Messages not yet taken off the log (`cursor` onwards).
    pub fn unread(&self, log: &[Stored]) -> usize {
        log.len().saturating_sub(self.cursor)
    }

    /// The lowest virtual-queue offset not yet finished (the fork's *confirmed* offset):
    /// every message below it was finished, so a consumer restarting there loses nothing.
    pub fn confirmed_offset(&self, log: &[Stored], end: u64) -> u64 {
        log.get(self.confirmed_index()).map_or(end, |m| m.offset)
    }
}

/// One partition of a topic (upstream topics have exactly one, numbered 0).
#[derive(Default)]
pub(crate) struct Partition {
    pub log: Vec<Stored>,
    pub next_offset: u64,
    /// Where a first channel starts: messages published while the partition had no channel.
    pub unclaimed_from: usize,
    pub channels: BTreeMap<String, Channel>,
    /// Message ids handed out (Youzan ids are numbered per partition).
    pub ids_issued: u64,
    /// A coordinator-mode partition: every new channel starts at the end, the first one too
    /// (Y4 17), unlike nsqd 1.3.0 and a standalone Youzan nsqd (U2, Y8 63).
    pub channels_start_at_end: bool,
    /// The fork's `/stats` histograms of what was written (see [`crate::histogram`]).
    pub writes: crate::histogram::WriteStats,
}

/// A Youzan message id: `(partition << 50 | sequence)` and the trace id, both big-endian.
pub(crate) fn youzan_id(partition: u32, sequence: u64, trace_id: u64) -> [u8; 16] {
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&((u64::from(partition) << 50) | sequence).to_be_bytes());
    id[8..].copy_from_slice(&trace_id.to_be_bytes());
    id
}

impl Partition {
    /// The channel, created if needed (starting as nsqd would).
    pub fn channel(&mut self, name: &str) -> &mut Channel {
        let start = if self.channels.is_empty() && !self.channels_start_at_end {
            self.unclaimed_from
        } else {
            self.log.len()
        };
        self.channels
            .entry(name.to_string())
            .or_insert_with(|| Channel {
                cursor: start,
                first: start,
                ..Channel::default()
            })
    }

    /// Appends a message and returns its index.
    pub fn append(&mut self, id: [u8; 16], body: Bytes, visible_at: Option<Instant>) -> usize {
        let raw_size = (4 + 26 + body.len()) as u32;
        let timestamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as i64)
            .unwrap_or(0);
        self.log.push(Stored {
            id,
            timestamp,
            body,
            offset: self.next_offset,
            raw_size,
            visible_at,
        });
        self.next_offset += u64::from(raw_size);
        if !self.channels.is_empty() {
            self.unclaimed_from = self.log.len();
        }
        self.log.len() - 1
    }

    /// Index of the first message at or after virtual-queue `offset`.
    pub fn index_of_offset(&self, offset: u64) -> usize {
        self.log.partition_point(|m| m.offset < offset)
    }

    /// Index of the first message published at or after `secs` (seconds since the epoch).
    pub fn index_of_time(&self, secs: u64) -> usize {
        let nanos = i64::try_from(secs.saturating_mul(1_000_000_000)).unwrap_or(i64::MAX);
        self.log.partition_point(|m| m.timestamp < nanos)
    }
}

/// A topic: partitions by number.
#[derive(Default)]
pub(crate) struct Topic {
    pub partitions: BTreeMap<u32, Partition>,
    /// `/topic/pause`: nothing is delivered to any channel while set.
    pub paused: bool,
}

/// Where a client is subscribed.
#[derive(Clone, PartialEq, Eq, Debug)]
pub(crate) struct SubKey {
    pub topic: String,
    pub partition: u32,
    pub channel: String,
}

/// What the store knows about one connection.
pub(crate) struct ClientState {
    pub out: mpsc::UnboundedSender<Bytes>,
    /// Notified when the server closes this connection (its topic or channel was deleted).
    pub closer: std::sync::Arc<tokio::sync::Notify>,
    pub rdy: u32,
    pub in_flight: u32,
    pub sub: Option<SubKey>,
    /// SUB_ADVANCED / SUB_ORDERED: deliveries carry offset and raw size.
    pub positions: bool,
    pub closing: bool,
    pub msg_timeout: Duration,
    pub user_agent: String,
    pub finish_count: u64,
    pub requeue_count: u64,
    pub message_count: u64,
    pub timeout_count: u64,
}

/// Every topic and client of one server.
#[derive(Default)]
pub(crate) struct Store {
    pub topics: BTreeMap<String, Topic>,
    /// Subscribed connections.
    pub clients: HashMap<ClientId, ClientState>,
    /// Every open connection, as `/stats` describes it.
    pub connections: BTreeMap<ClientId, Connection>,
    /// What was announced to lookupds.
    pub announcer: crate::announce::Announcer,
    pub next_id: u64,
    /// Binary (Youzan) ids instead of 16 hex characters.
    pub binary_ids: bool,
    /// Upstream: a message that comes back joins the back of its channel's queue (see
    /// `redelivery`); otherwise it goes out before the channel's undelivered messages.
    pub redeliver_behind: bool,
    /// PUBs a cluster node refused with `E_FAILED_ON_NOT_LEADER`, per topic and partition
    /// (the fork's `pub_failed_cnt`; the partition need not be in `topics` yet).
    pub pub_refused: BTreeMap<(String, u32), u64>,
}

impl Store {
    /// A fresh message id: 16 hex characters (upstream) or `u64 id ‖ u64 trace id` (Youzan).
    pub fn new_id(&mut self, trace_id: u64) -> [u8; 16] {
        self.next_id += 1;
        let mut id = [0u8; 16];
        if self.binary_ids {
            id[..8].copy_from_slice(&self.next_id.to_be_bytes());
            id[8..].copy_from_slice(&trace_id.to_be_bytes());
        } else {
            id.copy_from_slice(format!("{:016x}", self.next_id).as_bytes());
        }
        id
    }

    /// The partition, created if needed.
    pub fn partition_entry(&mut self, topic: &str, partition: u32) -> &mut Partition {
        self.topics
            .entry(topic.to_string())
            .or_default()
            .partitions
            .entry(partition)
            .or_default()
    }

    /// The partition, if it exists.
    pub fn partition(&mut self, topic: &str, partition: u32) -> Option<&mut Partition> {
        self.topics.get_mut(topic)?.partitions.get_mut(&partition)
    }

    /// Delivers whatever the RDY counts allow on every channel, and moves expired in-flight
    /// messages back to waiting. Called after every change and on a short timer.
    pub fn pump(&mut self, now: Instant) {
        let Store {
            topics,
            clients,
            redeliver_behind,
            ..
        } = self;
        for (topic_name, topic) in topics.iter_mut() {
            for (pid, partition) in topic.partitions.iter_mut() {
                for channel in partition.channels.values_mut() {
                    expire(channel, clients, now);
                    if *redeliver_behind {
                        channel.queue_due(partition.log.len(), now);
                    }
                    if topic.paused || channel.paused {
                        continue;
                    }
                    let next = if *redeliver_behind {
                        redelivery::next_in_queue
                    } else {
                        next_message
                    };
                    deliver(
                        topic_name,
                        *pid,
                        &partition.log,
                        channel,
                        clients,
                        now,
                        next,
                    );
                }
            }
        }
    }

    /// Releases the in-flight counts of messages a channel reset forgot.
    pub fn release_in_flight(&mut self, owners: Vec<ClientId>) {
        for owner in owners {
            if let Some(client) = self.clients.get_mut(&owner) {
                client.in_flight = client.in_flight.saturating_sub(1);
            }
        }
    }

    /// Forgets a closed connection; its in-flight messages stay in flight until they time out,
    /// as on nsqd.
    pub fn remove_client(&mut self, client: ClientId) {
        self.connections.remove(&client);
        let youzan = self.binary_ids;
        if let Some(state) = self.clients.remove(&client) {
            if let Some(sub) = state.sub {
                if let Some(partition) = self.partition(&sub.topic, sub.partition) {
                    if let Some(channel) = partition.channels.get_mut(&sub.channel) {
                        channel.clients.retain(|c| *c != client);
                        // The fork puts a closed connection's in-flight messages back at
                        // once, attempts unchanged (Y4 218-221, Y8 127-131); nsqd 1.3.0
                        // leaves them to their timeout.
                        if youzan {
                            channel.requeue_client(client, Instant::now());
                        }
                        // nsqd deletes an ephemeral channel when its last client leaves.
                        if channel.clients.is_empty() && sub.channel.ends_with("#ephemeral") {
                            partition.channels.remove(&sub.channel);
                        }
                    }
                }
            }
        }
    }
}

/// Puts back every in-flight message whose deadline passed, earliest deadline first (nsqd's
/// in-flight queue is ordered by deadline), as of `now`.
fn expire(channel: &mut Channel, clients: &mut HashMap<ClientId, ClientState>, now: Instant) {
    let mut expired: Vec<(Instant, usize, [u8; 16])> = channel
        .in_flight
        .iter()
        .filter(|(_, f)| f.deadline <= now)
        .map(|(id, f)| (f.deadline, f.index, *id))
        .collect();
    expired.sort_unstable();
    for (_, _, id) in expired {
        if let Some(flight) = channel.in_flight.remove(&id) {
            if let Some(client) = clients.get_mut(&flight.client) {
                client.in_flight = client.in_flight.saturating_sub(1);
                client.timeout_count += 1;
            }
            channel.timeout_count += 1;
            channel.requeue(flight, now);
        }
    }
}

fn deliver(
    topic: &str,
    partition: u32,
    log: &[Stored],
    channel: &mut Channel,
    clients: &mut HashMap<ClientId, ClientState>,
    now: Instant,
    next_message: NextMessage,
) {
    loop {
        if channel.ordered && !channel.in_flight.is_empty() {
            return;
        }
        let Some(client_id) = pick_client(channel, clients) else {
            return;
        };
        let Some((index, attempts)) = next_message(log, channel, now) else {
            return;
        };
        let Some(client) = clients.get_mut(&client_id) else {
            return;
        };
        let stored = &log[index];
        let frame = message_frame(stored, attempts, client.positions);
        client.in_flight += 1;
        client.message_count += 1;
        channel.message_count += 1;
        channel.latencies.delivered(stored.timestamp);
        channel.in_flight.insert(
            stored.id,
            InFlight {
                index,
                attempts,
                client: client_id,
                deadline: now + client.msg_timeout,
                delivered: now,
            },
        );
        if client.out.send(frame).is_err() {
            tracing::debug!(topic, partition, "delivery to a closing connection");
        }
        if client.in_flight >= client.rdy {
            // No RDY left: nsqd flushes the connection's output buffer.
            let _ = client.out.send(crate::output::flush_marker());
        }
    }
}

/// Picks the next delivery of a channel: its log index and attempt number.
type NextMessage = fn(&[Stored], &mut Channel, Instant) -> Option<(usize, u16)>;

/// The next client with RDY room, round robin.
fn pick_client(
    channel: &mut Channel,
    clients: &HashMap<ClientId, ClientState>,
) -> Option<ClientId> {
    let n = channel.clients.len();
    for step in 0..n {
        let i = (channel.next_client + step) % n;
        let id = channel.clients[i];
        if let Some(c) = clients.get(&id) {
            if !c.closing && c.in_flight < c.rdy {
                channel.next_client = (i + 1) % n;
                return Some(id);
            }
        }
    }
    None
}

/// The Youzan fork's next delivery: a ready waiting one first, then the cursor. An ordered
/// channel only ever takes its lowest waiting message, and never passes it while it waits.
/// Deferred messages met at the cursor move to waiting.
fn next_message(log: &[Stored], channel: &mut Channel, now: Instant) -> Option<(usize, u16)> {
    loop {
        let candidate = if channel.ordered {
            channel
                .waiting
                .iter()
                .enumerate()
                .min_by_key(|(_, w)| w.index)
                .map(|(i, w)| (i, w.ready_at <= now))
        } else {
            channel
                .waiting
                .iter()
                .position(|w| w.ready_at <= now)
                .map(|i| (i, true))
        };
        match candidate {
            Some((i, true)) => {
                let w = channel.waiting.remove(i);
                return Some((w.index, w.attempts.saturating_add(1)));
            }
            Some((_, false)) => return None,
            None => {}
        }
        let stored = log.get(channel.cursor)?;
        let index = channel.cursor;
        channel.cursor += 1;
        if channel.delivered_ahead == Some(index) {
            channel.delivered_ahead = None;
            continue;
        }
        match stored.visible_at {
            Some(at) if at > now => channel.defer(index, at),
            _ => return Some((index, 1)),
        }
    }
}

/// A message frame: header, id, optional offset and raw size, body.
fn message_frame(stored: &Stored, attempts: u16, positions: bool) -> Bytes {
    let extra = if positions { 12 } else { 0 };
    let size = 4 + 26 + extra + stored.body.len();
    let mut buf = BytesMut::with_capacity(4 + size);
    buf.put_u32(size as u32);
    buf.put_i32(FRAME_MESSAGE);
    buf.put_i64(stored.timestamp);
    buf.put_u16(attempts);
    buf.put_slice(&stored.id);
    if positions {
        buf.put_u64(stored.offset);
        buf.put_u32(stored.raw_size);
    }
    buf.put_slice(&stored.body);
    buf.freeze()
}

/// A response (type 0) or error (type 1) frame.
pub(crate) fn frame(kind: i32, data: &[u8]) -> Bytes {
    let mut buf = BytesMut::with_capacity(8 + data.len());
    buf.put_u32(4 + data.len() as u32);
    buf.put_i32(kind);
    buf.put_slice(data);
    buf.freeze()
}
