//! Whether a connection is healthy, suspect or dead: a pure state machine (no I/O, no clock;
//! callers pass the instants), driven by the connection's reader, its callers and its monitor.
//!
//! A half-open TCP connection (the peer's host gone, a NAT entry dropped) reports nothing: reads
//! wait and writes succeed into the kernel buffer. So silence is judged by requests instead:
//!
//! - any frame heard from the peer makes the connection **healthy**;
//! - a request that times out makes a healthy connection **suspect**, and a suspect one with a
//!   probe gets a probe (a HEART_BEAT) at once;
//! - a request sent *after* the connection became suspect that times out too (the probe, or any
//!   other) makes it **dead**: the pool closes it and dials anew. Requests sent before it became
//!   suspect do not count twice, so a burst of requests that time out together is one failure;
//! - a socket error makes it dead at once;
//! - a connection with a probe also sends one every `heartbeat` interval while healthy (the
//!   periodic HEART_BEAT the Java client sends to every broker), so an idle connection is judged
//!   too.

use std::time::{Duration, Instant};

/// The judgement on a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Health {
    /// Heard from recently enough, or no failure since.
    Healthy,
    /// A request timed out since the peer was last heard from.
    Suspect,
    /// Closed, failed, or a request sent while suspect timed out too. Final.
    Dead,
}

/// What the connection's monitor does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Close the connection.
    Close,
    /// Send a probe now, then report [`Liveness::probe_done`].
    Probe,
    /// Nothing to do until this instant (`None`: until the state changes).
    WaitUntil(Option<Instant>),
}

/// The state machine of one connection.
#[derive(Debug, Clone)]
pub struct Liveness {
    health: Health,
    /// When the connection became suspect.
    suspect_since: Option<Instant>,
    /// Period of the heartbeat probe; `None` for a connection without probes (name servers).
    heartbeat: Option<Duration>,
    next_heartbeat: Option<Instant>,
    probing: bool,
}

impl Liveness {
    /// A connection opened at `now`; probes every `heartbeat` when given.
    pub fn new(now: Instant, heartbeat: Option<Duration>) -> Liveness {
        Liveness {
            health: Health::Healthy,
            suspect_since: None,
            heartbeat,
            next_heartbeat: heartbeat.map(|period| now + period),
            probing: false,
        }
    }

    /// The current judgement.
    pub fn health(&self) -> Health {
        self.health
    }

    /// A frame came from the peer.
    pub fn heard(&mut self) {
        if self.health == Health::Suspect {
            self.health = Health::Healthy;
            self.suspect_since = None;
        }
    }

    /// A request sent at `sent_at` got no answer by `now`. Returns the new judgement.
    pub fn timed_out(&mut self, sent_at: Instant, now: Instant) -> Health {
        match (self.health, self.suspect_since) {
            (Health::Healthy, _) => {
                self.health = Health::Suspect;
                self.suspect_since = Some(now);
            }
            (Health::Suspect, Some(since)) if sent_at >= since => self.health = Health::Dead,
            _ => {}
        }
        self.health
    }

    /// The socket failed or the connection was closed.
    pub fn failed(&mut self) {
        self.health = Health::Dead;
    }

    /// What to do at `now`. A returned [`Next::Probe`] is outstanding until
    /// [`Liveness::probe_done`]; no other probe is asked for meanwhile.
    pub fn next(&mut self, now: Instant) -> Next {
        if self.health == Health::Dead {
            return Next::Close;
        }
        let Some(period) = self.heartbeat else {
            return Next::WaitUntil(None);
        };
        if self.probing {
            return Next::WaitUntil(None);
        }
        let due = self.next_heartbeat.is_some_and(|at| now >= at);
        if self.health == Health::Suspect || due {
            self.probing = true;
            self.next_heartbeat = Some(now + period);
            return Next::Probe;
        }
        Next::WaitUntil(self.next_heartbeat)
    }

