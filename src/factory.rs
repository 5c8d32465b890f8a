//! `Factory`: a configured backend, and the streams over it.

use std::sync::Arc;

use msgstream::mq::{Client, Timestamps};
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
    timestamps: Timestamps,
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
            timestamps: config.stream.timestamps(),
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

    /// What message timestamps are, as `[stream] timestamps` says (opaque, or hybrid with
    /// the configured clock slack).
    pub fn timestamps(&self) -> Timestamps {
        self.timestamps
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
    let options = msgstream_rocksmq::RocksmqOptions::from(&config.rocksmq);
    Ok(Arc::new(
        msgstream_rocksmq::RocksmqClient::connect(options).await?,
    ))
}

#[cfg(not(feature = "rocksmq"))]
async fn open_rocksmq(_config: &Config) -> Result<Arc<dyn Client>> {
    Err(crate::Error::BackendNotCompiled("rocksmq"))
}

#[cfg(feature = "rocketmq")]
async fn open_rocketmq(config: &Config) -> Result<Arc<dyn Client>> {
    let mut options = config.rocketmq.clone();
    options.timestamps = config.stream.timestamps();
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
    let mut options = config.nsq.clone();
    options.timestamps = config.stream.timestamps();
    Ok(Arc::new(msgstream_nsq::NsqClient::connect(options).await?))
}

#[cfg(not(feature = "nsq"))]
async fn open_nsq(_config: &Config) -> Result<Arc<dyn Client>> {
    Err(crate::Error::BackendNotCompiled("nsq"))
}
