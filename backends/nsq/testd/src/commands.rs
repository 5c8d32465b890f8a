//! What each command does to the connection and the store, with nsqd's error codes and its
//! rule that every error is fatal except `E_FIN_FAILED`, `E_REQ_FAILED` and `E_TOUCH_FAILED`.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde::Deserialize;
use tokio::io::BufReader;
use tokio::net::tcp::OwnedReadHalf;
use tokio::sync::{mpsc, Notify};
use tokio::task::JoinHandle;

use crate::store::{frame, Store, SubKey};
use crate::tcp::{client_state, heartbeats, now, read_body, Line, RESPONSE};
use crate::{valid_name, Shared};

/// A command failure: the error frame to send and whether the connection then closes.
#[derive(Debug)]
pub(crate) struct Fail {
    pub code: &'static str,
    pub text: String,
    pub fatal: bool,
}

impl Fail {
    pub(crate) fn fatal(code: &'static str, text: &str) -> Fail {
        Fail {
            code,
            text: text.to_string(),
            fatal: true,
        }
    }

    fn soft(code: &'static str, text: String) -> Fail {
        Fail {
            code,
            text,
            fatal: false,
        }
    }

    /// The socket failed: close without an error frame.
    pub(crate) fn io(_: std::io::Error) -> Fail {
        Fail {
            code: "",
            text: String::new(),
            fatal: true,
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Identify {
    feature_negotiation: bool,
    heartbeat_interval: i64,
    msg_timeout: i64,
    sample_rate: i64,
    user_agent: String,
    snappy: bool,
    deflate: bool,
}

/// The state of one connection.
pub(crate) struct Session {
    shared: Arc<Shared>,
    id: u64,
    tx: mpsc::UnboundedSender<Bytes>,
    identified: bool,
    authed: bool,
    subscribed: bool,
    closing: bool,
    heartbeat: Option<Duration>,
    heartbeat_task: Option<JoinHandle<()>>,
    msg_timeout: Duration,
    user_agent: String,
    closer: Arc<Notify>,
}

type Reader = BufReader<OwnedReadHalf>;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn number(bytes: &[u8], what: &str) -> Result<i64, Fail> {
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| Fail::fatal("E_INVALID", &format!("could not parse {what}")))
}

impl Session {
    pub(crate) fn new(shared: Arc<Shared>, id: u64, tx: mpsc::UnboundedSender<Bytes>) -> Session {
        let heartbeat = shared.options.heartbeat_interval;
        let msg_timeout = shared.options.msg_timeout;
        let task = heartbeats(tx.clone(), heartbeat);
        Session {
            shared,
            id,
            tx,
            identified: false,
            authed: false,
            subscribed: false,
            closing: false,
            heartbeat: Some(heartbeat),
            heartbeat_task: Some(task),
            msg_timeout,
            user_agent: String::new(),
            closer: Arc::new(Notify::new()),
        }
    }

    /// Notified when the server closes this connection on its own.
    pub(crate) fn closer(&self) -> Arc<Notify> {
        self.closer.clone()
    }

    /// Two heartbeat intervals without a command close the connection (nsqd's read deadline).
    pub(crate) fn read_deadline(&self) -> Duration {
        self.heartbeat
            .map_or(Duration::from_secs(3600), |interval| interval * 2)
    }

    fn reply(&self, data: &[u8]) {
        let _ = self.tx.send(frame(RESPONSE, data));
    }

    fn store(&self) -> std::sync::MutexGuard<'_, Store> {
        self.shared.store()
    }

    /// Forgets the connection in the store.
    pub(crate) fn end(&mut self) {
        if let Some(task) = self.heartbeat_task.take() {
            task.abort();
        }
        self.store().remove_client(self.id);
        self.shared.pump();
    }

    pub(crate) async fn execute(&mut self, line: Line, reader: &mut Reader) -> Result<(), Fail> {
        let partitions = self.shared.options.extensions.partitions();
        let p = &line.params;
        match (line.name.as_slice(), partitions) {
            (b"NOP", _) => Ok(()),
            (b"IDENTIFY", _) => self.identify(reader).await,
            (b"AUTH", _) => self.auth(reader).await,
            (b"SUB", _) => self.sub(p, SubKind::Plain),
            (b"SUB_ORDERED", true) => self.sub(p, SubKind::Ordered),
            (b"SUB_ADVANCED", true) => self.sub(p, SubKind::Advanced),
            (b"PUB", _) => self.publish(p, reader, false).await,
            (b"MPUB", _) => self.publish(p, reader, true).await,
            (b"DPUB", false) => self.dpub(p, reader).await,
            (b"PUB_TRACE", true) => self.pub_trace(p, reader).await,
            (b"INTERNAL_CREATE_TOPIC", true) => self.create_topic(p),
            (b"RDY", _) => self.rdy(p),
            (b"FIN", _) => self.fin(p),
            (b"REQ", _) => self.req(p),
            (b"TOUCH", _) => self.touch(p),
            (b"CLS", _) => self.cls(),
            (name, _) => Err(Fail::fatal(
                "E_INVALID",
                &format!("invalid command {}", text(name)),
            )),
        }
    }

    async fn identify(&mut self, reader: &mut Reader) -> Result<(), Fail> {
        if self.identified || self.subscribed {
            return Err(Fail::fatal("E_INVALID", "cannot IDENTIFY in current state"));
        }
        let body = read_body(reader, self.shared.options.max_body_size, "IDENTIFY").await?;
        let data: Identify = serde_json::from_slice(&body)
            .map_err(|_| Fail::fatal("E_BAD_BODY", "IDENTIFY failed to decode JSON body"))?;
        let opts = &self.shared.options;
        self.heartbeat = match data.heartbeat_interval {
            -1 => None,
            0 => Some(opts.heartbeat_interval),
            ms @ 1000..=60000 => Some(Duration::from_millis(ms as u64)),
            ms => {
                return Err(Fail::fatal(
                    "E_BAD_BODY",
                    &format!("IDENTIFY heartbeat interval ({ms}) is invalid"),
                ))
            }
        };
        let max_timeout = opts.max_msg_timeout.as_millis() as i64;
        self.msg_timeout = match data.msg_timeout {
            0 => opts.msg_timeout,
            ms if (1000..=max_timeout).contains(&ms) => Duration::from_millis(ms as u64),
            ms => {
                return Err(Fail::fatal(
                    "E_BAD_BODY",
                    &format!("IDENTIFY msg timeout ({ms}) is invalid"),
                ))
            }
        };
        if !(0..=99).contains(&data.sample_rate) {
            return Err(Fail::fatal(
                "E_BAD_BODY",
                &format!("IDENTIFY sample rate ({}) is invalid", data.sample_rate),
            ));
        }
        if data.snappy && data.deflate {
            return Err(Fail::fatal(
                "E_IDENTIFY_FAILED",
                "cannot enable both deflate and snappy compression",
            ));
        }
        self.identified = true;
        self.user_agent = data.user_agent;
        if let Some(task) = self.heartbeat_task.take() {
            task.abort();
        }
        self.heartbeat_task = self.heartbeat.map(|hb| heartbeats(self.tx.clone(), hb));
        if !data.feature_negotiation {
            self.reply(b"OK");
            return Ok(());
        }
        // The fork answers with its own buffer defaults (notes §2.6.4).
        let (buffer_size, buffer_timeout) = if opts.extensions.partitions() {
            (100, 50)
        } else {
            (16384, 250)
        };
        let response = serde_json::json!({
            "auth_required": opts.auth_secret.is_some(),
            "deflate": false,
            "deflate_level": 6,
            "max_deflate_level": 6,
            "max_msg_timeout": max_timeout,
            "max_rdy_count": opts.max_rdy_count,
            "msg_timeout": self.msg_timeout.as_millis() as u64,
            "output_buffer_size": buffer_size,
            "output_buffer_timeout": buffer_timeout,
            "sample_rate": 0,
            "snappy": false,
            "tls_v1": false,
            "version": opts.extensions.version(),
        });
        self.reply(response.to_string().as_bytes());
        Ok(())
    }

    async fn auth(&mut self, reader: &mut Reader) -> Result<(), Fail> {
        let Some(secret) = self.shared.options.auth_secret.clone() else {
            return Err(Fail::fatal("E_AUTH_DISABLED", "AUTH disabled"));
        };
        if self.subscribed || self.authed {
            return Err(Fail::fatal("E_INVALID", "cannot AUTH in current state"));
        }
        let body = read_body(reader, 1024, "AUTH").await?;
        if body != secret.as_bytes() {
            return Err(Fail::fatal("E_AUTH_FAILED", "AUTH failed"));
        }
        self.authed = true;
        self.reply(br#"{"identity":"testd","identity_url":"","permission_count":1}"#);
        Ok(())
    }

    fn check_auth(&self) -> Result<(), Fail> {
        if self.shared.options.auth_secret.is_some() && !self.authed {
            return Err(Fail::fatal("E_AUTH_FIRST", "AUTH required"));
        }
        Ok(())
    }

    fn topic_name(&self, param: Option<&Vec<u8>>, cmd: &str) -> Result<String, Fail> {
        let name = param.map(|p| text(p)).ok_or_else(|| {
            Fail::fatal(
                "E_INVALID",
                &format!("{cmd} insufficient number of parameters"),
            )
        })?;
        if !valid_name(&name) {
            return Err(Fail::fatal(
                "E_BAD_TOPIC",
                &format!("{cmd} topic name {name:?} is not valid"),
            ));
        }
        Ok(name)
    }

    /// The partition named by `param` (or the default, 0), which must exist in partitions
    /// mode; upstream always uses partition 0 and ignores extra params.
    fn partition(&self, topic: &str, param: Option<&Vec<u8>>, create: bool) -> Result<u32, Fail> {
        if !self.shared.options.extensions.partitions() {
            self.store()
                .topics
                .entry(topic.to_string())
                .or_default()
                .partitions
                .entry(0)
                .or_default();
            return Ok(0);
        }
        let mut store = self.store();
        let exists = |store: &Store, p: u32| {
            store
                .topics
                .get(topic)
                .is_some_and(|t| t.partitions.contains_key(&p))
        };
        let pid = match param {
            Some(p) => std::str::from_utf8(p)
                .ok()
                .and_then(|s| s.parse::<u32>().ok())
                .ok_or_else(|| {
                    Fail::fatal(
                        "E_BAD_PARTITION",
                        &format!("topic partition is not valid: {}", text(p)),
                    )
                })?,
            None => match store
                .topics
                .get(topic)
                .and_then(|t| t.partitions.keys().next().copied())
            {
                Some(p) => p,
                None => {
                    return Err(Fail::fatal(
                        "E_TOPIC_NOT_EXIST",
                        &format!("topic {topic} not exist"),
                    ))
                }
            },
        };
        if !exists(&store, pid) {
            if !create {
                return Err(Fail::fatal(
                    "E_TOPIC_NOT_EXIST",
                    &format!("topic {topic} partition {pid} not exist"),
                ));
            }
            store
                .topics
                .entry(topic.to_string())
                .or_default()
                .partitions
                .entry(pid)
                .or_default();
        }
        Ok(pid)
    }

    fn sub(&mut self, p: &[Vec<u8>], kind: SubKind) -> Result<(), Fail> {
        self.check_auth()?;
        if self.subscribed || self.closing {
            return Err(Fail::fatal("E_INVALID", "cannot SUB in current state"));
        }
        if self.heartbeat.is_none() {
            return Err(Fail::fatal(
                "E_INVALID",
                "cannot SUB with heartbeats disabled",
            ));
        }
        let topic = self.topic_name(p.first(), "SUB")?;
        let channel = p
            .get(1)
            .map(|c| text(c))
            .ok_or_else(|| Fail::fatal("E_INVALID", "SUB insufficient number of parameters"))?;
        if !valid_name(&channel) {
            return Err(Fail::fatal(
                "E_BAD_CHANNEL",
                &format!("SUB channel name {channel:?} is not valid"),
            ));
        }
        // The Youzan parser reads the partition of SUB_ADVANCED only when there is no offset
        // (notes §2.6.1): with an offset the default partition is used.
        let partition_param = match kind {
            SubKind::Advanced if p.len() >= 4 => None,
            SubKind::Ordered if p.len() < 3 => {
                return Err(Fail::fatal(
                    "E_INVALID",
                    "SUB_ORDERED insufficient number of parameters",
                ))
            }
            _ => p.get(2),
        };
        let pid = self.partition(&topic, partition_param, false)?;
        let offset = match (kind, p.get(3)) {
            (SubKind::Advanced, Some(raw)) => Some(parse_offset(raw)?),
            _ => None,
        };
        let mut store = self.store();
        let ordered_channel = {
            let Some(partition) = store.partition(&topic, pid) else {
                return Err(Fail::fatal("E_TOPIC_NOT_EXIST", "topic not exist"));
            };
            // `special:-1` on a channel that already exists does not skip what the channel
            // already holds (notes §2.6.3): only a new channel starts at the end.
            let existed = partition.channels.contains_key(&channel);
            let target = offset
                .filter(|o| !(existed && matches!(o, Offset::Latest)))
                .map(|o| o.index_in(partition));
            let channel_state = partition.channel(&channel);
            if matches!(kind, SubKind::Ordered) {
                channel_state.ordered = true;
            }
            if let Some(cursor) = target {
                if channel_state.clients.is_empty() {
                    channel_state.reset(cursor);
                }
            }
            channel_state.clients.push(self.id);
            channel_state.ordered
        };
        if ordered_channel && !matches!(kind, SubKind::Ordered) {
            if let Some(c) = store
                .partition(&topic, pid)
                .and_then(|p| p.channels.get_mut(&channel))
            {
                c.clients.retain(|id| *id != self.id);
            }
            return Err(Fail::fatal(
                "E_SUB_ORDER_IS_MUST",
                "the channel is ordered, use SUB_ORDERED",
            ));
        }
        let mut state = client_state(self.tx.clone(), self.closer.clone(), self.msg_timeout);
        state.sub = Some(SubKey {
            topic,
            partition: pid,
            channel,
        });
        state.positions = !matches!(kind, SubKind::Plain);
        state.user_agent = self.user_agent.clone();
        store.clients.insert(self.id, state);
        drop(store);
        self.subscribed = true;
        self.reply(b"OK");
        Ok(())
    }

    async fn publish(
        &mut self,
        p: &[Vec<u8>],
        reader: &mut Reader,
        batch: bool,
    ) -> Result<(), Fail> {
        let cmd = if batch { "MPUB" } else { "PUB" };
        let opts = &self.shared.options;
        let bodies = if batch {
            let body = read_body(reader, opts.max_body_size, cmd).await?;
            split_mpub(&body, opts.max_msg_size)?
        } else {
            let body = read_body(reader, opts.max_msg_size, cmd)
                .await
                .map_err(|f| {
                    Fail::fatal("E_BAD_MESSAGE", &f.text.replace("body", "message body"))
                })?;
            vec![Bytes::from(body)]
        };
        self.check_auth()?;
        let topic = self.topic_name(p.first(), cmd)?;
        let pid = self.partition(&topic, p.get(1), false)?;
        self.shared.put(&topic, pid, bodies, None, 0);
        self.reply(b"OK");
        Ok(())
    }

    async fn dpub(&mut self, p: &[Vec<u8>], reader: &mut Reader) -> Result<(), Fail> {
        let topic = self.topic_name(p.first(), "DPUB")?;
        let defer = number(p.get(1).map_or(&b""[..], |v| v), "timeout")?;
        let max = self.shared.options.max_req_timeout.as_millis() as i64;
        if !(0..=max).contains(&defer) {
            return Err(Fail::fatal(
                "E_INVALID",
                &format!("DPUB timeout {defer} out of range 0-{max}"),
            ));
        }
        let body = read_body(reader, self.shared.options.max_msg_size, "DPUB")
            .await
            .map_err(|f| Fail::fatal("E_BAD_MESSAGE", &f.text))?;
        self.check_auth()?;
        let pid = self.partition(&topic, None, false)?;
        let at = now() + Duration::from_millis(defer as u64);
        self.shared
            .put(&topic, pid, vec![Bytes::from(body)], Some(at), 0);
        self.reply(b"OK");
        Ok(())
    }

    async fn pub_trace(&mut self, p: &[Vec<u8>], reader: &mut Reader) -> Result<(), Fail> {
        let body = read_body(reader, self.shared.options.max_msg_size + 8, "PUB_TRACE").await?;
        if body.len() <= 8 {
            return Err(Fail::fatal(
                "E_BAD_MESSAGE",
                "PUB_TRACE invalid message body size",
            ));
        }
        self.check_auth()?;
        let topic = self.topic_name(p.first(), "PUB_TRACE")?;
        let pid = self.partition(&topic, p.get(1), false)?;
        let mut trace = [0u8; 8];
        trace.copy_from_slice(&body[..8]);
        let payload = Bytes::copy_from_slice(&body[8..]);
        let receipt = self
            .shared
            .put(&topic, pid, vec![payload], None, u64::from_be_bytes(trace));
        let mut reply = b"OK".to_vec();
        reply.extend_from_slice(&receipt.0);
        reply.extend_from_slice(&receipt.1.to_be_bytes());
        reply.extend_from_slice(&receipt.2.to_be_bytes());
        self.reply(&reply);
        Ok(())
    }

    fn create_topic(&mut self, p: &[Vec<u8>]) -> Result<(), Fail> {
        let topic = self.topic_name(p.first(), "INTERNAL_CREATE_TOPIC")?;
        self.partition(&topic, p.get(1), true)?;
        self.reply(b"OK");
        Ok(())
    }

    fn rdy(&mut self, p: &[Vec<u8>]) -> Result<(), Fail> {
        if self.closing {
            return Ok(());
        }
        if !self.subscribed {
            return Err(Fail::fatal("E_INVALID", "cannot RDY in current state"));
        }
        let count = match p.first() {
            Some(raw) => number(raw, "ready count")?,
            None => 1,
        };
        let max = i64::from(self.shared.options.max_rdy_count);
        if !(0..=max).contains(&count) {
            return Err(Fail::fatal(
                "E_INVALID",
                &format!("RDY count {count} out of range 0-{max}"),
            ));
        }
        if let Some(c) = self.store().clients.get_mut(&self.id) {
            c.rdy = count as u32;
        }
        self.shared.pump();
        Ok(())
    }

    fn message_id(&self, p: &[Vec<u8>], cmd: &str) -> Result<[u8; 16], Fail> {
        if !self.subscribed {
            return Err(Fail::fatal(
                "E_INVALID",
                &format!("cannot {cmd} in current state"),
            ));
        }
        let raw = p.first().ok_or_else(|| {
            Fail::fatal("E_INVALID", &format!("{cmd} insufficient number of params"))
        })?;
        let id: [u8; 16] = raw
            .as_slice()
            .try_into()
            .map_err(|_| Fail::fatal("E_INVALID", "Invalid Message ID"))?;
        if self.shared.options.extensions.partitions() && id == [0u8; 16] {
            return Err(Fail::fatal("E_INVALID", "Invalid Message ID"));
        }
        Ok(id)
    }

    /// Applies `f` to this client's in-flight message `id`; `None` when it is not in flight.
    fn with_flight<R>(
        &self,
        id: &[u8; 16],
        f: impl FnOnce(&mut crate::store::Channel, &mut crate::store::ClientState) -> R,
    ) -> Option<R> {
        let mut store = self.store();
        let sub = store.clients.get(&self.id)?.sub.clone()?;
        let Store {
            topics, clients, ..
        } = &mut *store;
        let channel = topics
            .get_mut(&sub.topic)?
            .partitions
            .get_mut(&sub.partition)?
            .channels
            .get_mut(&sub.channel)?;
        if channel.in_flight.get(id)?.client != self.id {
            return None;
        }
        let client = clients.get_mut(&self.id)?;
        Some(f(channel, client))
    }

    fn fin(&mut self, p: &[Vec<u8>]) -> Result<(), Fail> {
        let id = self.message_id(p, "FIN")?;
        let done = self.with_flight(&id, |channel, client| {
            channel.in_flight.remove(&id);
            client.in_flight = client.in_flight.saturating_sub(1);
            client.finish_count += 1;
        });
        self.shared.pump();
        done.ok_or_else(|| {
            Fail::soft(
                "E_FIN_FAILED",
                format!("FIN {} failed ID not in flight", hex(&id)),
            )
        })
    }

    fn req(&mut self, p: &[Vec<u8>]) -> Result<(), Fail> {
        let id = self.message_id(p, "REQ")?;
        let delay = number(p.get(1).map_or(&b""[..], |v| v), "timeout")?;
        let max = self.shared.options.max_req_timeout.as_millis() as i64;
        let delay = Duration::from_millis(delay.clamp(0, max) as u64);
        let done = self.with_flight(&id, |channel, client| {
            if channel.ordered && !delay.is_zero() {
                // The Youzan server ignores a delayed REQ on an ordered channel: the message
                // stays in flight until its timeout.
                return;
            }
            if let Some(flight) = channel.in_flight.remove(&id) {
                client.in_flight = client.in_flight.saturating_sub(1);
                client.requeue_count += 1;
                channel.requeue_count += 1;
                channel.requeue(flight, now() + delay);
            }
        });
        self.shared.pump();
        done.ok_or_else(|| {
            Fail::soft(
                "E_REQ_FAILED",
                format!("REQ {} failed ID not in flight", hex(&id)),
            )
        })
    }

    fn touch(&mut self, p: &[Vec<u8>]) -> Result<(), Fail> {
        let id = self.message_id(p, "TOUCH")?;
        let done = self.with_flight(&id, |channel, client| {
            if let Some(flight) = channel.in_flight.get_mut(&id) {
                flight.deadline = now() + client.msg_timeout;
            }
        });
        done.ok_or_else(|| {
            Fail::soft(
                "E_TOUCH_FAILED",
                format!("TOUCH {} failed ID not in flight", hex(&id)),
            )
        })
    }

    fn cls(&mut self) -> Result<(), Fail> {
        if !self.subscribed || self.closing {
            return Err(Fail::fatal("E_INVALID", "cannot CLS in current state"));
        }
        self.closing = true;
        if let Some(c) = self.store().clients.get_mut(&self.id) {
            c.closing = true;
        }
        self.reply(b"CLOSE_WAIT");
        Ok(())
    }
}

#[derive(Clone, Copy)]
enum SubKind {
    Plain,
    Ordered,
    Advanced,
}

/// A consume offset (`special:-1`, `virtual_queue:N`, `timestamp:S`).
pub(crate) enum Offset {
    Latest,
    Virtual(u64),
    Time(u64),
}

impl Offset {
    /// The log index a channel moved to this offset continues from.
    pub(crate) fn index_in(&self, partition: &crate::store::Partition) -> usize {
        match *self {
            Offset::Latest => partition.log.len(),
            Offset::Virtual(v) => partition.index_of_offset(v),
            Offset::Time(secs) => partition.index_of_time(secs),
        }
    }
}

/// Parses an offset token; `None` for unknown types and values.
pub(crate) fn parse_offset_token(token: &str) -> Option<Offset> {
    let (kind, value) = token.split_once(':')?;
    let value: i64 = value.parse().ok()?;
    match (kind, value) {
        ("special", -1) => Some(Offset::Latest),
        ("virtual_queue", v) if v >= 0 => Some(Offset::Virtual(v as u64)),
        ("timestamp", v) if v >= 0 => Some(Offset::Time(v as u64)),
        _ => None,
    }
}

fn parse_offset(raw: &[u8]) -> Result<Offset, Fail> {
    let token = text(raw);
    parse_offset_token(&token)
        .ok_or_else(|| Fail::fatal("E_INVALID", &format!("invalid consume offset:{token}")))
}

/// Splits an MPUB body `[u32 n]([u32 len][msg])*`, checking every length against what is left.
fn split_mpub(body: &[u8], max_msg: usize) -> Result<Vec<Bytes>, Fail> {
    let bad = |what: &str| Fail::fatal("E_BAD_BODY", &format!("MPUB {what}"));
    let count = body
        .get(..4)
        .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        .ok_or_else(|| bad("failed to read message count"))?;
    if count == 0 {
        return Err(bad("invalid message count 0"));
    }
    let mut rest = &body[4..];
    let mut out = Vec::new();
    for _ in 0..count {
        let len = rest
            .get(..4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
            .ok_or_else(|| bad("failed to read message body size"))?;
        if len == 0 || len > max_msg {
            return Err(Fail::fatal(
                "E_BAD_MESSAGE",
                &format!("MPUB invalid message body size {len}"),
            ));
        }
        let msg = rest
            .get(4..4 + len)
            .ok_or_else(|| bad("failed to read message body"))?;
        out.push(Bytes::copy_from_slice(msg));
        rest = &rest[4 + len..];
    }
    if !rest.is_empty() {
        return Err(bad("trailing bytes after the last message"));
    }
    Ok(out)
}

/// Ids in error texts: printable as they are, hex otherwise.
fn hex(id: &[u8; 16]) -> String {
    if id.iter().all(u8::is_ascii_alphanumeric) {
        text(id)
    } else {
        id.iter().map(|b| format!("{b:02x}")).collect()
    }
}
