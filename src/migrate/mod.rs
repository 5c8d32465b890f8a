//! Moving channels from one backend to another: [`Migration`] copies each channel's messages
//! (timeticks included) in order, with their payloads and properties, and translates positions
//! saved on the source into positions on the target, so a `TtMsgStream` that stopped on the
//! source resumes on the target with exactly the packs it would have read next.
//!
//! ```no_run
//! # async fn run(source: std::sync::Arc<dyn msgstream_facade::msgstream::mq::Client>,
//! #              target: std::sync::Arc<dyn msgstream_facade::msgstream::mq::Client>,
//! #              saved: Vec<msgstream_facade::msgstream::msg::MsgPosition>)
//! # -> msgstream_facade::Result<()> {
//! use msgstream_facade::migrate::{MigrateOptions, Migration};
//! let options = MigrateOptions::new(["by-dev-dml_0", "by-dev-dml_1"]).with_positions(saved);
//! let report = Migration::prepare(source, target, options).await?.run_to_end().await?;
//! // report.positions: where the stopped consumer resumes on the target.
//! # Ok(()) }
//! ```
//!
//! # Exactly once, after any crash
//!
//! Progress is kept in the data itself: every copied message carries its source id in the
//! reserved property [`SOURCE_ID_PROPERTY`]. A target channel is therefore always a prefix of
//! its source channel (a channel is copied in order, each write acknowledged before the next
//! batch, and a batch is one append), and its last message says where that prefix ends. A
//! migration that starts again (after a kill, a power loss, Ctrl-C) reads each target
//! channel's last message and copies from the source message after the one it names: nothing
//! is copied twice and nothing is skipped, and there is no progress file that a crash could
//! leave behind the data. The last message is found through the target's latest id and a
//! reader; on a target with readers but no latest id, by reading the channel once from its
//! start; a target without readers is refused (`Error::Unsupported`), since it could not tell.
//! Before it looks, a run writes one message to a fence channel at the target (a broker that
//! makes a killed connection's last write readable only when the next write arrives then has
//! done so: rocketmq-rust's does) and waits until each channel's end stays put for
//! [`MigrateOptions::settle`] (a write still being processed when the next run starts).
//!
//! # Bounded memory
//!
//! Each channel holds one batch (at most [`MigrateOptions::batch`] messages of at most
//! [`MAX_BATCH_BYTES`] together) between reading and writing it.

mod copy;
mod prepare;
mod resume;
mod stores;
mod translate;

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use msgstream::mq::Client;
use msgstream::msg::MsgPosition;

use crate::Result;
use copy::{ChannelCopy, ChannelStats};

pub use stores::same_store;
pub use translate::translate_positions;

/// The property each copied message carries: its id at the source, lowercase hex. It is how a
/// restarted migration finds where it stopped and how positions are translated. A message
/// copied again (a second migration onward) carries the id of its latest source.
pub const SOURCE_ID_PROPERTY: &str = "msgstream.migrated-from";

/// The most payload bytes a batch gathers before it is written, whatever its message count.
pub const MAX_BATCH_BYTES: usize = 4 << 20;

/// What to migrate and how.
///
/// `#[non_exhaustive]`: build with [`MigrateOptions::new`] and the `with_*` methods.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct MigrateOptions {
    /// Channels to copy (same names at the target).
    pub channels: Vec<String>,
    /// Positions saved on the source, to translate into positions on the target (any subset of
    /// the channels, at most one each).
    pub positions: Vec<MsgPosition>,
    /// Keep copying new source messages until stopped, instead of ending once caught up.
    pub follow: bool,
    /// Messages per write at most (default 256).
    pub batch: usize,
    /// How often [`MigrationEvent::Progress`] is reported (default one second).
    pub progress_every: Duration,
    /// How long a target channel's end must stay put before a run resumes after it (default
    /// one second; see the module's *Exactly once*).
    pub settle: Duration,
}

