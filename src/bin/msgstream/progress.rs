//! A one-line progress bar on stderr, shown only on a terminal and only once a run has taken
//! longer than a couple of seconds.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

const SHOW_AFTER: Duration = Duration::from_secs(2);
const REDRAW_EVERY: Duration = Duration::from_millis(200);

/// Progress of one phase towards a known total.
pub struct Progress {
    label: &'static str,
    total: u64,
    started: Instant,
    last_draw: Option<Instant>,
    enabled: bool,
}

impl Progress {
    pub fn new(label: &'static str, total: u64) -> Self {
        Progress {
            label,
            total: total.max(1),
            started: Instant::now(),
            last_draw: None,
            enabled: std::io::stderr().is_terminal(),
        }
    }

    /// Records that `done` of the total are done; redraws at most every 200 ms.
    pub fn update(&mut self, done: u64) {
        if !self.enabled || self.started.elapsed() < SHOW_AFTER {
            return;
        }
        if self.last_draw.is_some_and(|t| t.elapsed() < REDRAW_EVERY) {
            return;
        }
        self.last_draw = Some(Instant::now());
        let width = 30;
        let filled = (done.min(self.total) * width / self.total) as usize;
        let rate = done as f64 / self.started.elapsed().as_secs_f64();
        eprint!(
            "\r{:<8} [{}{}] {:>3}% {done}/{} {rate:.0} msgs/s",
            self.label,
            "#".repeat(filled),
            ".".repeat(width as usize - filled),
            done * 100 / self.total,
            self.total
        );
        let _ = std::io::stderr().flush();
    }

    /// Clears the line if anything was drawn.
    pub fn finish(self) {
        if self.last_draw.is_some() {
            eprint!("\r{:80}\r", "");
            let _ = std::io::stderr().flush();
        }
    }
}
