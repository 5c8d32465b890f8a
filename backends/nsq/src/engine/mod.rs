//! The consumer's one task: it owns every connection's RDY, the backoff state and discovery,
//! and reacts to events (frames, answers, timers, lookups) one at a time, so the RDY invariant
//! (sum ≤ `max_in_flight`) is kept without locks. Messages and their answers do not pass
//! through it (see [`crate::message`]): it reads the in-flight counts the connections keep and
//! hears of answers only when they matter to backoff or stopping.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};

use crate::backoff::Backoff;
use crate::codec;
use crate::conn::{Conn, Event};
use crate::consumer_config::ConsumerConfig;
use crate::error::Result;
use crate::lookup::Endpoint;
use crate::message::{Answered, Message, Origin, Shared, Source};
use crate::stats::Counters;

mod dial;
mod discovery;
mod flow;
mod repoll;

use dial::Dial;

/// Requests from the [`crate::Consumer`] handle.
pub(crate) enum Command {
    SetMaxInFlight(u32),
    /// Start the graceful stop; the sender hears once CLS was written to every connection.
    Stop(Option<oneshot::Sender<()>>),
    /// Move the channel of every subscribed partition to the offset (see `seek`).
    Seek(codec::ConsumeOffset, oneshot::Sender<Result<()>>),
}

pub(crate) enum Ev {
    Command(Command),
    Frame(Origin, u64, Event),
    Connected(Origin, u64, Result<(Conn, Arc<Source>)>),
    Answered(Answered),
    Lookup(Result<Vec<Endpoint>>),
    Poll,
    BackoffTimer,
    Redistribute,
    Reconnect(Origin),
    StopTimeout,
}

struct Link {
    conn: Conn,
    generation: u64,
    rdy: u32,
    /// In-flight count and last activity, kept by the connection's deliveries and answers.
    source: Arc<Source>,
    closing: bool,
}

pub(crate) struct Engine {
    config: Arc<ConsumerConfig>,
    tx: mpsc::UnboundedSender<Ev>,
    /// Handed to every connection's reader; dropped with the engine and its connections, which
    /// ends [`crate::Consumer::recv`].
    out: mpsc::UnboundedSender<Message>,
    shared: Arc<Shared>,
    counters: Arc<Counters>,
    stopped: watch::Sender<bool>,
    links: BTreeMap<Origin, Link>,
    connecting: BTreeSet<Origin>,
    /// Generations whose connection closed before `Connected` was handled.
    closed_early: HashSet<u64>,
    /// HTTP address of each known nsqd endpoint (for setting offsets).
    http: BTreeMap<Origin, String>,
    /// Partitions whose start offset was already applied.
    offsets_applied: BTreeSet<Option<u32>>,
    generation: u64,
    backoff: Backoff,
    max_in_flight: u32,
    rotate: usize,
    stopping: bool,
    ever_connected: BTreeSet<Origin>,
    repoll: repoll::Repoll,
    /// Dials that failed since the last connection: the re-poll after one waits longer each
    /// time (see `schedule_redial`).
    failed_dials: u32,
}

fn spawn_after(tx: &mpsc::UnboundedSender<Ev>, delay: Duration, ev: Ev) {
    let tx = tx.clone();
    tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        let _ = tx.send(ev);
    });
}

/// When the first periodic `/lookup` poll comes after the one at start (go-nsq's schedule): a
/// random part of `jitter × interval` (so consumers started together spread their polls),
/// then a whole interval; every `interval` after that.
fn first_lookupd_poll(interval: Duration, jitter: f64, random: u64) -> Duration {
    let fraction = jitter.clamp(0.0, 1.0) * (random % 1000) as f64 / 1000.0;
    interval.mul_f64(fraction) + interval
}

/// A pseudo-random number from the clock, for jitter and random picks.
fn entropy() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos() as u64 ^ d.as_secs())
        .unwrap_or(7)
}