impl MigrateOptions {
    /// Copy `channels` once, to the end, translating no position.
    pub fn new<S: Into<String>>(channels: impl IntoIterator<Item = S>) -> Self {
        MigrateOptions {
            channels: channels.into_iter().map(Into::into).collect(),
            positions: Vec::new(),
            follow: false,
            batch: 256,
            progress_every: Duration::from_secs(1),
            settle: Duration::from_secs(1),
        }
    }

    /// Same options, translating `positions` (saved on the source).
    pub fn with_positions(mut self, positions: Vec<MsgPosition>) -> Self {
        self.positions = positions;
        self
    }

    /// Same options, copying new messages until stopped.
    pub fn following(mut self) -> Self {
        self.follow = true;
        self
    }

    /// Same options, reporting progress every `every`.
    pub fn with_progress_every(mut self, every: Duration) -> Self {
        self.progress_every = every;
        self
    }

    /// Same options, resuming once a target channel's end stayed put for `settle` (zero:
    /// at once, safe only when no killed run's write can still be on its way, as on an
    /// embedded target).
    pub fn with_settle(mut self, settle: Duration) -> Self {
        self.settle = settle;
        self
    }

    /// Same options, writing at most `batch` messages at a time (at least one).
    pub fn with_batch(mut self, batch: usize) -> Self {
        self.batch = batch.max(1);
        self
    }
}

/// One channel's state during and after a migration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelProgress {
    /// The channel.
    pub channel: String,
    /// Messages copied by this run.
    pub copied: u64,
    /// Payload bytes copied by this run.
    pub bytes: u64,
    /// Whether an earlier run had already copied part of the channel (this run resumed).
    pub resumed: bool,
    /// An upper bound of how far the target is behind the source: zero while every message
    /// the source holds is copied, else the time since that was last so. `None` until the
    /// channel first caught up.
    pub lag: Option<Duration>,
}

/// Totals of a migration so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationProgress {
    /// Per channel, in the order given.
    pub channels: Vec<ChannelProgress>,
    /// Since the copy started.
    pub elapsed: Duration,
}

impl MigrationProgress {
    /// Messages copied by this run, all channels.
    pub fn copied(&self) -> u64 {
        self.channels.iter().map(|c| c.copied).sum()
    }

    /// Payload bytes copied by this run, all channels.
    pub fn bytes(&self) -> u64 {
        self.channels.iter().map(|c| c.bytes).sum()
    }

    /// Whether every channel is caught up right now.
    pub fn caught_up(&self) -> bool {
        self.channels.iter().all(|c| c.lag == Some(Duration::ZERO))
    }

    /// The largest lag over the channels (`None` while one never caught up).
    pub fn lag(&self) -> Option<Duration> {
        self.channels
            .iter()
            .map(|c| c.lag)
            .try_fold(Duration::ZERO, |max, lag| lag.map(|l| max.max(l)))
    }
}

