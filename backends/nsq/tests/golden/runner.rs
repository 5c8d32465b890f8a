//! The replay loop: plays the client side of a transcript against live servers and checks
//! every server-side event as it arrives, keeping the recording's timing where the flow
//! depends on it.
//!
//! Timing: each event is placed relative to an *anchor*, the last server-side event checked
//! (when it arrived in this replay, when it arrived in the recording). A client action waits
//! until the anchor plus its recorded distance from it (a TOUCH 1.5 s after a delivery comes
//! 1.5 s after the replayed delivery). A frame or `<EOF>` must arrive within its recorded
//! distance plus max(2 s, half that distance), and one recorded at least 1 s after its anchor
//! must not arrive before [`super::Replay::early_fraction`] of that distance (a redelivery
//! after msg_timeout must not come at once). `<silence N s>` waits N s and requires that
//! nothing arrived and the connection stayed open.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::frames::{render, take_frame, Labels};
use super::http_body::BodyRules;
use super::http_client::{self, header, Answer};
use super::transcript::{Kind, Step};
use super::{Mismatch, Replay, Summary};

/// Longest wait for one HTTP answer.
const HTTP_WAIT: Duration = Duration::from_secs(10);

/// Something a connection's reader saw.
enum Incoming {
    Frame(Vec<u8>),
    Eof,
}

/// One open TCP connection of the replay.
struct Conn {
    writer: OwnedWriteHalf,
    events: mpsc::UnboundedReceiver<(Instant, Incoming)>,
    reader: JoinHandle<()>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

struct Run<'a> {
    replay: &'a Replay,
    labels: Labels,
    bodies: BodyRules,
    conns: HashMap<String, Conn>,
    answers: HashMap<String, (Instant, Answer)>,
    /// (arrival in this replay, recorded time) of the last server-side event checked.
    anchor: (Instant, f64),
}

pub(super) async fn run(replay: &Replay, steps: Vec<Step>) -> Result<Summary, Mismatch> {
    let started = Instant::now();
    let mut run = Run {
        replay,
        labels: Labels {
            varying_ids: replay.varying_ids,
            ..Labels::default()
        },
        bodies: BodyRules {
            ports: replay
                .endpoints
                .iter()
                .filter_map(|(recorded, actual)| {
                    let port = recorded.rsplit_once(':')?.1.parse().ok()?;
                    Some((port, actual.port()))
                })
                .collect(),
        },
        conns: HashMap::new(),
        answers: HashMap::new(),
        anchor: (started, 0.0),
    };
    let mut summary = Summary::default();
    // Client closes moved after a later step (`Replay::close_after`): (that step, connection).
    let mut deferred_closes: Vec<(u32, String)> = Vec::new();
    for step in steps {
        if replay.stop_after.is_some_and(|last| step.step > last) {
            break;
        }
        if replay.start_after.is_some_and(|first| step.step <= first) {
            continue;
        }
        if replay.skip.contains_key(&step.step) {
            summary.skipped += 1;
            continue;
        }
        if matches!(step.kind, Kind::Info) {
            continue;
        }
        if let Some(after) = replay.closes_after.get(&step.step) {
            if matches!(step.kind, Kind::ClientClose) {
                deferred_closes.push((*after, step.conn.clone()));
                continue;
            }
        }
        run.step(&step).await.map_err(|(detail, actual)| Mismatch {
            file: replay.file.clone(),
            step: step.step,
            conn: step.conn.clone(),
            note: step.note.clone(),
            expected: step.text.clone(),
            actual,
            detail,
        })?;
        if !step.is_client_action() {
            summary.checked += 1;
        }
        deferred_closes.retain(|(after, conn)| {
            if *after == step.step {
                run.conns.remove(conn);
            }
            *after != step.step
        });
        if let Some((_, inner)) = replay.nested.as_ref().filter(|(at, _)| *at == step.step) {
            let nested = inner.run().await?;
            summary.checked += nested.checked;
            summary.skipped += nested.skipped;
            run.anchor.0 = Instant::now();
        }
    }
    summary.elapsed = started.elapsed();
    Ok(summary)
}

