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
//! application had not finished (at-least-once, never a skip). The acks of one commit are
//! staged channel by channel and flushed together ([`Acker::stage`], [`Acker::flush`]), so
//! the commit of a pack over many channels costs an embedded store one write, not one per
//! channel.

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::Bytes;

use crate::base::{MessageId, Properties, SharedStr};
use crate::mq::{Acker, Delivery, Message};
use crate::Result;

/// What acking a received message needs: which message, from which delivery; and how a
/// commit naming it treats it.
#[derive(Debug, Clone)]
pub(crate) struct AckToken {
    pub(crate) id: MessageId,
    pub(crate) delivery: Delivery,
    /// Whether the point itself is committed when a commit names it: ticks, and messages of the
    /// plain stream (handed over one by one), are; a buffered tt message named as the first
    /// one still held is not. Carried by the token, so that a run's tokens move into the log
    /// as the block the pump built.
    pub(crate) passed: bool,
}

impl AckToken {
    /// The token of `message`, `passed` as explained on the field.
    pub(crate) fn of(message: &Message, passed: bool) -> Self {
        AckToken {
            id: message.id.clone(),
            delivery: message.delivery,
            passed,
        }
    }
}

struct ChannelLog {
    acker: Arc<dyn Acker>,
    topic: SharedStr,
    tokens: VecDeque<AckToken>,
}