    /// The probe asked for by [`Liveness::next`] finished (answered, failed or timed out; its
    /// outcome reaches the machine through [`Liveness::heard`] / [`Liveness::timed_out`]).
    pub fn probe_done(&mut self) {
        self.probing = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HB: Duration = Duration::from_secs(10);

    fn at(base: Instant, ms: u64) -> Instant {
        base + Duration::from_millis(ms)
    }

    #[test]
    fn a_timeout_makes_suspect_and_a_later_request_timing_out_makes_dead() {
        let t0 = Instant::now();
        let mut l = Liveness::new(t0, None);
        assert_eq!(l.timed_out(at(t0, 0), at(t0, 3000)), Health::Suspect);
        // Sent before the connection became suspect: the same burst, not a second failure.
        assert_eq!(l.timed_out(at(t0, 10), at(t0, 3010)), Health::Suspect);
        assert_eq!(l.timed_out(at(t0, 3000), at(t0, 6000)), Health::Dead);
        l.heard();
        assert_eq!(l.health(), Health::Dead, "dead is final");
        assert_eq!(l.next(at(t0, 6000)), Next::Close);
    }

    #[test]
    fn hearing_from_the_peer_clears_suspicion() {
        let t0 = Instant::now();
        let mut l = Liveness::new(t0, None);
        l.timed_out(t0, at(t0, 3000));
        l.heard();
        assert_eq!(l.health(), Health::Healthy);
        // The next timeout starts a new suspicion instead of killing the connection.
        assert_eq!(l.timed_out(at(t0, 4000), at(t0, 7000)), Health::Suspect);
    }

    #[test]
    fn a_socket_failure_is_dead_at_once() {
        let t0 = Instant::now();
        let mut l = Liveness::new(t0, Some(HB));
        l.failed();
        assert_eq!(l.health(), Health::Dead);
        assert_eq!(l.next(t0), Next::Close);
    }

    #[test]
    fn heartbeats_are_periodic_and_one_at_a_time() {
        let t0 = Instant::now();
        let mut l = Liveness::new(t0, Some(HB));
        assert_eq!(l.next(t0), Next::WaitUntil(Some(t0 + HB)));
        assert_eq!(l.next(t0 + HB), Next::Probe);
        assert_eq!(
            l.next(t0 + HB * 3),
            Next::WaitUntil(None),
            "one probe at a time"
        );
        l.heard();
        l.probe_done();
        assert_eq!(l.next(at(t0 + HB, 5)), Next::WaitUntil(Some(t0 + HB * 2)));
        assert_eq!(l.next(t0 + HB * 2), Next::Probe);
    }

    #[test]
    fn a_suspect_connection_is_probed_at_once_and_a_failed_probe_kills_it() {
        let t0 = Instant::now();
        let mut l = Liveness::new(t0, Some(HB));
        let suspect_at = at(t0, 3000);
        l.timed_out(t0, suspect_at);
        assert_eq!(l.next(suspect_at), Next::Probe);
        assert_eq!(l.timed_out(suspect_at, at(t0, 6000)), Health::Dead);
        l.probe_done();
        assert_eq!(l.next(at(t0, 6000)), Next::Close);
    }

    #[test]
    fn an_answered_probe_restores_health() {
        let t0 = Instant::now();
        let mut l = Liveness::new(t0, Some(HB));
        l.timed_out(t0, at(t0, 3000));
        assert_eq!(l.next(at(t0, 3000)), Next::Probe);
        l.heard();
        l.probe_done();
        assert_eq!(l.health(), Health::Healthy);
        assert_eq!(
            l.next(at(t0, 3001)),
            Next::WaitUntil(Some(at(t0, 3000) + HB))
        );
    }

    #[test]
    fn a_failed_periodic_heartbeat_makes_suspect_then_the_probe_decides() {
        let t0 = Instant::now();
        let mut l = Liveness::new(t0, Some(HB));
        assert_eq!(l.next(t0 + HB), Next::Probe);
        assert_eq!(l.timed_out(t0 + HB, at(t0 + HB, 3000)), Health::Suspect);
        l.probe_done();
        assert_eq!(l.next(at(t0 + HB, 3000)), Next::Probe);
        assert_eq!(
            l.timed_out(at(t0 + HB, 3000), at(t0 + HB, 6000)),
            Health::Dead
        );
    }

    #[test]
    fn without_probes_a_suspect_connection_waits_for_the_next_request() {
        let t0 = Instant::now();
        let mut l = Liveness::new(t0, None);
        l.timed_out(t0, at(t0, 3000));
        assert_eq!(l.next(at(t0, 3000)), Next::WaitUntil(None));
        assert_eq!(l.timed_out(at(t0, 5000), at(t0, 8000)), Health::Dead);
    }
}
