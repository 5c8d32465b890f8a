//! A one-line progress bar on stderr (indicatif), drawn only on a terminal and only once a run
//! has taken longer than a couple of seconds, so short runs and piped output stay clean.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

const SHOW_AFTER: Duration = Duration::from_secs(2);

/// Redraws per second at most.
const REDRAW_HZ: u8 = 5;

/// Progress of one phase towards a known total.
pub struct Progress {
    bar: Option<ProgressBar>,
    label: &'static str,
    total: u64,
    started: Instant,
}

impl Progress {
    pub fn new(label: &'static str, total: u64) -> Self {
        Progress {
            bar: None,
            label,
            total: total.max(1),
            started: Instant::now(),
        }
    }

    /// Records that `done` of the total are done.
    pub fn update(&mut self, done: u64) {
        if let Some(bar) = &self.bar {
            self.draw(bar, done);
            return;
        }
        if self.started.elapsed() < SHOW_AFTER || !std::io::stderr().is_terminal() {
            return;
        }
        let bar = ProgressBar::with_draw_target(
            Some(self.total),
            ProgressDrawTarget::stderr_with_hz(REDRAW_HZ),
        )
        .with_prefix(self.label)
        .with_style(
            ProgressStyle::with_template("{prefix:<8} [{bar:30}] {percent:>3}% {pos}/{len} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("#>."),
        );
        self.draw(&bar, done);
        self.bar = Some(bar);
    }

    /// The rate counts from the phase's start (not from when the bar appeared, nor over the
    /// last few updates, which jump with batch sizes).
    fn draw(&self, bar: &ProgressBar, done: u64) {
        let rate = done as f64 / self.started.elapsed().as_secs_f64().max(1e-9);
        bar.set_message(format!("{rate:.0} msgs/s"));
        bar.set_position(done);
    }

    /// Clears the line if anything was drawn.
    pub fn finish(self) {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
    }
}