impl Engine {
    /// Starts the task; the oneshot answers once the directly configured nsqds were tried.
    pub(crate) fn start(
        config: ConsumerConfig,
        out: mpsc::UnboundedSender<Message>,
        counters: Arc<Counters>,
        stopped: watch::Sender<bool>,
    ) -> (
        mpsc::UnboundedSender<Command>,
        oneshot::Receiver<Result<()>>,
    ) {
        let (tx, rx) = mpsc::unbounded_channel();
        let (cmd_tx, cmd_rx) = mpsc::unbounded_channel::<Command>();
        let (ready_tx, ready_rx) = oneshot::channel();
        let config = Arc::new(config);
        let engine = Engine {
            backoff: Backoff::new(config.backoff, entropy()),
            max_in_flight: config.max_in_flight,
            shared: Arc::new(Shared::new(config.clone(), counters.clone(), {
                let tx = tx.clone();
                Box::new(move |answered| {
                    let _ = tx.send(Ev::Answered(answered));
                })
            })),
            config,
            tx,
            out,
            counters,
            stopped,
            links: BTreeMap::new(),
            connecting: BTreeSet::new(),
            closed_early: HashSet::new(),
            http: BTreeMap::new(),
            offsets_applied: BTreeSet::new(),
            generation: 0,
            rotate: 0,
            stopping: false,
            ever_connected: BTreeSet::new(),
            repoll: repoll::Repoll::default(),
            failed_dials: 0,
        };
        tokio::spawn(engine.run(rx, cmd_rx, ready_tx));
        (cmd_tx, ready_rx)
    }

    async fn run(
        mut self,
        mut rx: mpsc::UnboundedReceiver<Ev>,
        mut commands: mpsc::UnboundedReceiver<Command>,
        ready: oneshot::Sender<Result<()>>,
    ) {
        if let Err(e) = self.connect_static().await {
            let _ = ready.send(Err(e));
            let _ = self.stopped.send(true);
            return;
        }
        let _ = ready.send(Ok(()));
        if !self.config.lookupd.is_empty() {
            let _ = self.tx.send(Ev::Poll);
            let interval = self.config.lookupd_poll_interval;
            let first = first_lookupd_poll(interval, self.config.lookupd_poll_jitter, entropy());
            let tx = self.tx.clone();
            tokio::spawn(async move {
                let start = tokio::time::Instant::now() + first;
                let mut tick = tokio::time::interval_at(start, interval);
                loop {
                    tick.tick().await;
                    if tx.send(Ev::Poll).is_err() {
                        return;
                    }
                }
            });
        }
        {
            let tx = self.tx.clone();
            let every = self.config.rdy_redistribute_interval;
            tokio::spawn(async move {
                let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
                loop {
                    tick.tick().await;
                    if tx.send(Ev::Redistribute).is_err() {
                        return;
                    }
                }
            });
        }
        loop {
            // The engine holds a sender of `rx`, so it does not end; `commands` ends when the
            // consumer handle is gone, after its Stop.
            let ev = tokio::select! {
                Some(ev) = rx.recv() => ev,
                Some(command) = commands.recv() => Ev::Command(command),
                else => break,
            };
            self.handle(ev).await;
            if self.stopping && self.links.is_empty() && self.connecting.is_empty() {
                break;
            }
        }
        self.counters.connections.store(0, Ordering::Relaxed);
        let _ = self.stopped.send(true);
    }

    /// Connects to the configured nsqds in parallel; the first refusal that is not transient
    /// fails the consumer.
    async fn connect_static(&mut self) -> Result<()> {
        let origins: Vec<Origin> = self
            .config
            .nsqd
            .iter()
            .map(|addr| Origin {
                addr: Arc::from(addr.as_str()),
                partition: self.config.partition,
            })
            .collect();
        for (origin, http) in origins.iter().zip(&self.config.nsqd_http) {
            self.http.insert(origin.clone(), http.clone());
        }
        let mut first_error = None;
        let mut any = false;
        for origin in origins {
            let generation = self.next_generation();
            match self.plan(&origin).dial(&origin, generation).await {
                Ok((conn, source)) => {
                    any = true;
                    self.connected(origin, generation, conn, source).await;
                }
                Err(e) if e.is_transient() => {
                    tracing::warn!(addr = %origin.addr, "nsqd unreachable, retrying: {e}");
                    spawn_after(
                        &self.tx,
                        self.config.reconnect_interval,
                        Ev::Reconnect(origin),
                    );
                    first_error.get_or_insert(e);
                }
                Err(e) => return Err(e),
            }
        }
        match first_error {
            Some(e) if !any && self.config.lookupd.is_empty() => Err(e),
            _ => Ok(()),
        }
    }