/// A failed step: (what is wrong, what actually happened).
type Failure = (String, String);

fn fail<T>(detail: impl Into<String>, actual: impl Into<String>) -> Result<T, Failure> {
    Err((detail.into(), actual.into()))
}

impl Run<'_> {
    async fn step(&mut self, step: &Step) -> Result<(), Failure> {
        if step.is_client_action() {
            let due = self.anchor.0 + secs(step.t - self.anchor.1);
            tokio::time::sleep_until(due).await;
        }
        match &step.kind {
            Kind::Connect { target } => {
                let addr = self.endpoint(target)?;
                let stream = match TcpStream::connect(addr).await {
                    Ok(s) => s,
                    Err(e) => return fail("connect failed", e.to_string()),
                };
                let _ = stream.set_nodelay(true);
                self.conns.insert(step.conn.clone(), open(stream));
                Ok(())
            }
            Kind::ClientClose => {
                self.conns.remove(&step.conn);
                Ok(())
            }
            Kind::Send(bytes) => {
                let bytes = self.labels.outgoing(bytes);
                let conn = self.conn(&step.conn)?;
                if let Err(e) = conn.writer.write_all(&bytes).await {
                    return fail("write failed", e.to_string());
                }
                Ok(())
            }
            Kind::Frame(expected) => {
                let (at, got) = self.next_event(step).await?;
                let Incoming::Frame(actual) = got else {
                    return fail("the server closed the connection", "<EOF>");
                };
                self.labels
                    .compare(expected, &actual)
                    .or_else(|why| fail(why, render(&actual)))?;
                self.check_not_early(step, at)?;
                self.anchor = (at, step.t);
                Ok(())
            }
            Kind::Eof => {
                let (at, got) = self.next_event(step).await?;
                if let Incoming::Frame(actual) = got {
                    return fail("a frame instead of the close", render(&actual));
                }
                self.anchor = (at, step.t);
                Ok(())
            }
            Kind::Silence(seconds) => {
                let conn = self.conn(&step.conn)?;
                match tokio::time::timeout(secs(*seconds), conn.events.recv()).await {
                    Err(_) => {}
                    Ok(Some((_, Incoming::Frame(actual)))) => {
                        return fail("a frame during the silence", render(&actual))
                    }
                    Ok(_) => return fail("the server closed the connection", "<EOF>"),
                }
                self.anchor = (Instant::now(), step.t);
                Ok(())
            }
            Kind::Request {
                target,
                method,
                path,
                headers,
                body,
            } => {
                let addr = self.endpoint(target)?;
                let body = self.labels.shift_times(body);
                let call = http_client::request(addr, method, path, headers, &body);
                let answer = match tokio::time::timeout(HTTP_WAIT, call).await {
                    Ok(Ok(answer)) => answer,
                    Ok(Err(e)) => return fail("HTTP request failed", e.to_string()),
                    Err(_) => {
                        return fail("no HTTP answer", format!("nothing within {HTTP_WAIT:?}"))
                    }
                };
                self.answers
                    .insert(step.conn.clone(), (Instant::now(), answer));
                Ok(())
            }
            Kind::Response {
                status,
                headers,
                body,
            } => {
                let Some((at, answer)) = self.answers.remove(&step.conn) else {
                    return fail("no HTTP request was sent on this connection", "");
                };
                let shown = format!(
                    "{} {} (content-type {:?})",
                    answer.status,
                    String::from_utf8_lossy(&answer.body),
                    answer.header("content-type")
                );
                if answer.status != *status {
                    return fail("status differs", shown);
                }
                if let Some(kind) = header(headers, "content-type") {
                    if answer.header("content-type") != Some(kind) {
                        return fail(format!("content-type differs (expected {kind:?})"), shown);
                    }
                }
                let expected = self.replay.expected_body(step.step, body);
                self.bodies
                    .compare(&expected, &answer.body)
                    .or_else(|why| fail(why, shown))?;
                self.anchor = (at, step.t);
                Ok(())
            }
            Kind::Info => Ok(()),
        }
    }

    /// The next frame or close on the step's connection, within the step's deadline.
    async fn next_event(&mut self, step: &Step) -> Result<(Instant, Incoming), Failure> {
        let wait = latest(step.t - self.anchor.1);
        let deadline = self.anchor.0 + secs(wait);
        let conn = self.conn(&step.conn)?;
        match tokio::time::timeout_at(deadline, conn.events.recv()).await {
            Ok(Some(event)) => Ok(event),
            Ok(None) => fail("the connection's reader stopped", ""),
            Err(_) => fail(
                "nothing arrived",
                format!("nothing within {wait:.1} s of the previous event"),
            ),
        }
    }

    fn check_not_early(&self, step: &Step, at: Instant) -> Result<(), Failure> {
        let recorded = step.t - self.anchor.1;
        let waited = at.saturating_duration_since(self.anchor.0).as_secs_f64();
        if too_early(recorded, waited, self.replay.early_fraction) {
            return fail(
                format!(
                    "arrived too early: {waited:.2} s after the previous event, recorded {recorded:.2} s"
                ),
                step.text.clone(),
            );
        }
        Ok(())
    }

    fn endpoint(&self, target: &str) -> Result<SocketAddr, Failure> {
        match self.replay.endpoints.get(target) {
            Some(addr) => Ok(*addr),
            None => fail(format!("no endpoint given for {target}"), ""),
        }
    }

    fn conn(&mut self, name: &str) -> Result<&mut Conn, Failure> {
        match self.conns.get_mut(name) {
            Some(conn) => Ok(conn),
            None => fail(format!("connection {name} is not open"), ""),
        }
    }
}

