//! Replays the recorded real-server transcripts (`testd/golden/*.jsonl`, format in
//! `testd/golden/README.md`) against live servers and compares every server-side event.
//!
//! # Use
//!
//! ```ignore
//! mod golden;
//! use golden::Replay;
//!
//! Replay::file("upstream-U1-identify.jsonl")
//!     .endpoint("127.0.0.1:4250", nsqd.tcp_addr())   // recorded host:port → this run's
//!     .endpoint("127.0.0.1:4251", nsqd.http_addr())
//!     .check()                                        // panics with the mismatch report
//!     .await;
//! ```
//!
//! [`Replay::run`] returns the [`Mismatch`] instead of panicking. Every recorded endpoint the
//! file uses (`target` of `<connect>` and HTTP sends) must be given, or the step that uses it
//! fails naming it.
//!
//! # What is replayed and compared
//!
//! * Client side, as recorded: TCP sends as their exact bytes (with recorded message ids
//!   replaced by the ids the server handed out in this run), `<connect>`, `<client close>`,
//!   HTTP requests with their method, path, explicit headers and body. `info` events are
//!   skipped.
//! * Server side: every TCP frame byte for byte, `<EOF>` (the server closed), `<silence N s>`
//!   (nothing arrived, still open), HTTP status, body and `Content-Type` (where recorded).
//! * Except what varies run to run: message timestamps, and message ids when
//!   [`Replay::varying_ids`] (default: files named `upstream-*`), are compared by consistent
//!   labels (equal recorded values ⇔ equal replayed values); in JSON bodies `start_time`,
//!   `uptime*`, `connect_ts`, `remote_address`, `memory`, `depth_ts*`, `last_pub_ts`, `id`
//!   values `127.0.0.1:PORT`, and the `hostname` and Youzan `distributed_id` of node
//!   descriptions (objects with a `broadcast_address`: the recording machine's name, its
//!   coordinator RPC port and worker id) are ignored, `tcp_port` / `http_port` values of
//!   recorded endpoints must be the replay's ports, and lists of names (arrays of strings) and
//!   of node descriptions, map-ordered on the servers, compare as sets. JSON key order is not
//!   compared.
//!   Youzan partition placement varies too: map each recorded nsqd endpoint to the test nsqd
//!   that holds the recorded partitions.
//! * Timing: see [`runner`]. Client actions keep their recorded distance from the last
//!   server event; frames must arrive within their recorded distance plus a margin, and not
//!   much earlier when the recording shows a wait of a second or more.
//!
//! A [`Mismatch`] names the file, step, connection and note, the expected text (the
//! transcript's rendering) and what arrived instead.
#![allow(dead_code)]

pub mod frames;
pub mod http_body;
pub mod http_client;
pub mod runner;
pub mod transcript;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// One transcript to replay, with where its recorded endpoints are in this run.
#[derive(Debug, Clone)]
pub struct Replay {
    file: String,
    endpoints: HashMap<String, SocketAddr>,
    skip: BTreeMap<u32, String>,
    stop_after: Option<u32>,
    start_after: Option<u32>,
    varying_ids: bool,
    early_fraction: f64,
    nested: Option<(u32, Box<Replay>)>,
    adjusted: BTreeMap<u32, Vec<Adjustment>>,
    closes_after: BTreeMap<u32, u32>,
    closes_reason: Vec<String>,
}

/// A recorded JSON value the replay expects differently, and why.
#[derive(Debug, Clone)]
struct Adjustment {
    pointer: String,
    value: serde_json::Value,
    reason: String,
}

impl Replay {
    /// The transcript `testd/golden/<name>`.
    pub fn file(name: &str) -> Replay {
        Replay {
            file: name.to_string(),
            endpoints: HashMap::new(),
            skip: BTreeMap::new(),
            stop_after: None,
            start_after: None,
            varying_ids: name.starts_with("upstream-"),
            early_fraction: 0.5,
            nested: None,
            adjusted: BTreeMap::new(),
            closes_after: BTreeMap::new(),
            closes_reason: Vec::new(),
        }
    }

    /// Sends what was recorded for `recorded` (`host:port`) to `actual`.
    pub fn endpoint(mut self, recorded: &str, actual: SocketAddr) -> Replay {
        self.endpoints.insert(recorded.to_string(), actual);
        self
    }

    /// Leaves these steps out, for `reason` (shown in the test's output). Skipping a request
    /// means skipping its response too; skipping a send means the steps that depend on it.
    pub fn skip(mut self, steps: &[u32], reason: &str) -> Replay {
        for step in steps {
            self.skip.insert(*step, reason.to_string());
        }
        self
    }

    /// Expects `value` at the JSON `pointer` of step `step`'s recorded HTTP body instead of
    /// the recorded value, for `reason` (shown in the test's output): for a figure that
    /// counts traffic the transcript recorded only as a summary (`info` events), which the
    /// replay does not send.
    pub fn adjust(
        mut self,
        step: u32,
        pointer: &str,
        value: serde_json::Value,
        reason: &str,
    ) -> Replay {
        self.adjusted.entry(step).or_default().push(Adjustment {
            pointer: pointer.to_string(),
            value,
            reason: reason.to_string(),
        });
        self
    }

