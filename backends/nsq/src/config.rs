//! `[nsq]` configuration of the msgstream backend.

use std::path::PathBuf;

use serde::Deserialize;

pub use crate::spool::SpoolSync;

/// Which server flavour the backend talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Extensions {
    /// Upstream nsqd: no offsets, so no seek, readers or latest id; best-effort order.
    #[default]
    None,
    /// Youzan nsqd: topics live in partitions, deliveries carry offsets, so ids are
    /// `(partition, offset, raw size)`, seek re-subscribes from an offset and the latest id is
    /// read from the fork's HTTP API.
    Partitions,
}

/// Settings of [`crate::NsqClient`].
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NsqConfig {
    /// nsqd TCP addresses (`host:port`), used for publishing and, without lookupd, consuming.
    pub nsqd: Vec<String>,
    /// The HTTP address of each nsqd, in the same order. Needed for seek (setting a channel's
    /// offset), the latest id (`/stats` and `/message/get`), listing and deleting topics and
    /// subscriptions, and for starting a new subscription at `Latest`; without it those are
    /// `Unsupported`.
    pub nsqd_http: Vec<String>,
    /// nsqlookupd HTTP addresses; when set, consumers discover nsqds through them, and readers
    /// (with partitions) dial the nsqd `/lookup` lists for their partition, so readers need no
    /// `nsqd_http` then.
    pub lookupd: Vec<String>,
    /// Most unacknowledged messages a consumer holds (capped by the server's
    /// `max_rdy_count`). A timetick-aligned stream acks only once a tick completes a pack, so
    /// each channel's ticks must come within this many messages.
    pub max_in_flight: u32,
    /// Deliveries after which a message is given up (FINed and logged); 0 never gives up.
    pub max_attempts: u16,
    /// Delay of the automatic requeue, per attempt, in milliseconds.
    pub requeue_delay_ms: u64,
    /// Server flavour.
    pub extensions: Extensions,
    /// The partition every channel lives in (`extensions = "partitions"`).
    pub partition: u32,
    /// The nsqds run with the Youzan coordinator (a cluster, `extensions = "partitions"` and
    /// `lookupd` needed): topics are created and deleted through nsqlookupd
    /// (`/topic/create`, `/topic/delete`), each partition is published to and read from the
    /// leader lookupd names for it, and a partition without a leader yet is waited for, up to
    /// `leader_wait_ms`. Without it, a Youzan nsqd is standalone: topics are created with
    /// `INTERNAL_CREATE_TOPIC` on the configured nsqds.
    pub cluster: bool,
    /// Partitions of a topic the client creates in a cluster (`partition_num`); must exceed
    /// `partition`.
    pub partitions: u32,
    /// Copies of each partition of a topic the client creates in a cluster (`replicator`);
    /// at most the number of nsqds.
    pub replicas: u32,
    /// Whether the client creates the topics of the channels it uses. With `false` (clusters
    /// whose operators create topics), using a channel whose topic does not exist is
    /// `UnknownChannel` naming it.
    pub create_topics: bool,
    /// How long a publish, a subscription start or a topic creation waits for a partition's
    /// leader in a cluster (a new topic's partitions get leaders 8-16 s after the create on
    /// a real one; a failover takes a similar time), retrying `E_FAILED_ON_NOT_LEADER` with
    /// backoff. Then it fails with a timeout.
    pub leader_wait_ms: u64,
    /// Where consumers that read one message in flight at a time keep the messages they FINed
    /// but the application has not acked yet (the timetick stream's channels, where the server
    /// has no ordered channel with a commit point: upstream nsqd, or partitions without
    /// `nsqd_http`). A restart replays them first, so it must be the same directory from run
    /// to run, and local to the consuming process.
    pub spool_dir: PathBuf,
    /// What a spooled message survives before it is FINed.
    pub spool_sync: SpoolSync,
    /// How often nsqd flushes what it buffered for a consumer, in milliseconds; 0 writes every
    /// delivery at once (no buffering on the server). nsqd's own default (250 ms) holds a lone
    /// message up to that long while a consumer has RDY to spare; nsqd accepts 25 ms to 30 s.
    pub output_buffer_timeout_ms: u64,
    /// What the streams' timestamps are. With [`msgstream::mq::Timestamps::Hybrid`] (Milvus
    /// hybrid timestamps from a clock at most `clock_slack_ms` ahead of the nsqds'), a Youzan
    /// cluster, which indexes each message by the second an nsqd stored it in, can seek by time
    /// (`Capabilities::seek_time`); opaque, seeking by time is `Unsupported`. Not a key of
    /// `[nsq]`: the facade sets it from `[stream] timestamps` and `clock_slack_ms`, which every
    /// backend shares.
    #[serde(skip)]
    pub timestamps: msgstream::mq::Timestamps,
}

impl Default for NsqConfig {
    fn default() -> Self {
        NsqConfig {
            nsqd: vec!["127.0.0.1:4150".into()],
            nsqd_http: Vec::new(),
            lookupd: Vec::new(),
            max_in_flight: 256,
            max_attempts: 0,
            requeue_delay_ms: 1000,
            extensions: Extensions::None,
            partition: 0,
            cluster: false,
            partitions: 1,
            replicas: 1,
            create_topics: true,
            leader_wait_ms: 30_000,
            spool_dir: PathBuf::from("./data/nsq-spool"),
            spool_sync: SpoolSync::Buffered,
            output_buffer_timeout_ms: 0,
            timestamps: msgstream::mq::Timestamps::Opaque,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_nsq_section_and_names_unknown_keys() {
        let config: NsqConfig = serde_json::from_str(
            r#"{"nsqd":["a:1"],"extensions":"partitions","partition":2,"max_in_flight":9,"spool_sync":"sync_data"}"#,
        )
        .expect("config");
        assert_eq!(config.extensions, Extensions::Partitions);
        assert_eq!((config.partition, config.max_in_flight), (2, 9));
        assert_eq!(config.spool_sync, SpoolSync::SyncData);
        assert_eq!(
            config.requeue_delay_ms,
            NsqConfig::default().requeue_delay_ms
        );
        let unknown =
            serde_json::from_str::<NsqConfig>(r#"{"nsqds":[]}"#).expect_err("unknown key");
        assert!(unknown.to_string().contains("nsqds"), "{unknown}");
    }
}
