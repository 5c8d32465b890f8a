//! What each command does to the connection and the store, with nsqd's error codes and its
//! rule that every error is fatal except `E_FIN_FAILED`, `E_REQ_FAILED` and `E_TOUCH_FAILED`.
//! Connection state and handshake live here; subscribing, publishing and in-flight handling in
//! the submodules.

mod inflight;
mod publish;
mod subscribe;

use subscribe::SubKind;
pub(crate) use subscribe::{parse_offset_token, Offset, NO_COORDINATOR};

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tokio::io::BufReader;
use tokio::net::tcp::OwnedReadHalf;
use tokio::sync::{mpsc, Notify};

use crate::heartbeat::Heartbeats;
use crate::output::{Buffering, SharedBuffering};
use crate::store::{frame, Store};
use crate::tcp::{read_body, Line, RESPONSE};
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
    client_id: String,
    hostname: String,
    feature_negotiation: bool,
    heartbeat_interval: i64,
    msg_timeout: i64,
    sample_rate: i64,
    user_agent: String,
    snappy: bool,
    deflate: bool,
    output_buffer_size: i64,
    output_buffer_timeout: i64,
}

/// IDENTIFY's answer with feature negotiation, fields in nsqd's order (the frame is compared
/// byte for byte with the recorded one).
#[derive(Serialize)]
struct IdentifyResponse {
    max_rdy_count: u32,
    version: &'static str,
    max_msg_timeout: i64,
    msg_timeout: u64,
    tls_v1: bool,
    deflate: bool,
    deflate_level: u32,
    max_deflate_level: u32,
    snappy: bool,
    sample_rate: u32,
    auth_required: bool,
    output_buffer_size: u32,
    output_buffer_timeout: u32,
}

/// The state of one connection.
pub(crate) struct Session {
    shared: Arc<Shared>,
    id: u64,
    tx: mpsc::UnboundedSender<Bytes>,
    authed: bool,
    subscribed: bool,
    closing: bool,
    heartbeat: Option<Duration>,
    heartbeats: Option<Heartbeats>,
    msg_timeout: Duration,
    user_agent: String,
    closer: Arc<Notify>,
    /// How the connection's writer buffers deliveries (set by IDENTIFY).
    buffering: SharedBuffering,
}

type Reader = BufReader<OwnedReadHalf>;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// nsqd's `ByteToBase10`: decimal digits only (no sign), the empty string being 0.
fn base10(bytes: &[u8]) -> Option<u64> {
    bytes.iter().try_fold(0u64, |n, b| {
        b.is_ascii_digit()
            .then(|| n.wrapping_mul(10).wrapping_add(u64::from(b - b'0')))
    })
}

/// A numeric parameter, or nsqd's fatal `<what> <value>` (`RDY could not parse count x`).
fn number(bytes: &[u8], what: &str) -> Result<u64, Fail> {
    base10(bytes).ok_or_else(|| Fail::fatal("E_INVALID", &format!("{what} {}", text(bytes))))
}

impl Session {
    pub(crate) fn new(
        shared: Arc<Shared>,
        id: u64,
        tx: mpsc::UnboundedSender<Bytes>,
        buffering: SharedBuffering,
    ) -> Session {
        let heartbeat = shared.options.heartbeat_interval;
        let msg_timeout = shared.options.msg_timeout;
        let heartbeats = Heartbeats::start(tx.clone(), heartbeat);
        Session {
            shared,
            id,
            tx,
            authed: false,
            subscribed: false,
            closing: false,
            heartbeat: Some(heartbeat),
            heartbeats: Some(heartbeats),
            msg_timeout,
            user_agent: String::new(),
            closer: Arc::new(Notify::new()),
            buffering,
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

    fn store(&self) -> crate::StoreGuard<'_> {
        self.shared.store()
    }

    /// The connection closes for silence at `at`: the heartbeats due by then go out first.
    pub(crate) fn silent_until(&self, at: tokio::time::Instant) {
        if let Some(heartbeats) = &self.heartbeats {
            heartbeats.catch_up(at);
        }
    }

    /// Forgets the connection in the store.
    pub(crate) fn end(&mut self) {
        self.heartbeats = None;
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
            (b"MPUB_TRACE", true) => self.mpub_trace(p, reader).await,
            (b"INTERNAL_CREATE_TOPIC", true) => self.create_topic(p),
            (b"RDY", _) => self.rdy(p),
            (b"FIN", _) => self.fin(p),
            (b"REQ", _) => self.req(p),
            (b"TOUCH", _) => self.touch(p),
            (b"CLS", _) => self.cls(),
            (name, false) => Err(Fail::fatal(
                "E_INVALID",
                &format!("invalid command {}", text(name)),
            )),
            // The fork prints the command's words as Go byte slices (Y1 6, Y3 67).
            (name, true) => Err(Fail::fatal(
                "E_INVALID",
                &format!(
                    "invalid command [{}]",
                    std::iter::once(name)
                        .chain(p.iter().map(Vec::as_slice))
                        .map(go_bytes)
                        .collect::<Vec<_>>()
                        .join(" ")
                ),
            )),
        }
    }