impl ChannelLog {
    async fn stage(&self, token: AckToken) -> Result<()> {
        let message = Message {
            topic: self.topic.clone(),
            id: token.id,
            payload: Bytes::new(),
            properties: Properties::new(),
            delivery: token.delivery,
        };
        self.acker.stage(&message).await
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

    /// Records a received message of `channel`; `passed` as explained on [`AckToken`].
    pub(crate) fn received(&mut self, channel: usize, mut token: AckToken, passed: bool) {
        if let Some(log) = self.channels.get_mut(channel) {
            token.passed = passed;
            log.tokens.push_back(token);
        }
    }

    /// Records received messages of `channel`, in order, each as its own `passed` says, and
    /// leaves `tokens` empty. Into a channel with nothing uncommitted (the usual case: a
    /// commit leaves none before the run that follows it) the block moves whole, and `tokens`
    /// gets the log's emptied block in exchange; otherwise the tokens are appended.
    pub(crate) fn received_all(&mut self, channel: usize, tokens: &mut VecDeque<AckToken>) {
        let Some(log) = self.channels.get_mut(channel) else {
            tokens.clear();
            return;
        };
        if log.tokens.is_empty() {
            std::mem::swap(&mut log.tokens, tokens);
        } else {
            log.tokens.append(tokens);
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

    /// Commits each `(channel, id)` of `points` up to its resume point `id`: every token
    /// received before the one with that id, and that one too if it is passed. An id not in the
    /// log (already committed, or a point before anything received) commits nothing.
    ///
    /// The acks are staged channel by channel, then flushed once per acker that staged any, so
    /// a backend that can write them together does (one write for a pack of sixteen channels).
    /// A channel whose ack fails does not keep the others from being flushed; the first error
    /// is returned.
    pub(crate) async fn commit(&mut self, points: &[(usize, &MessageId)]) -> Result<()> {
        let mut outcome = Ok(());
        let mut staged = Vec::new();
        for &(channel, id) in points {
            match self.stage(channel, id).await {
                Ok(true) => staged.push(channel),
                Ok(false) => {}
                Err(error) => {
                    outcome = Err(error);
                    break;
                }
            }
        }
        for channel in staged {
            if let Some(log) = self.channels.get(channel) {
                let flushed = log.acker.flush().await;
                if outcome.is_ok() {
                    outcome = flushed;
                }
            }
        }
        outcome
    }

    /// Stages the acks that commit `channel` up to `id`; returns whether it staged any.
    async fn stage(&mut self, channel: usize, id: &MessageId) -> Result<bool> {
        let cumulative = self.cumulative;
        let Some(log) = self.channels.get_mut(channel) else {
            return Ok(false);
        };
        // From the back: the point is usually the last token received (a pack's closing tick).
        let Some(index) = log.tokens.iter().rposition(|t| t.id == *id) else {
            return Ok(false);
        };
        let through = match log.tokens.get(index) {
            Some(token) if token.passed => index + 1,
            _ => index,
        };
        if through == 0 {
            return Ok(false);
        }
        if cumulative {
            let last = log.tokens.drain(..through).last();
            if let Some(last) = last {
                log.stage(last).await?;
            }
        } else {
            let tokens: Vec<AckToken> = log.tokens.drain(..through).collect();
            for token in tokens {
                log.stage(token).await?;
            }
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use async_trait::async_trait;

    use super::*;
    use crate::mq::Delivery;

    /// Records the ids it is asked to ack (the log's side of the contract only).
    #[derive(Default)]
    struct Recorder(Mutex<Vec<MessageId>>);

    #[async_trait]
    impl Acker for Recorder {
        async fn ack(&self, message: &Message) -> Result<()> {
            if let Ok(mut acked) = self.0.lock() {
                acked.push(message.id.clone());
            }
            Ok(())
        }
    }

    fn token(id: u64, passed: bool) -> AckToken {
        AckToken {
            id: MessageId::from_u64(id),
            delivery: Delivery::default(),
            passed,
        }
    }

    fn acked(recorder: &Recorder) -> Vec<MessageId> {
        recorder.0.lock().map(|a| a.clone()).unwrap_or_default()
    }

    /// A run of data tokens `from..to` closed by a passed tick at `to`.
    fn run(from: u64, to: u64) -> VecDeque<AckToken> {
        (from..to)
            .map(|id| token(id, false))
            .chain([token(to, true)])
            .collect()
    }

    #[tokio::test]
    async fn a_run_moves_into_an_empty_log_whole_and_commits_by_its_flags() {
        let recorder = Arc::new(Recorder::default());
        let mut log = CommitLog::new(true);
        let channel = log.add_channel(recorder.clone(), "ch");
        let mut block = run(1, 5);
        let moved = block.as_slices().0.as_ptr();
        log.received_all(channel, &mut block);
        assert!(block.is_empty(), "the caller keeps an emptied block");
        assert_eq!(log.len(), 5);
        assert_eq!(
            log.channels[channel].tokens.as_slices().0.as_ptr(),
            moved,
            "moved, not copied"
        );
        // A second run lands behind the first (appended).
        log.received_all(channel, &mut run(6, 9));
        assert_eq!(log.len(), 9);
        // A point at a data token (the first message still held) commits what came before it.
        log.commit(&[(channel, &MessageId::from_u64(7))])
            .await
            .expect("commit");
        assert_eq!(acked(&recorder), vec![MessageId::from_u64(6)]);
        assert_eq!(log.len(), 3);
        // A point at a passed tick commits the tick itself.
        log.commit(&[(channel, &MessageId::from_u64(9))])
            .await
            .expect("commit");
        assert_eq!(acked(&recorder).last(), Some(&MessageId::from_u64(9)));
        assert_eq!(log.len(), 0);
    }

    #[tokio::test]
    async fn a_recorded_token_takes_the_passed_flag_it_is_given() {
        let recorder = Arc::new(Recorder::default());
        let mut log = CommitLog::new(false);
        let channel = log.add_channel(recorder.clone(), "ch");
        // Marked not passed by whoever made it; the stream handing it over says it is.
        log.received(channel, token(1, false), true);
        log.received(channel, token(2, true), false);
        log.commit(&[(channel, &MessageId::from_u64(1))])
            .await
            .expect("commit");
        assert_eq!(acked(&recorder), vec![MessageId::from_u64(1)]);
        // Token 2 is a point not passed: naming it commits nothing more.
        log.commit(&[(channel, &MessageId::from_u64(2))])
            .await
            .expect("commit");
        assert_eq!(acked(&recorder), vec![MessageId::from_u64(1)]);
        assert_eq!(log.len(), 1);
    }
}