    /// Performs the `<client close>` steps `closes` right after step `after` instead, for
    /// `reason` (shown in the test's output): where the recorder asked the server about
    /// connections it had closed a moment before, and the real server answered before it had
    /// noticed the closes.
    pub fn close_after(mut self, closes: &[u32], after: u32, reason: &str) -> Replay {
        for close in closes {
            self.closes_after.insert(*close, after);
        }
        self.closes_reason
            .push(format!("closes {closes:?} after step {after}: {reason}"));
        self
    }

    /// The body the replay expects for step `step`: the recorded one with its adjustments.
    fn expected_body(&self, step: u32, recorded: &[u8]) -> Vec<u8> {
        let Some(adjustments) = self.adjusted.get(&step) else {
            return recorded.to_vec();
        };
        let Ok(mut json) = serde_json::from_slice::<serde_json::Value>(recorded) else {
            return recorded.to_vec();
        };
        for adjustment in adjustments {
            match json.pointer_mut(&adjustment.pointer) {
                Some(slot) => *slot = adjustment.value.clone(),
                None => panic!(
                    "{} step {step}: no {} in the recorded body",
                    self.file, adjustment.pointer
                ),
            }
        }
        serde_json::to_vec(&json).unwrap_or_else(|_| recorded.to_vec())
    }

    /// Replays only the steps up to and including `step` (a prefix that sets up state).
    pub fn stop_after(mut self, step: u32) -> Replay {
        self.stop_after = Some(step);
        self
    }

    /// Replays only the steps after `step` (the rest of a flow the recorder split in two,
    /// whose first part a [`Replay::stop_after`] replayed earlier on the same servers).
    pub fn start_after(mut self, step: u32) -> Replay {
        self.start_after = Some(step);
        self
    }

    /// Replays `inner` whole right after `step`, while this replay's connections stay open
    /// (the recorder ran one flow inside another: U5 while U3's consumer was connected). The
    /// steps after `step` keep their recorded distances from the end of `inner`.
    pub fn nested(mut self, step: u32, inner: Replay) -> Replay {
        self.nested = Some((step, Box::new(inner)));
        self
    }

    /// Whether message ids vary run to run (compared by labels) or must be equal.
    pub fn varying_ids(mut self, varying: bool) -> Replay {
        self.varying_ids = varying;
        self
    }

    /// A frame recorded ≥ 1 s after the previous event must not arrive before this fraction
    /// of that time (default 0.5; 0 turns the check off).
    pub fn early_fraction(mut self, fraction: f64) -> Replay {
        self.early_fraction = fraction;
        self
    }

    /// The transcript's path.
    pub fn path(&self) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("testd/golden")
            .join(&self.file)
    }

    /// Replays the transcript; the first difference ends it.
    pub async fn run(&self) -> Result<Summary, Mismatch> {
        Box::pin(self.run_file()).await
    }

    async fn run_file(&self) -> Result<Summary, Mismatch> {
        let unreadable = |detail: String| Mismatch {
            file: self.file.clone(),
            step: 0,
            conn: String::new(),
            note: String::new(),
            expected: String::new(),
            actual: String::new(),
            detail,
        };
        let text = std::fs::read_to_string(self.path())
            .map_err(|e| unreadable(format!("cannot read {}: {e}", self.path().display())))?;
        let steps = transcript::parse(&text).map_err(unreadable)?;
        runner::run(self, steps).await
    }

    /// Replays the transcript and panics with the mismatch report on the first difference;
    /// says on stderr what was skipped and why.
    pub async fn check(&self) -> Summary {
        let mut replay = Some(self);
        while let Some(r) = replay {
            for (step, reason) in &r.skip {
                eprintln!("{}: step {step} skipped: {reason}", r.file);
            }
            for moved in &r.closes_reason {
                eprintln!("{}: {moved}", r.file);
            }
            for (step, adjustments) in &r.adjusted {
                for a in adjustments {
                    eprintln!(
                        "{}: step {step} expects {} at {}: {}",
                        r.file, a.value, a.pointer, a.reason
                    );
                }
            }
            replay = r.nested.as_ref().map(|(_, inner)| inner.as_ref());
        }
        match self.run().await {
            Ok(summary) => {
                eprintln!(
                    "{}: {} server events matched in {:.1} s",
                    self.file,
                    summary.checked,
                    summary.elapsed.as_secs_f64()
                );
                summary
            }
            Err(mismatch) => panic!("{mismatch}"),
        }
    }
}

/// What a replay that matched did.
#[derive(Debug, Default, Clone)]
pub struct Summary {
    /// Server-side events compared.
    pub checked: usize,
    /// Steps left out on request.
    pub skipped: usize,
    /// Wall time of the replay.
    pub elapsed: Duration,
}

/// The first place where the server did not answer as recorded.
#[derive(Debug, Clone)]
pub struct Mismatch {
    /// Transcript file name.
    pub file: String,
    /// Step number (0: the file itself).
    pub step: u32,
    /// Recorded connection name.
    pub conn: String,
    /// The recorder's note for the step.
    pub note: String,
    /// The transcript's text for the step.
    pub expected: String,
    /// What arrived (frames rendered as in the transcripts, with raw values).
    pub actual: String,
    /// What differs.
    pub detail: String,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} step {} ({}): {}",
            self.file, self.step, self.conn, self.detail
        )?;
        writeln!(f, "  note:     {}", self.note)?;
        writeln!(f, "  expected: {}", self.expected)?;
        write!(f, "  actual:   {}", self.actual)
    }
}
