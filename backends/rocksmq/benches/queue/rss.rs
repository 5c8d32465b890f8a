//! The bench process's resident memory over a stretch of it, from Linux's `/proc/self`.
//!
//! [`Peak::start`] resets the kernel's high-water mark (`VmHWM`) to the current resident size
//! (writing `5` to `/proc/self/clear_refs`, Linux 4.0 and later), so that [`Peak::end`] reads
//! the most the process held between the two, not since it started. Elsewhere both read
//! `None` and the bench prints `na`.

/// A stretch of the process whose peak resident memory is wanted.
pub struct Peak {
    /// Resident MiB when the stretch began.
    start_mib: Option<f64>,
}

/// What a stretch held: its peak, and the peak less what was resident when it began.
#[derive(Clone, Copy)]
pub struct PeakUse {
    pub peak_mib: f64,
    pub growth_mib: f64,
}

impl Peak {
    /// Begins a stretch: resets the high-water mark.
    pub fn start() -> Peak {
        let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
        Peak {
            start_mib: reset.then(|| status_mib("VmRSS:")).flatten(),
        }
    }

    /// Ends the stretch.
    pub fn end(self) -> Option<PeakUse> {
        let start = self.start_mib?;
        let peak = status_mib("VmHWM:")?;
        Some(PeakUse {
            peak_mib: peak,
            growth_mib: (peak - start).max(0.0),
        })
    }
}

/// The largest of `uses` by peak, formatted as the bench's `peak_rss_mib=… rss_growth_mib=…`.
pub fn fields(uses: &[Option<PeakUse>]) -> String {
    let max = |f: fn(&PeakUse) -> f64| {
        uses.iter()
            .map(|u| u.as_ref().map(f))
            .try_fold(0.0f64, |max, v| v.map(|v| max.max(v)))
    };
    match (max(|u| u.peak_mib), max(|u| u.growth_mib)) {
        (Some(peak), Some(growth)) => format!("peak_rss_mib={peak:.0} rss_growth_mib={growth:.0}"),
        _ => "peak_rss_mib=na rss_growth_mib=na".to_string(),
    }
}

/// A `kB` line of `/proc/self/status`, in MiB.
fn status_mib(field: &str) -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kib: f64 = line[field.len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib / 1024.0)
}
