//! Range checks of every numeric setting, which serde cannot express: a value outside its
//! range is refused with an `Error::Config` naming the setting, its value and the range,
//! before any backend sizes a queue, a timer or a retry loop by it (`page_size_mb = 0` or
//! `retry_attempts = 4294967296` were accepted and quietly clamped or obeyed).

use super::Config;

/// The longest duration setting, in minutes: a hundred years.
pub const MAX_MINUTES: u64 = 100 * 365 * 24 * 60;
/// The longest timeout or interval setting, in milliseconds: an hour.
pub const MAX_WAIT_MS: u64 = 60 * 60 * 1000;
/// The largest byte-size setting of a message: 1 GiB.
pub const MAX_MESSAGE_BYTES: u64 = 1 << 30;

/// One numeric setting with its allowed range and what its unit is.
struct Bound {
    setting: &'static str,
    value: u64,
    min: u64,
    max: u64,
    unit: &'static str,
}

fn bound(
    setting: &'static str,
    value: impl TryInto<u64>,
    min: u64,
    max: u64,
    unit: &'static str,
) -> Bound {
    Bound {
        setting,
        // A value beyond u64 (a usize on a wider platform) is beyond every range here.
        value: value.try_into().unwrap_or(u64::MAX),
        min,
        max,
        unit,
    }
}

/// Largest `[stream] clock_slack_ms`: a day. A slack that large makes every time search read a
/// day of messages; more is a mistake, not a wish.
const MAX_CLOCK_SLACK_MS: u64 = 24 * 60 * 60 * 1000;

/// Every numeric setting of `config` with its range (a backend compiled out keeps its section
/// as the raw table written, unchecked).
fn bounds(config: &Config) -> Vec<Bound> {
    let stream = &config.stream;
    #[allow(unused_mut)]
    let mut bounds = vec![
        bound(
            "[stream] buffer",
            stream.buffer,
            1,
            super::MAX_BUFFER as u64,
            "messages per channel queue",
        ),
        bound(
            "[stream] retry_attempts",
            stream.retry_attempts,
            1,
            100,
            "attempts, the first included",
        ),
        bound(
            "[stream] clock_slack_ms",
            stream.clock_slack_ms,
            0,
            MAX_CLOCK_SLACK_MS,
            "ms",
        ),
    ];
    #[cfg(feature = "rocksmq")]
    bounds.extend(rocksmq_bounds(&config.rocksmq));
    #[cfg(feature = "rocketmq")]
    bounds.extend(rocketmq_bounds(&config.rocketmq));
    #[cfg(feature = "nsq")]
    bounds.extend(nsq_bounds(&config.nsq));
    bounds
}

#[cfg(feature = "rocksmq")]
fn rocksmq_bounds(rocksmq: &super::RocksmqSection) -> [Bound; 5] {
    [
        bound(
            "[rocksmq] retention_minutes",
            rocksmq.retention_minutes,
            0,
            MAX_MINUTES,
            "minutes",
        ),
        bound(
            "[rocksmq] retention_size_mb",
            rocksmq.retention_size_mb,
            0,
            1 << 30,
            "MiB",
        ),
        bound(
            "[rocksmq] page_size_mb",
            rocksmq.page_size_mb,
            1,
            4096,
            "MiB per retention page",
        ),
        bound(
            "[rocksmq] ignore_groups_idle_minutes",
            rocksmq.ignore_groups_idle_minutes,
            0,
            MAX_MINUTES,
            "minutes, 0: never",
        ),
        bound(
            "[rocksmq] ack_group_ms",
            rocksmq.ack_group_ms,
            0,
            super::MAX_ACK_GROUP_MS,
            "ms, 0: each ack written before it returns",
        ),
    ]
}

#[cfg(feature = "rocketmq")]
fn rocketmq_bounds(rocketmq: &super::RocketmqSection) -> [Bound; 10] {
    let connection = &rocketmq.connection;
    [
        bound(
            "[rocketmq] send_timeout_ms",
            rocketmq.send_timeout_ms,
            1,
            MAX_WAIT_MS,
            "ms",
        ),
        bound(
            "[rocketmq] poll_batch",
            rocketmq.poll_batch,
            1,
            1024,
            "messages per pull",
        ),
        bound(
            "[rocketmq] persist_interval_ms",
            rocketmq.persist_interval_ms,
            1,
            MAX_WAIT_MS,
            "ms",
        ),
        bound(
            "[rocketmq] compress_over_bytes",
            rocketmq.compress_over_bytes,
            0,
            MAX_MESSAGE_BYTES,
            "bytes, 0: never",
        ),
        bound(
            "[rocketmq] max_message_bytes",
            rocketmq.max_message_bytes,
            1,
            MAX_MESSAGE_BYTES,
            "bytes",
        ),
        bound(
            "[rocketmq] connect_timeout_ms",
            connection.connect_timeout_ms,
            1,
            MAX_WAIT_MS,
            "ms",
        ),
        bound(
            "[rocketmq] heartbeat_interval_ms",
            connection.heartbeat_interval_ms,
            1,
            MAX_WAIT_MS,
            "ms",
        ),
        bound(
            "[rocketmq] probe_timeout_ms",
            connection.probe_timeout_ms,
            1,
            MAX_WAIT_MS,
            "ms",
        ),
        bound(
            "[rocketmq] write_timeout_ms",
            connection.write_timeout_ms,
            1,
            MAX_WAIT_MS,
            "ms",
        ),
        bound(
            "[rocketmq] keepalive_ms",
            connection.keepalive_ms,
            0,
            MAX_WAIT_MS,
            "ms, 0: off",
        ),
    ]
}

#[cfg(feature = "nsq")]
fn nsq_bounds(nsq: &super::NsqSection) -> [Bound; 8] {
    [
        bound(
            "[nsq] max_in_flight",
            nsq.max_in_flight,
            1,
            1_000_000,
            "messages",
        ),
        bound(
            "[nsq] max_attempts",
            nsq.max_attempts,
            0,
            u16::MAX.into(),
            "deliveries, 0: never give up",
        ),
        bound(
            "[nsq] requeue_delay_ms",
            nsq.requeue_delay_ms,
            0,
            MAX_WAIT_MS,
            "ms",
        ),
        bound(
            "[nsq] partition",
            nsq.partition,
            0,
            65_535,
            "partition number",
        ),
        bound(
            "[nsq] partitions",
            nsq.partitions,
            1,
            1024,
            "partitions per topic",
        ),
        bound(
            "[nsq] replicas",
            nsq.replicas,
            1,
            64,
            "copies per partition",
        ),
        bound(
            "[nsq] leader_wait_ms",
            nsq.leader_wait_ms,
            0,
            MAX_WAIT_MS,
            "ms",
        ),
        bound(
            "[nsq] output_buffer_timeout_ms",
            nsq.output_buffer_timeout_ms,
            0,
            MAX_WAIT_MS,
            "ms, 0: unbuffered",
        ),
    ]
}

/// The first setting of `config` out of its range, as the message of a config error.
pub fn out_of_range(config: &Config) -> Option<String> {
    bounds(config)
        .into_iter()
        .find(|b| !(b.min..=b.max).contains(&b.value))
        .map(|b| {
            format!(
                "{} = {} is out of range: it must be between {} and {} ({})",
                b.setting, b.value, b.min, b.max, b.unit
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_in_range() {
        assert_eq!(out_of_range(&Config::default()), None);
    }

    #[test]
    fn every_default_is_inside_its_bound() {
        for b in bounds(&Config::default()) {
            assert!(
                (b.min..=b.max).contains(&b.value),
                "default of {}",
                b.setting
            );
        }
    }
}
