//! `NsqReader` (extensions only): a non-durable cursor as an ephemeral NSQ channel started at
//! an offset, which nsqd deletes when the reader disconnects. Each read message is FINed at
//! once; a seek opens a new ephemeral channel, so nothing of the old one can leak into it.
//!
//! With lookupd configured, each start (open or seek) asks lookupd which nsqd holds the
//! partition and reads from that nsqd's TCP and HTTP addresses directly: the channel's offset is
//! set and the subscription made before `open` returns, and `has_next` asks that same nsqd. A
//! partition that moves meanwhile is found again by the next seek.
//!
//! `has_next` asks nsqd's `/stats` for the channel's depth: a message is available if one is
//! buffered here or the channel still holds one. While messages are in flight between server
//! and reader (delivered but not yet here, or FINed but not yet processed) the answer waits for
//! that exchange to settle, never for new messages.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use msgstream::mq::{Delivery, Message, MessageId, Reader};
use msgstream::msg::SharedStr;
use msgstream::{Error, Result};

use super::client::Shared;
use super::delivered_message;
use crate::codec::ConsumeOffset;
use crate::consumer::Consumer as NsqPush;
use crate::message::Message as NsqMessage;

/// Longest wait for in-flight traffic to settle in `has_next`.
const SETTLE: Duration = Duration::from_secs(5);

pub(crate) struct NsqReader {
    shared: Arc<Shared>,
    topic: String,
    topic_name: SharedStr,
    channel: String,
    partition: u32,
    /// The HTTP addresses `has_next` asks: the nsqd lookupd named, or the configured ones.
    http: Vec<String>,
    inner: Option<NsqPush>,
    peeked: Option<NsqMessage>,
}

/// A channel name no other reader of this process uses.
fn channel_name() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "reader-{}-{}#ephemeral",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

impl NsqReader {
    /// A reader of `topic` on the client's partition, not yet reading anywhere.
    fn unstarted(shared: Arc<Shared>, topic: &str) -> NsqReader {
        let partition = shared.partition().unwrap_or(0);
        NsqReader {
            shared,
            topic: topic.to_string(),
            topic_name: SharedStr::interned(topic),
            channel: String::new(),
            partition,
            http: Vec::new(),
            inner: None,
            peeked: None,
        }
    }

    pub(crate) async fn open(
        shared: Arc<Shared>,
        topic: &str,
        start: &MessageId,
        inclusive: bool,
    ) -> Result<NsqReader> {
        let mut reader = NsqReader::unstarted(shared, topic);
        reader.start_at(start, inclusive).await?;
        Ok(reader)
    }

    /// A reader starting at a consume offset the server resolves (`timestamp:<secs>`: the
    /// first message nsqd stored at or after that second).
    pub(crate) async fn open_at_offset(
        shared: Arc<Shared>,
        topic: &str,
        offset: ConsumeOffset,
    ) -> Result<NsqReader> {
        let mut reader = NsqReader::unstarted(shared, topic);
        reader.start(offset).await?;
        Ok(reader)
    }

    async fn start_at(&mut self, id: &MessageId, inclusive: bool) -> Result<()> {
        let offset = self
            .shared
            .admin
            .start_offset(&self.topic, self.partition, id, inclusive)
            .await?;
        self.start(ConsumeOffset::VirtualQueue(offset)).await
    }

    async fn start(&mut self, offset: ConsumeOffset) -> Result<()> {
        self.stop().await;
        self.channel = channel_name();
        let mut config = self
            .shared
            .consumer_config(&self.topic, &self.channel, Some(offset));
        let admin = &self.shared.admin;
        self.http = if admin.locates() {
            // Dial the partition's nsqd as if configured: the start is then in place when
            // this returns, where a lookupd-driven consumer would subscribe in the background.
            let node = admin.locate(&self.topic).await?;
            config.nsqd = vec![node.tcp];
            config.nsqd_http = vec![node.http.clone()];
            config.lookupd = Vec::new();
            vec![node.http]
        } else {
            admin.http.clone()
        };
        self.inner = Some(self.shared.connect_push(config).await?);
        Ok(())
    }

    async fn stop(&mut self) {
        self.peeked = None;
        if let Some(inner) = self.inner.take() {
            inner.stop().await;
        }
    }

    fn inner(&self) -> Result<&NsqPush> {
        self.shared.check_open()?;
        self.inner.as_ref().ok_or(Error::Closed("nsq reader"))
    }
}

#[async_trait]
impl Reader for NsqReader {
    fn topic(&self) -> &str {
        &self.topic
    }

    async fn next(&mut self) -> Result<Message> {
        let nsq = match self.peeked.take() {
            Some(nsq) => nsq,
            None => self
                .inner()?
                .recv()
                .await
                .ok_or(Error::Closed("nsq reader"))?,
        };
        if let Err(e) = nsq.finish().await {
            tracing::debug!("reader FIN: {e}");
        }
        delivered_message(
            &self.topic_name,
            Some(self.partition),
            &nsq.id(),
            nsq.body(),
            nsq.position(),
            Delivery::default(),
        )
    }

    async fn has_next(&mut self) -> Result<bool> {
        if self.peeked.is_some() {
            return Ok(true);
        }
        let settle_by = Instant::now() + SETTLE;
        loop {
            if let Some(nsq) = self.inner()?.try_recv().await {
                self.peeked = Some(nsq);
                return Ok(true);
            }
            let counts = self
                .shared
                .admin
                .channel_counts_at(&self.http, &self.topic, &self.channel)
                .await?;
            match counts {
                Some((depth, _, _)) if depth > 0 => return Ok(true),
                Some((0, 0, _)) => return Ok(false),
                _ if Instant::now() >= settle_by => return Ok(false),
                _ => tokio::time::sleep(Duration::from_millis(5)).await,
            }
        }
    }

    async fn seek(&mut self, id: &MessageId, inclusive: bool) -> Result<()> {
        self.inner()?;
        self.start_at(id, inclusive).await
    }

    async fn close(&mut self) {
        self.stop().await;
    }
}
