//! Dialing one (nsqd, partition): the start offset over HTTP if one is due, then connect,
//! IDENTIFY and the SUB variant of the subscription mode.

use std::sync::Arc;

use tokio::sync::mpsc;

use super::Ev;
use crate::codec::{self, ConsumeOffset};
use crate::conn::{Conn, Event};
use crate::consumer::{ConsumerConfig, SubscribeMode};
use crate::error::{Error, Result};
use crate::http;
use crate::message::{Message, Origin, Shared, Source};

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
        if let Some(offset) = self.offset {
            self.set_offset(origin, partition.unwrap_or(0), offset)
                .await?;
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
        source.set_msg_timeout(conn.negotiated.msg_timeout);
        Ok((conn, source))
    }

    /// Sets the channel's start over HTTP (`/channel/setoffset`): `SUB_ADVANCED` with an
    /// offset would ignore the partition (notes §2.6.1).
    async fn set_offset(
        &self,
        origin: &Origin,
        partition: u32,
        offset: ConsumeOffset,
    ) -> Result<()> {
        let http = self.http.as_ref().ok_or_else(|| Error::Unsupported {
            addr: origin.addr.to_string(),
            what: "a consume offset needs the nsqd's HTTP address (lookupd or nsqd_http)".into(),
        })?;
        let target = format!(
            "/channel/setoffset?topic={}&channel={}&partition={partition}",
            http::query_value(&self.config.topic),
            http::query_value(&self.config.channel)
        );
        let body = offset.to_string();
        let timeout = self.config.conn.read_timeout;
        let (status, reply) =
            http::request(http, "POST", &target, body.as_bytes(), timeout).await?;
        if status != 200 {
            return Err(Error::Protocol {
                addr: http.clone(),
                what: format!(
                    "setoffset answered {status}: {}",
                    String::from_utf8_lossy(&reply)
                ),
            });
        }
        Ok(())
    }
}
