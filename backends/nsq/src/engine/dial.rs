//! Dialing one (nsqd, partition): the start offset over HTTP if one is due, then connect,
//! IDENTIFY and the SUB variant of the subscription mode.

use std::sync::Arc;

use tokio::sync::mpsc;

use super::Ev;
use crate::codec::{self, ConsumeOffset};
use crate::conn::{Conn, Event};
use crate::consumer_config::{ConsumerConfig, SubscribeMode};
use crate::error::{Error, Result};
use crate::message::{Message, Origin, Shared, Source};
use crate::offset::{self, OffsetSet};

/// Everything one dial needs.
pub(super) struct Dial {
    pub config: Arc<ConsumerConfig>,
    pub http: Option<String>,
    pub offset: Option<ConsumeOffset>,
    pub tx: mpsc::UnboundedSender<Ev>,
    pub shared: Arc<Shared>,
    pub out: mpsc::UnboundedSender<Message>,
}

impl Dial {
    /// Sets the start offset if one is due, then opens and subscribes the connection. Its
    /// reader hands messages to the application itself; other frames go to the engine.
    pub(super) async fn dial(
        self,
        origin: &Origin,
        generation: u64,
    ) -> Result<(Conn, Arc<Source>)> {
        let config = &self.config;
        let partition = origin.partition.or(match config.mode {
            SubscribeMode::Plain => None,
            _ => Some(0),
        });
        // A Youzan cluster sets the offset of existing channels only (`404 CHANNEL_NOT_FOUND`
        // otherwise, Y6): then the SUB creates the channel, and the offset is set before the
        // first RDY (sent once the engine has the connection), which moves the subscribed
        // channel too (Y6 366-371), so nothing is delivered from the wrong place.
        let mut after_sub = None;
        if let Some(offset) = self.offset {
            if !self
                .set_offset(origin, partition.unwrap_or(0), offset)
                .await?
            {
                after_sub = Some(offset);
            }
        }
        let command = match config.mode {
            SubscribeMode::Plain => codec::Command::Sub {
                topic: &config.topic,
                channel: &config.channel,
                partition,
            },
            SubscribeMode::Ordered => codec::Command::SubOrdered {
                topic: &config.topic,
                channel: &config.channel,
                partition: partition.unwrap_or(0),
            },
            SubscribeMode::Advanced => codec::Command::SubAdvanced {
                topic: &config.topic,
                channel: &config.channel,
                partition: partition.unwrap_or(0),
                offset: None,
            },
        };
        let source = Arc::new(Source::new(origin.clone(), self.shared.clone()));
        let (tx, shared, out) = (self.tx.clone(), self.shared.clone(), self.out.clone());
        let sink_source = source.clone();
        let conn = Conn::connect(
            &origin.addr,
            &config.conn,
            Some(command),
            config.mode != SubscribeMode::Plain,
            move |event, writer| match event {
                Event::Message(raw) => shared.deliver(&sink_source, writer, raw, &out),
                event => {
                    let origin = sink_source.origin.clone();
                    let _ = tx.send(Ev::Frame(origin, generation, event));
                }
            },
        )
        .await?;
        if let Some(offset) = after_sub {
            match self
                .set_offset(origin, partition.unwrap_or(0), offset)
                .await
            {
                Ok(true) => {}
                Ok(false) => {
                    conn.close().await;
                    return Err(Error::Protocol {
                        addr: origin.addr.to_string(),
                        what: "setoffset: the channel is not there after SUB".into(),
                    });
                }
                Err(e) => {
                    conn.close().await;
                    return Err(e);
                }
            }
        }
        source.set_msg_timeout(conn.negotiated.msg_timeout);
        Ok((conn, source))
    }

    /// Sets the channel's start over HTTP (`/channel/setoffset`): `SUB_ADVANCED` with an
    /// offset would ignore the partition (notes §2.6.1). `false` when the nsqd has no such
    /// channel (`404 CHANNEL_NOT_FOUND`, a coordinator-mode nsqd).
    async fn set_offset(
        &self,
        origin: &Origin,
        partition: u32,
        offset: ConsumeOffset,
    ) -> Result<bool> {
        let http = self.http.as_ref().ok_or_else(|| Error::Unsupported {
            addr: origin.addr.to_string(),
            what: "a consume offset needs the nsqd's HTTP address (lookupd or nsqd_http)".into(),
        })?;
        let set = offset::set_channel_offset(
            http,
            &self.config.topic,
            &self.config.channel,
            partition,
            offset,
            self.config.conn.read_timeout,
        )
        .await?;
        Ok(set == OffsetSet::Moved)
    }
}
