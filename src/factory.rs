//! `Factory`: a configured backend, and the streams over it.

use std::sync::Arc;

use msgstream::mq::Client;
use msgstream::retry::RetryPolicy;
use msgstream::stream::{MsgStream, StreamOptions};
use msgstream::tt::TtMsgStream;

use crate::config::{BackendKind, Config};
use crate::Result;

/// Creates `MsgStream`s and `TtMsgStream`s over the backend a [`Config`] names. Application code
/// written against a factory does not change when the backend does.
pub struct Factory {
    backend: BackendKind,
    client: Arc<dyn Client>,
    options: StreamOptions,
}

impl Factory {
    /// Opens (or connects to) the configured backend.
    pub async fn new(config: &Config) -> Result<Factory> {
        let client = open_client(config).await?;
        let options = StreamOptions::default()
            .with_buffer(config.stream.buffer.max(1))
            .with_retry(RetryPolicy {
                attempts: config.stream.retry_attempts.max(1),
                ..RetryPolicy::default()
            });
        Ok(Factory {
            backend: config.backend,
            client,
            options,
        })
    }

    /// Which backend this factory wires.
    pub fn backend(&self) -> BackendKind {
        self.backend
    }

    /// The mq-layer client, for what the streams do not cover (listing topics, raw producers).
    pub fn client(&self) -> Arc<dyn Client> {
        self.client.clone()
    }

    /// The stream options every stream of this factory gets.
    pub fn stream_options(&self) -> &StreamOptions {
        &self.options
    }

    /// A plain message stream.
    pub fn msg_stream(&self) -> MsgStream {
        MsgStream::new(self.client.clone(), self.options.clone())
    }

    /// A timetick-aligned stream.
    pub fn tt_msg_stream(&self) -> TtMsgStream {
        TtMsgStream::new(self.client.clone(), self.options.clone())
    }

    /// Closes the backend client (streams made by this factory stop with it).
    pub async fn close(&self) {
        self.client.close().await;
    }
}

async fn open_client(config: &Config) -> Result<Arc<dyn Client>> {
    match config.backend {
        BackendKind::Memory => Ok(Arc::new(msgstream::mem::MemoryClient::new())),
        BackendKind::Rocksmq => open_rocksmq(config).await,
        BackendKind::Rocketmq => open_rocketmq(config).await,
        BackendKind::Nsq => open_nsq(config).await,
    }
}

#[cfg(feature = "rocksmq")]
async fn open_rocksmq(config: &Config) -> Result<Arc<dyn Client>> {
    use crate::config::{RecoveryMode, SyncMode};
    use msgstream_rocksmq::{AckWrite, Durability, Recovery, RocksmqClient, RocksmqOptions};
    use std::time::Duration;

    let section = &config.rocksmq;
    let mut options = RocksmqOptions::new(&section.path);
    options.retention = Duration::from_secs(section.retention_minutes.saturating_mul(60));
    options.retention_size_bytes = section.retention_size_mb.saturating_mul(1 << 20);
    options.page_size_bytes = section.page_size_mb.saturating_mul(1 << 20);
    options.ignore_groups_idle_for = (section.ignore_groups_idle_minutes > 0)
        .then(|| Duration::from_secs(section.ignore_groups_idle_minutes.saturating_mul(60)));
    options.ack_write = match section.ack_group_ms {
        0 => AckWrite::Immediate,
        ms => AckWrite::Grouped(Duration::from_millis(ms)),
    };
    options.sync = match section.sync {
        SyncMode::Buffered => Durability::Buffered,
        SyncMode::SyncData => Durability::SyncData,
        SyncMode::SyncAll => Durability::SyncAll,
    };
    options.recovery = match section.recovery {
        RecoveryMode::Report => Recovery::Report,
        RecoveryMode::Strict => Recovery::Strict,
    };
    Ok(Arc::new(RocksmqClient::connect(options).await?))
}

#[cfg(not(feature = "rocksmq"))]
async fn open_rocksmq(_config: &Config) -> Result<Arc<dyn Client>> {
    Err(crate::Error::BackendNotCompiled("rocksmq"))
}

#[cfg(feature = "rocketmq")]
async fn open_rocketmq(config: &Config) -> Result<Arc<dyn Client>> {
    let section = &config.rocketmq;
    let options = msgstream_rocketmq::RocketMqConfig {
        name_servers: section.name_servers.clone(),
        namespace: section.namespace.clone(),
        group_prefix: section.group_prefix.clone(),
        send_timeout_ms: section.send_timeout_ms,
        poll_batch: section.poll_batch,
        persist_interval_ms: section.persist_interval_ms,
        connection: msgstream_rocketmq::ConnectionConfig {
            heartbeat_interval_ms: section.heartbeat_interval_ms,
            probe_timeout_ms: section.probe_timeout_ms,
            ..msgstream_rocketmq::ConnectionConfig::default()
        },
        compress_over_bytes: section.compress_over_bytes,
        max_message_bytes: section.max_message_bytes,
    };
    Ok(Arc::new(
        msgstream_rocketmq::RocketMqClient::connect(options).await?,
    ))
}

#[cfg(not(feature = "rocketmq"))]
async fn open_rocketmq(_config: &Config) -> Result<Arc<dyn Client>> {
    Err(crate::Error::BackendNotCompiled("rocketmq"))
}

#[cfg(feature = "nsq")]
async fn open_nsq(config: &Config) -> Result<Arc<dyn Client>> {
    use crate::config::{NsqExtensions, NsqSpoolSync};
    let section = &config.nsq;
    let options = msgstream_nsq::NsqConfig {
        nsqd: section.nsqd.clone(),
        nsqd_http: section.nsqd_http.clone(),
        lookupd: section.lookupd.clone(),
        max_in_flight: section.max_in_flight,
        max_attempts: section.max_attempts,
        requeue_delay_ms: section.requeue_delay_ms,
        extensions: match section.extensions {
            NsqExtensions::None => msgstream_nsq::Extensions::None,
            NsqExtensions::Partitions => msgstream_nsq::Extensions::Partitions,
        },
        partition: section.partition,
        cluster: section.cluster,
        partitions: section.partitions,
        replicas: section.replicas,
        create_topics: section.create_topics,
        leader_wait_ms: section.leader_wait_ms,
        spool_dir: section.spool_dir.clone(),
        spool_sync: match section.spool_sync {
            NsqSpoolSync::Buffered => msgstream_nsq::SpoolSync::Buffered,
            NsqSpoolSync::SyncData => msgstream_nsq::SpoolSync::SyncData,
        },
    };
    Ok(Arc::new(msgstream_nsq::NsqClient::connect(options).await?))
}

#[cfg(not(feature = "nsq"))]
async fn open_nsq(_config: &Config) -> Result<Arc<dyn Client>> {
    Err(crate::Error::BackendNotCompiled("nsq"))
}