    fn next_generation(&mut self) -> u64 {
        self.generation += 1;
        self.generation
    }

    /// What dialing `origin` needs, taken from the engine so the dial can run on its own task.
    fn plan(&self, origin: &Origin) -> Dial {
        Dial {
            config: self.config.clone(),
            http: self.http.get(origin).cloned(),
            offset: match &self.config.resume_at {
                Some(at) => Some(codec::ConsumeOffset::VirtualQueue(
                    at.load(Ordering::Acquire),
                )),
                None => self
                    .config
                    .offset
                    .filter(|_| !self.offsets_applied.contains(&origin.partition)),
            },
            tx: self.tx.clone(),
            shared: self.shared.clone(),
            out: self.out.clone(),
        }
    }

    fn spawn_dial(&mut self, origin: Origin) {
        if self.stopping
            || self.links.contains_key(&origin)
            || !self.connecting.insert(origin.clone())
        {
            return;
        }
        let generation = self.next_generation();
        let plan = self.plan(&origin);
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let result = plan.dial(&origin, generation).await;
            let _ = tx.send(Ev::Connected(origin, generation, result));
        });
    }

    async fn connected(
        &mut self,
        origin: Origin,
        generation: u64,
        conn: Conn,
        source: Arc<Source>,
    ) {
        if self.closed_early.remove(&generation) || self.stopping {
            conn.close().await;
            return;
        }
        if self.config.offset.is_some() {
            self.offsets_applied.insert(origin.partition);
        }
        if !self.ever_connected.insert(origin.clone()) {
            // The metric first: whoever sees the count has the metric recorded too.
            msgstream::metrics::record_reconnect("nsq", &origin.addr);
            self.counters.reconnects.fetch_add(1, Ordering::Relaxed);
        }
        self.links.insert(
            origin,
            Link {
                conn,
                generation,
                rdy: 0,
                source,
                closing: false,
            },
        );
        self.counters
            .connections
            .store(self.links.len() as u64, Ordering::SeqCst);
        self.counters.connected.notify_waiters();
        self.failed_dials = 0;
        self.rebalance().await;
    }

    async fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Command(Command::SetMaxInFlight(n)) => {
                self.max_in_flight = n;
                self.rebalance().await;
            }
            Ev::Command(Command::Stop(sent)) => {
                self.stop().await;
                if let Some(sent) = sent {
                    let _ = sent.send(());
                }
            }
            Ev::Command(Command::Seek(offset, answer)) => self.seek(offset, answer),
            Ev::Frame(origin, generation, event) => self.frame(origin, generation, event).await,
            Ev::Connected(origin, generation, result) => {
                self.connecting.remove(&origin);
                match result {
                    Ok((conn, source)) => self.connected(origin, generation, conn, source).await,
                    Err(e) => {
                        tracing::warn!(addr = %origin.addr, "connect failed: {e}");
                        self.schedule_redial(origin, true);
                    }
                }
            }
            Ev::Answered(answered) => self.answered(answered).await,
            Ev::Lookup(Ok(endpoints)) => {
                self.discovered(endpoints);
                self.repoll_while_unknown();
            }
            Ev::Lookup(Err(e)) => tracing::warn!("lookup failed: {e}"),
            Ev::Poll => self.poll(),
            Ev::BackoffTimer => self.test_the_waters().await,
            Ev::Redistribute => self.redistribute().await,
            Ev::Reconnect(origin) => self.spawn_dial(origin),
            Ev::StopTimeout => {
                for link in std::mem::take(&mut self.links).into_values() {
                    link.conn.close().await;
                }
            }
        }
    }

    /// Sets the channel of every partition this consumer is subscribed to to `offset` on the
    /// nsqd it reads it from, on a task of its own (the engine keeps serving meanwhile); the
    /// fork moves the subscribed connections with the channel. Partitions are set one after
    /// the other; the first failure ends it and is the answer.
    fn seek(&self, offset: codec::ConsumeOffset, answer: oneshot::Sender<Result<()>>) {
        let targets: Vec<(Origin, Option<String>)> = self
            .links
            .keys()
            .map(|origin| (origin.clone(), self.http.get(origin).cloned()))
            .collect();
        let config = self.config.clone();
        tokio::spawn(async move {
            let _ = answer.send(seek_partitions(&config, targets, offset).await);
        });
    }

    async fn frame(&mut self, origin: Origin, generation: u64, event: Event) {
        let current = self
            .links
            .get(&origin)
            .is_some_and(|l| l.generation == generation);
        if !current {
            if matches!(event, Event::Closed(_)) {
                self.closed_early.insert(generation);
            }
            return;
        }
        match event {
            // Handed to the application by the reader itself (see `dial`).
            Event::Message(_) => {}
            Event::Response(data) => {
                if data.as_ref() == codec::CLOSE_WAIT {
                    if let Some(link) = self.links.get_mut(&origin) {
                        link.closing = true;
                    }
                    self.close_if_drained(&origin).await;
                }
            }
            Event::Error(error) => {
                tracing::warn!(addr = %origin.addr, "{} {}", error.code, error.text);
            }
            Event::Closed(reason) => {
                if let Some(reason) = &reason {
                    tracing::warn!(addr = %origin.addr, "connection closed: {reason}");
                }
                self.links.remove(&origin);
                self.counters
                    .connections
                    .store(self.links.len() as u64, Ordering::Relaxed);
                self.schedule_reconnect(origin);
                self.rebalance().await;
            }
        }
    }

    async fn stop(&mut self) {
        if self.stopping {
            return;
        }
        self.stopping = true;
        // Before CLS: every answer from now on reaches the engine, and one that does not was
        // counted before (see `Shared::report`), so `close_if_drained` sees it.
        self.shared.listen(true);
        spawn_after(&self.tx, self.config.stop_timeout, Ev::StopTimeout);
        for link in self.links.values() {
            if let Err(e) = link.conn.writer.send(codec::Command::Cls).await {
                tracing::debug!("CLS not sent: {e}");
            }
        }
    }

    /// Closes a connection that got `CLOSE_WAIT` once nothing of it is in flight.
    async fn close_if_drained(&mut self, origin: &Origin) {
        let drained = self
            .links
            .get(origin)
            .is_some_and(|l| l.closing && l.source.in_flight() == 0);
        if drained {
            if let Some(link) = self.links.remove(origin) {
                link.conn.close().await;
            }
        }
    }
}