    async fn identify(&mut self, reader: &mut Reader) -> Result<(), Fail> {
        // nsqd accepts IDENTIFY again until the connection subscribes (U1 16).
        if self.subscribed || self.closing {
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
        // nsqd checks the output buffer after the heartbeat and before the sample rate and
        // the message timeout (`clientV2.Identify`).
        let buffering = if opts.extensions.partitions() {
            None
        } else {
            let now = *self.buffering.lock().unwrap_or_else(|p| p.into_inner());
            let next = now
                .identify(data.output_buffer_size, data.output_buffer_timeout)
                .map_err(|e| Fail::fatal("E_BAD_BODY", &format!("IDENTIFY {e}")))?;
            Some(next)
        };
        if !(0..=99).contains(&data.sample_rate) {
            return Err(Fail::fatal(
                "E_BAD_BODY",
                &format!("IDENTIFY sample rate ({}) is invalid", data.sample_rate),
            ));
        }
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
        if let Some(buffering) = buffering {
            *self.buffering.lock().unwrap_or_else(|p| p.into_inner()) = buffering;
        }
        if data.snappy && data.deflate {
            return Err(Fail::fatal(
                "E_IDENTIFY_FAILED",
                "cannot enable both deflate and snappy compression",
            ));
        }
        if let Some(connection) = self.store().connections.get_mut(&self.id) {
            connection.identify(data.client_id, data.hostname, data.user_agent.clone());
            if opts.extensions.partitions() {
                connection.output_buffer = crate::connections::fork_output_buffer(
                    data.output_buffer_size,
                    data.output_buffer_timeout,
                );
            }
        }
        self.user_agent = data.user_agent;
        self.heartbeats = None;
        self.heartbeats = self
            .heartbeat
            .map(|interval| Heartbeats::start(self.tx.clone(), interval));
        if !data.feature_negotiation {
            self.reply(b"OK");
            return Ok(());
        }
        // The fork answers with the buffer settings the client asked for (Y1 4: 16384 and
        // 250 asked, 16384 and 250 answered), else its own defaults (notes §2.6.4), and a
        // deflate level of 0.
        let (buffer_size, buffer_timeout, deflate_level) = if opts.extensions.partitions() {
            let (size, timeout) = crate::connections::fork_output_buffer(
                data.output_buffer_size,
                data.output_buffer_timeout,
            );
            (size, timeout, 0)
        } else {
            let (size, timeout) = buffering.unwrap_or_else(Buffering::nsqd).answer();
            (size, timeout, 6)
        };
        let response = IdentifyResponse {
            max_rdy_count: opts.max_rdy_count,
            version: opts.extensions.version(),
            max_msg_timeout: max_timeout,
            msg_timeout: self.msg_timeout.as_millis() as u64,
            tls_v1: false,
            deflate: false,
            deflate_level,
            max_deflate_level: 6,
            snappy: false,
            sample_rate: 0,
            auth_required: opts.auth_secret.is_some(),
            output_buffer_size: buffer_size,
            output_buffer_timeout: buffer_timeout,
        };
        let response = serde_json::to_string(&response)
            .map_err(|_| Fail::fatal("E_IDENTIFY_FAILED", "IDENTIFY failed to encode response"))?;
        self.reply(response.as_bytes());
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
        if let Some(cluster) = &self.shared.cluster {
            return cluster_partition(cluster, topic, param);
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
                    // The fork's text is empty: the frame is `E_TOPIC_NOT_EXIST ` (Y8).
                    return Err(Fail::fatal("E_TOPIC_NOT_EXIST", ""));
                }
            },
        };
        if !exists(&store, pid) {
            if !create {
                return Err(Fail::fatal("E_TOPIC_NOT_EXIST", ""));
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
}

/// The partition of a command on a coordinator-mode nsqd: the named one or the node's own,
/// served only by its elected leader (`E_FAILED_ON_NOT_LEADER `, non-fatal here; SUB makes it
/// fatal) and unknown elsewhere (`E_TOPIC_NOT_EXIST `, fatal). Both texts are empty, as the
/// fork sends them.
fn cluster_partition(
    cluster: &crate::cluster::ClusterNode,
    topic: &str,
    param: Option<&Vec<u8>>,
) -> Result<u32, Fail> {
    let not_here = || Fail::fatal("E_TOPIC_NOT_EXIST", "");
    let pid = match param {
        Some(p) => parse_partition(p)?,
        None => cluster.own_partition(topic).ok_or_else(not_here)?,
    };
    match cluster.access(topic, pid) {
        crate::cluster::Access::Leader => Ok(pid),
        crate::cluster::Access::NotLeader => {
            Err(Fail::soft("E_FAILED_ON_NOT_LEADER", String::new()))
        }
        crate::cluster::Access::NotHere => Err(not_here()),
    }
}

/// A partition parameter, as the fork parses it (`strconv.Atoi`).
fn parse_partition(p: &[u8]) -> Result<u32, Fail> {
    std::str::from_utf8(p)
        .ok()
        .and_then(|s| s.parse::<u32>().ok())
        .ok_or_else(|| {
            Fail::fatal(
                "E_BAD_PARTITION",
                &format!(
                    "topic partition is not valid: strconv.Atoi: parsing {:?}: invalid syntax",
                    text(p)
                ),
            )
        })
}

/// Bytes as Go prints a `[]byte` with `%v`: `[67 82 69]`.
fn go_bytes(bytes: &[u8]) -> String {
    let numbers: Vec<String> = bytes.iter().map(u8::to_string).collect();
    format!("[{}]", numbers.join(" "))
}

/// Ids in error texts: printable as they are, hex otherwise.
fn hex(id: &[u8; 16]) -> String {
    if id.iter().all(u8::is_ascii_alphanumeric) {
        text(id)
    } else {
        id.iter().map(|b| format!("{b:02x}")).collect()
    }
}
