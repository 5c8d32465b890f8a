//! Where a cursor's backlog reads run: on the async worker that asked, or off it.
//!
//! A backlog read (a batch of up to a consumer's buffer, from table files) takes a fraction of a
//! millisecond when those files are in the operating system's page cache, and can take many
//! milliseconds when they have to come from the disk. The slow kind must not hold an async
//! worker: every other task scheduled on it would wait. `tokio::task::block_in_place` hands the
//! worker's tasks to another thread for the time of the read, but that hand-off costs a thread
//! wake-up and a migration per read, and with many channels read at once it took a quarter of
//! the timetick stream's throughput (the `tt_rocksmq` bench) while every read was served from
//! memory.
//!
//! So a cursor reads on the worker as long as its reads find their data in memory, and a read
//! that had to fetch from the disk sends its next reads off the worker, until
//! [`CLEAN_READS_TO_RETURN`] of them in a row fetched nothing from the disk. What "fetched from
//! the disk" means is measured, not guessed from timing: Linux counts, per thread, the bytes a
//! thread caused to be read from storage (`read_bytes` in `/proc/thread-self/io`), and a read
//! is measured on the thread it runs on (`block_in_place` runs it on the calling thread too).
//! Where that counter cannot be read, every backlog read runs off the worker, as before.
//!
//! The cost of the rule: the first read that meets uncached data (after a restart, or when a
//! consumer falls further behind than the page cache holds) runs on the worker, once per such
//! change. The decision itself ([`ReadPlacement`]) is pure state, tested without a disk.

use std::cell::RefCell;
use std::fs::File;

/// Consecutive reads off the worker that must fetch nothing from the disk before a cursor reads
/// on the worker again. Enough that a consumer working through an uncached backlog rarely
/// probes the worker with a read that then waits for the disk; few enough that one cold read
/// does not keep a cached consumer off the worker for long (a read is up to a batch: 1024
/// messages with the consumers' default buffer).
pub(crate) const CLEAN_READS_TO_RETURN: u32 = 16;

/// Where one cursor's next backlog read runs, from what its earlier reads found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct ReadPlacement {
    /// Reads still to run off the worker (0: on it).
    off_worker_reads: u32,
}

impl ReadPlacement {
    /// Whether the next read should run off the worker.
    pub(crate) fn off_worker(&self) -> bool {
        self.off_worker_reads > 0
    }

    /// Records what a read found: `fetched_from_disk` (`None`: unknown, counted as fetched).
    pub(crate) fn record(&mut self, fetched_from_disk: Option<bool>) {
        self.off_worker_reads = if fetched_from_disk.unwrap_or(true) {
            CLEAN_READS_TO_RETURN
        } else {
            self.off_worker_reads.saturating_sub(1)
        };
    }
}

thread_local! {
    /// This thread's own I/O accounting file, opened on first use (`None` where there is none).
    static THREAD_IO: RefCell<Option<Option<File>>> = const { RefCell::new(None) };
}

/// Bytes this thread has caused to be read from storage so far, or `None` where the operating
/// system does not say (not Linux, no `/proc`, or task I/O accounting compiled out).
#[cfg(unix)]
pub(crate) fn thread_disk_read_bytes() -> Option<u64> {
    use std::os::unix::fs::FileExt;
    THREAD_IO.with(|io| {
        let mut io = io.borrow_mut();
        let file = io
            .get_or_insert_with(|| File::open("/proc/thread-self/io").ok())
            .as_ref()?;
        // The file is a few short lines; one positioned read gets all of it, fresh each time.
        let mut text = [0u8; 512];
        let len = file.read_at(&mut text, 0).ok()?;
        read_bytes_field(text.get(..len)?)
    })
}

/// Bytes this thread has read from storage: unknown off Unix.
#[cfg(not(unix))]
pub(crate) fn thread_disk_read_bytes() -> Option<u64> {
    None
}

/// The `read_bytes` value of an `io` accounting file's text.
fn read_bytes_field(text: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(text).ok()?;
    text.lines()
        .find_map(|line| line.strip_prefix("read_bytes:"))
        .and_then(|value| value.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_from_disk_sends_the_next_reads_off_the_worker_until_enough_are_clean() {
        let mut placement = ReadPlacement::default();
        assert!(!placement.off_worker(), "a new cursor reads on the worker");
        placement.record(Some(false));
        assert!(!placement.off_worker());
        placement.record(Some(true));
        for _ in 0..CLEAN_READS_TO_RETURN - 1 {
            assert!(placement.off_worker());
            placement.record(Some(false));
        }
        assert!(placement.off_worker());
        placement.record(Some(true));
        assert!(
            placement.off_worker(),
            "a disk read off the worker starts the count again"
        );
        for _ in 0..CLEAN_READS_TO_RETURN {
            placement.record(Some(false));
        }
        assert!(
            !placement.off_worker(),
            "back on the worker after the clean reads"
        );
    }

    #[test]
    fn an_unknown_outcome_counts_as_a_disk_read() {
        let mut placement = ReadPlacement::default();
        placement.record(None);
        assert!(placement.off_worker());
    }

    #[test]
    fn the_read_bytes_field_is_found_among_the_others() {
        let text =
            b"rchar: 6976\nwchar: 0\nsyscr: 10\nsyscw: 0\nread_bytes: 8192\nwrite_bytes: 0\n";
        assert_eq!(read_bytes_field(text), Some(8192));
        assert_eq!(read_bytes_field(b"rchar: 1\n"), None);
        assert_eq!(read_bytes_field(b"read_bytes: lots\n"), None);
        assert_eq!(read_bytes_field(&[0xff, 0xfe]), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_thread_reads_its_own_disk_counter() {
        let first = thread_disk_read_bytes().expect("Linux accounts each thread's disk reads");
        let again = thread_disk_read_bytes().expect("read again");
        assert!(again >= first);
    }
}
