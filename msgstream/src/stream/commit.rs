//! What a stream has received but not yet committed, per channel, and committing it.
//!
//! The streams ack a message only once the application has had the pack it belongs to (by
//! default when it asks for the next pack, or explicitly through `commit`). Until then each
//! received message waits here as an [`AckToken`]: its id and delivery epoch (no data). An ack
//! rebuilds the [`Message`] the consumer expects from the token and the channel's shared name.
//!
//! A commit names a resume point per channel (a pack's end position): every token received
//! before it, in arrival order, is acknowledged, and the point itself too when it is a tick
//! or a message already handed over. On strictly ordered backends, whose acks are cumulative,
//! that is one ack per channel per commit (the last token); elsewhere each token is acked.
//! A restart from the subscription therefore resumes exactly at the first message the
//! application had not finished (at-least-once, never a skip).

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::Bytes;

use crate::mq::{Acker, Delivery, Message, MessageId, Properties};
use crate::msg::SharedStr;
use crate::Result;

/// What acking a received message needs: which message, from which delivery.
#[derive(Debug, Clone)]
pub(crate) struct AckToken {
    pub(crate) id: MessageId,
    pub(crate) delivery: Delivery,
}

impl From<&Message> for AckToken {
    fn from(message: &Message) -> Self {
        AckToken {
            id: message.id.clone(),
            delivery: message.delivery,
        }
    }
}

/// One received message waiting for its commit.
#[derive(Debug)]
struct Token {
    token: AckToken,
    /// Whether the point itself is committed when a commit names it: ticks, and messages of the
    /// plain stream (handed over one by one), are; a buffered tt message named as the first
    /// one still held is not.
    passed: bool,
}

struct ChannelLog {
    acker: Arc<dyn Acker>,
    topic: SharedStr,
    tokens: VecDeque<Token>,
}

impl ChannelLog {
    async fn ack(&self, token: AckToken) -> Result<()> {
        let message = Message {
            topic: self.topic.clone(),
            id: token.id,
            payload: Bytes::new(),
            properties: Properties::new(),
            delivery: token.delivery,
        };
        self.acker.ack(&message).await
    }
}

/// The uncommitted tokens of every channel of one stream, in subscription order.
pub(crate) struct CommitLog {
    cumulative: bool,
    channels: Vec<ChannelLog>,
}

impl CommitLog {
    /// An empty log; `cumulative` when the backend's acks are cumulative (strict order).
    pub(crate) fn new(cumulative: bool) -> Self {
        CommitLog {
            cumulative,
            channels: Vec::new(),
        }
    }

    /// Adds channel `topic` acked through `acker`; returns its index (the pump's index).
    pub(crate) fn add_channel(&mut self, acker: Arc<dyn Acker>, topic: &str) -> usize {
        self.channels.push(ChannelLog {
            acker,
            topic: SharedStr::interned(topic),
            tokens: VecDeque::new(),
        });
        self.channels.len() - 1
    }

    /// Records a received message of `channel`; `passed` as explained on [`Token`].
    pub(crate) fn received(&mut self, channel: usize, token: AckToken, passed: bool) {
        if let Some(log) = self.channels.get_mut(channel) {
            log.tokens.push_back(Token { token, passed });
        }
    }

    /// Forgets every token of `channel` (after a seek: those deliveries are stale).
    pub(crate) fn reset(&mut self, channel: usize) {
        if let Some(log) = self.channels.get_mut(channel) {
            log.tokens.clear();
        }
    }

    /// Uncommitted tokens held, all channels together.
    pub(crate) fn len(&self) -> usize {
        self.channels.iter().map(|c| c.tokens.len()).sum()
    }

    /// Commits `channel` up to the resume point `id`: every token received before the one with
    /// that id, and that one too if it is passed. An id not in the log (already committed, or a
    /// point before anything received) commits nothing.
    pub(crate) async fn commit(&mut self, channel: usize, id: &MessageId) -> Result<()> {
        let cumulative = self.cumulative;
        let Some(log) = self.channels.get_mut(channel) else {
            return Ok(());
        };
        let Some(index) = log.tokens.iter().position(|t| t.token.id == *id) else {
            return Ok(());
        };
        let through = match log.tokens.get(index) {
            Some(token) if token.passed => index + 1,
            _ => index,
        };
        if through == 0 {
            return Ok(());
        }
        if cumulative {
            let last = log.tokens.drain(..through).last();
            if let Some(last) = last {
                log.ack(last.token).await?;
            }
        } else {
            let tokens: Vec<Token> = log.tokens.drain(..through).collect();
            for token in tokens {
                log.ack(token.token).await?;
            }
        }
        Ok(())
    }
}