/// What a running migration reports.
#[derive(Debug)]
#[non_exhaustive]
pub enum MigrationEvent<'a> {
    /// Periodically (see [`MigrateOptions::progress_every`]).
    Progress(&'a MigrationProgress),
    /// Every channel holds everything the source had a moment ago; reported each time this
    /// becomes true with more copied (once, at the end, without `follow`).
    CaughtUp(&'a MigrationProgress),
    /// The positions, translated to the target, once every channel first caught up (the
    /// messages they name are then at the target): a consumer may resume there from now on.
    Translated(&'a [MsgPosition]),
}

/// The outcome of [`Migration::run`].
#[derive(Debug, Clone, PartialEq)]
pub struct MigrationReport {
    /// Final totals.
    pub progress: MigrationProgress,
    /// The translated positions (empty when none were given, or when stopped before every
    /// channel caught up).
    pub positions: Vec<MsgPosition>,
    /// Whether a stop request ended the run while a channel was behind: run the migration
    /// again to continue.
    pub interrupted: bool,
}

/// A checked migration, ready to copy: [`Migration::prepare`] found every input valid and
/// where each target channel's copy stands, and wrote nothing.
pub struct Migration {
    source: Arc<dyn Client>,
    target: Arc<dyn Client>,
    options: MigrateOptions,
    channels: Vec<ChannelCopy>,
}

impl Migration {
    /// Checks the migration before anything is written: the clients are two stores
    /// ([`crate::Error::SameStore`]), the source can be read by readers and the target's end
    /// can be found (`Unsupported` otherwise), each channel exists at the source
    /// ([`crate::Error::UnknownSourceChannel`]), each position is of a migrated channel and
    /// names a message the source holds ([`crate::Error::MigrationPositions`]), and each target
    /// channel is empty or ends with a copied message ([`crate::Error::ForeignTarget`]).
    pub async fn prepare(
        source: Arc<dyn Client>,
        target: Arc<dyn Client>,
        options: MigrateOptions,
    ) -> Result<Migration> {
        let channels = prepare::check(&source, &target, &options).await?;
        Ok(Migration {
            source,
            target,
            options,
            channels,
        })
    }

    /// Copies until every channel caught up (or, with `follow`, until `stop` completes),
    /// reporting through `on_event`. A `stop` before then ends the run after the batches being
    /// written (the report says `interrupted`); what was written stays, and a later run
    /// continues from there.
    pub async fn run(
        self,
        stop: impl Future<Output = ()>,
        mut on_event: impl FnMut(MigrationEvent<'_>),
    ) -> Result<MigrationReport> {
        let Migration {
            source,
            target,
            options,
            mut channels,
        } = self;
        let started = Instant::now();
        let (stopping, stopped) = tokio::sync::watch::channel(false);
        let wake = Arc::new(tokio::sync::Notify::new());
        let stats: Vec<Arc<ChannelStats>> = channels.iter().map(|c| c.stats.clone()).collect();
        let progress = || MigrationProgress {
            channels: stats.iter().map(|s| s.snapshot()).collect(),
            elapsed: started.elapsed(),
        };
        let copiers =
            futures::future::try_join_all(channels.iter_mut().map(|channel| {
                channel.run(&source, &target, &options, stopped.clone(), wake.clone())
            }));
        let mut copiers = std::pin::pin!(copiers);
        let mut stop = std::pin::pin!(stop);
        let mut ticks =
            tokio::time::interval(options.progress_every.max(Duration::from_millis(10)));
        ticks.tick().await;
        let mut translated: Option<Vec<MsgPosition>> = None;
        let mut reported_copied = None;
        let mut stop_seen = false;
        let finished = loop {
            tokio::select! {
                result = &mut copiers => {
                    result?;
                    break progress();
                }
                () = &mut stop, if !stop_seen => {
                    stop_seen = true;
                    let _ = stopping.send(true);
                }
                _ = ticks.tick() => on_event(MigrationEvent::Progress(&progress())),
                () = wake.notified() => {
                    let now = progress();
                    if now.caught_up() && reported_copied != Some(now.copied()) {
                        reported_copied = Some(now.copied());
                        on_event(MigrationEvent::CaughtUp(&now));
                        if translated.is_none() {
                            let positions =
                                translate_positions(target.as_ref(), &options.positions).await?;
                            on_event(MigrationEvent::Translated(&positions));
                            translated = Some(positions);
                        }
                    }
                }
            }
        };
        let interrupted = !finished.caught_up();
        if !interrupted && translated.is_none() {
            if reported_copied != Some(finished.copied()) {
                on_event(MigrationEvent::CaughtUp(&finished));
            }
            let positions = translate_positions(target.as_ref(), &options.positions).await?;
            on_event(MigrationEvent::Translated(&positions));
            translated = Some(positions);
        }
        Ok(MigrationReport {
            progress: finished,
            positions: translated.unwrap_or_default(),
            interrupted,
        })
    }

    /// [`Migration::run`] without a stop request or events: copies until caught up.
    pub async fn run_to_end(mut self) -> Result<MigrationReport> {
        self.options.follow = false;
        self.run(std::future::pending(), |_| {}).await
    }
}
