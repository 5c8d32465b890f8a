//! RetryLater: a consumed message goes back to the broker for later redelivery through the
//! group's `%RETRY%` topic, or to `%DLQ%` once it was reconsumed too often.

use super::Inner;
use crate::error::Result;
use crate::protocol::route::MessageQueue;
use crate::protocol::stored::StoredMessage;
use crate::protocol::{codes, properties};
use crate::remoting::Command;

impl Inner {
    /// CONSUMER_SEND_MSG_BACK to the broker holding the message; if that fails, re-sends the
    /// message itself to the retry (or dead-letter) topic.
    pub(super) async fn send_back(
        &self,
        queue: &MessageQueue,
        message: &StoredMessage,
    ) -> Result<()> {
        let origin_topic = message
            .properties
            .get(properties::RETRY_TOPIC)
            .cloned()
            .unwrap_or_else(|| self.namespace.wrap(&message.topic));
        let addr = self.admin.broker_of(queue).await?;
        let command = Command::request(
            codes::CONSUMER_SEND_MSG_BACK,
            [
                ("offset", message.commit_log_offset.to_string()),
                ("group", self.group.clone()),
                ("delayLevel", self.options.retry_delay_level.to_string()),
                ("originMsgId", message.msg_id().to_owned()),
                ("originTopic", origin_topic.clone()),
                ("unitMode", "false".to_owned()),
                (
                    "maxReconsumeTimes",
                    self.options.max_reconsume_times.to_string(),
                ),
            ],
        );
        match self
            .admin
            .remoting
            .call(&addr, command, self.admin.timeout)
            .await
        {
            Ok(_) => Ok(()),
            Err(e) => {
                tracing::debug!(error = %e, "rocketmq send-back failed; re-sending to the retry topic");
                self.resend(message, &origin_topic, queue, &addr).await
            }
        }
    }

    /// Sends a copy of `message` to the retry (or dead-letter) topic. Where that topic has no
    /// route yet, it goes to the broker the message came from, which creates it.
    async fn resend(
        &self,
        message: &StoredMessage,
        origin_topic: &str,
        from: &MessageQueue,
        from_addr: &str,
    ) -> Result<()> {
        let reconsumed = message.reconsume_times + 1;
        let (topic, delay) = if message.reconsume_times >= self.options.max_reconsume_times {
            (self.namespace.dlq_topic(&self.options.group), None)
        } else {
            let level = match self.options.retry_delay_level {
                0 => 3 + message.reconsume_times,
                level => level,
            };
            (self.namespace.retry_topic(&self.options.group), Some(level))
        };
        let mut props = message.properties.clone();
        props.insert(properties::RETRY_TOPIC.into(), origin_topic.to_owned());
        props.insert(
            properties::ORIGIN_MESSAGE_ID.into(),
            message.msg_id().to_owned(),
        );
        props.insert(properties::RECONSUME_TIME.into(), reconsumed.to_string());
        props.insert(
            properties::MAX_RECONSUME_TIMES.into(),
            self.options.max_reconsume_times.to_string(),
        );
        if let Some(level) = delay {
            props.insert(properties::DELAY.into(), level.to_string());
        }
        let routed = match self.admin.namesrv.route(&topic).await {
            Ok(route) => route.write_queues.first().and_then(|q| {
                let addr = route.address(&q.broker)?;
                Some((addr.to_owned(), q.queue_id, q.broker.clone()))
            }),
            Err(crate::Error::TopicNotFound(_)) => None,
            Err(e) => return Err(e),
        };
        let (addr, queue_id, broker) =
            routed.unwrap_or_else(|| (from_addr.to_owned(), 0, from.broker.clone()));
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        let command = Command::request(
            codes::SEND_MESSAGE_V2,
            [
                ("a", self.group.clone()),
                ("b", topic),
                ("c", "TBW102".to_owned()),
                ("d", "1".to_owned()),
                ("e", queue_id.to_string()),
                ("f", "0".to_owned()),
                ("g", now.to_string()),
                ("h", message.flag.to_string()),
                ("i", properties::encode(&props)?),
                ("j", reconsumed.to_string()),
                ("k", "false".to_owned()),
                ("l", self.options.max_reconsume_times.to_string()),
                ("m", "false".to_owned()),
                ("n", broker),
            ],
        )
        .with_body(message.body.clone());
        self.admin
            .remoting
            .call(&addr, command, self.admin.timeout)
            .await
            .map(drop)
    }
}