/// See [`Engine::seek`].
async fn seek_partitions(
    config: &ConsumerConfig,
    targets: Vec<(Origin, Option<String>)>,
    offset: codec::ConsumeOffset,
) -> Result<()> {
    if targets.is_empty() {
        return Err(crate::Error::NoServer(
            "seek: the consumer has no subscribed connection".into(),
        ));
    }
    for (origin, http) in targets {
        let http = http.ok_or_else(|| crate::Error::Unsupported {
            addr: origin.addr.to_string(),
            what: "a consume offset needs the nsqd's HTTP address (lookupd or nsqd_http)".into(),
        })?;
        let set = crate::offset::set_channel_offset(
            &http,
            &config.topic,
            &config.channel,
            origin.partition.unwrap_or(0),
            offset,
            config.conn.read_timeout,
        )
        .await?;
        if set == crate::OffsetSet::NoChannel {
            return Err(crate::Error::Protocol {
                addr: http,
                what: format!("seek: no channel {} on a subscribed nsqd", config.channel),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_lookupd_poll_waits_an_interval_plus_a_part_of_the_jitter() {
        let interval = Duration::from_secs(60);
        for random in [0, 1, 499, 999, 1_000, u64::MAX] {
            let first = first_lookupd_poll(interval, 0.3, random);
            assert!(first >= interval, "{first:?}");
            assert!(first < interval + interval.mul_f64(0.3), "{first:?}");
        }
        assert_eq!(
            first_lookupd_poll(interval, 0.3, 500),
            Duration::from_secs(69)
        );
        // No jitter, and nonsense jitter, do not move it below or past one more interval.
        assert_eq!(first_lookupd_poll(interval, 0.0, 999), interval);
        assert!(first_lookupd_poll(interval, 7.0, 999) < 2 * interval);
        assert_eq!(first_lookupd_poll(interval, -1.0, 999), interval);
    }
}
