//! The histograms of the Youzan fork's `/stats`: message sizes and write latencies per
//! partition (16 buckets each), consume and delivery latencies per channel (12 buckets).
//!
//! Bucket boundaries are the ones the fork documents for its stats: sizes `< 100 B`,
//! `< 1 KiB`, then doubling from 1 KiB (`2 + log2(size / 1 KiB)`); write latencies `< 1024 µs`,
//! then doubling (`1 + log2(µs / 1024)`); consume latencies `< 16 ms`, then doubling
//! (`1 + log2(ms / 16)`); the last bucket takes everything above. Sizes are the message
//! bodies, so `msg_size_stats` follows from what was published (Y3 147: 20 messages under
//! 100 bytes, `[20,0,…]`). The latencies are measured here as the fork measures them and vary
//! run to run.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Buckets of the per-partition histograms.
pub(crate) const WRITE_BUCKETS: usize = 16;
/// Buckets of the per-channel histograms.
pub(crate) const CHANNEL_BUCKETS: usize = 12;

/// What a partition recorded about its writes.
#[derive(Default, Clone)]
pub(crate) struct WriteStats {
    /// `msg_size_stats`: one count per message, by body size.
    pub sizes: [u64; WRITE_BUCKETS],
    /// `msg_write_latency_stats`: one count per write (a PUB, or a whole MPUB), by how long
    /// it took to store.
    pub latencies: [u64; WRITE_BUCKETS],
}

impl WriteStats {
    /// Records one write of messages of `sizes` that took `took`.
    pub fn written(&mut self, sizes: impl IntoIterator<Item = usize>, took: Duration) {
        for size in sizes {
            self.sizes[size_bucket(size)] += 1;
        }
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.latencies[doubling_bucket(micros, 1024, WRITE_BUCKETS)] += 1;
    }
}

/// What a channel recorded about its deliveries.
#[derive(Default, Clone)]
pub(crate) struct ChannelLatencies {
    /// `msg_consume_latency_stats`: delivery to FIN, per finished message.
    pub consume: [u64; CHANNEL_BUCKETS],
    /// `msg_delivery_latency_stats`: publish to delivery, per delivery.
    pub delivery: [u64; CHANNEL_BUCKETS],
}

impl ChannelLatencies {
    /// A message published at `published` (ns since the epoch) was delivered now.
    pub fn delivered(&mut self, published: i64) {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
        let millis = u64::try_from(now.saturating_sub(published) / 1_000_000).unwrap_or(0);
        self.delivery[doubling_bucket(millis, 16, CHANNEL_BUCKETS)] += 1;
    }

    /// A message delivered at `delivered` was finished now.
    pub fn finished(&mut self, delivered: Instant) {
        let millis = u64::try_from(delivered.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.consume[doubling_bucket(millis, 16, CHANNEL_BUCKETS)] += 1;
    }
}

/// The size bucket of a message body of `size` bytes.
fn size_bucket(size: usize) -> usize {
    let size = u64::try_from(size).unwrap_or(u64::MAX);
    if size < 100 {
        0
    } else if size < 1024 {
        1
    } else {
        (2 + (size / 1024).ilog2() as usize).min(WRITE_BUCKETS - 1)
    }
}

/// Bucket 0 below `first`, then one bucket per doubling; the last takes the rest.
fn doubling_bucket(value: u64, first: u64, buckets: usize) -> usize {
    if value < first {
        0
    } else {
        (1 + (value / first).ilog2() as usize).min(buckets - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_fall_into_the_forks_buckets() {
        assert_eq!(size_bucket(0), 0);
        assert_eq!(size_bucket(99), 0);
        assert_eq!(size_bucket(100), 1);
        assert_eq!(size_bucket(1023), 1);
        assert_eq!(size_bucket(1024), 2);
        assert_eq!(size_bucket(2047), 2);
        assert_eq!(size_bucket(2048), 3);
        assert_eq!(size_bucket(usize::MAX), WRITE_BUCKETS - 1);
    }

    #[test]
    fn latencies_double_from_the_first_boundary() {
        assert_eq!(doubling_bucket(1023, 1024, 16), 0);
        assert_eq!(doubling_bucket(1024, 1024, 16), 1);
        assert_eq!(doubling_bucket(4096, 1024, 16), 3);
        assert_eq!(doubling_bucket(15, 16, 12), 0);
        assert_eq!(doubling_bucket(32, 16, 12), 2);
        assert_eq!(doubling_bucket(u64::MAX, 16, 12), 11);
    }

    #[test]
    fn a_write_counts_each_message_once_and_the_write_once() {
        let mut stats = WriteStats::default();
        stats.written([10, 200], Duration::from_micros(10));
        assert_eq!(stats.sizes[..2], [1, 1]);
        assert_eq!(stats.latencies.iter().sum::<u64>(), 1);
    }
}