/// Starts a reader that timestamps every whole frame and the close as they arrive.
fn open(stream: TcpStream) -> Conn {
    let (mut rd, writer) = stream.into_split();
    let (tx, events) = mpsc::unbounded_channel();
    let reader = tokio::spawn(async move {
        let mut buffer = Vec::new();
        let mut chunk = [0u8; 16 * 1024];
        loop {
            let n = rd.read(&mut chunk).await.unwrap_or(0);
            let now = Instant::now();
            if n == 0 {
                let _ = tx.send((now, Incoming::Eof));
                return;
            }
            buffer.extend_from_slice(&chunk[..n]);
            while let Some(frame) = take_frame(&mut buffer) {
                let _ = tx.send((now, Incoming::Frame(frame)));
            }
        }
    });
    Conn {
        writer,
        events,
        reader,
    }
}

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s.max(0.0))
}

/// How long after its anchor an event recorded `recorded` s after it may arrive.
pub fn latest(recorded: f64) -> f64 {
    let recorded = recorded.max(0.0);
    recorded + (recorded / 2.0).max(2.0)
}

/// Whether an event recorded `recorded` s after its anchor came too soon after `waited` s:
/// only waits of a second or more are checked, against `fraction` of the recorded wait.
pub fn too_early(recorded: f64, waited: f64, fraction: f64) -> bool {
    recorded >= 1.0 && waited < recorded * fraction
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_may_come_two_seconds_or_half_its_recorded_wait_late() {
        assert_eq!(latest(0.001), 2.001);
        assert_eq!(latest(-0.5), 2.0);
        assert_eq!(latest(2.1), 4.1);
        assert_eq!(latest(29.5), 44.25);
    }

    #[test]
    fn only_a_recorded_wait_of_a_second_or_more_must_be_kept() {
        // A redelivery recorded 2.1 s after the first delivery may not come at once.
        assert!(too_early(2.1, 0.01, 0.5));
        assert!(!too_early(2.1, 1.1, 0.5));
        // A message the real server held for its 250-ms output buffer may come at once.
        assert!(!too_early(0.25, 0.0, 0.5));
        // Fraction 0 turns the check off.
        assert!(!too_early(60.0, 0.0, 0.0));
    }
}
