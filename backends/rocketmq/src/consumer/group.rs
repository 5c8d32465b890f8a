//! Group membership: heartbeats, unregistering, and rebalancing the subscribed topics' queues
//! over the group's live consumers.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::json;

use super::allocate::allocate_average;
use super::{Inner, Mode};
use crate::error::Result;
use crate::protocol::route::MessageQueue;
use crate::protocol::{codes, java_hash};
use crate::remoting::Command;

impl Inner {
    fn heartbeat_body(&self) -> Vec<u8> {
        let subscriptions: Vec<_> = self
            .state()
            .subscriptions
            .iter()
            .map(|(topic, selector)| {
                let expression = selector.expression();
                let tags: Vec<&str> = match selector {
                    super::Selector::All => Vec::new(),
                    super::Selector::Tags(tags) => tags.iter().map(String::as_str).collect(),
                };
                let codes: Vec<i32> = tags.iter().map(|t| java_hash(t)).collect();
                json!({
                    "classFilterMode": false, "topic": topic, "subString": expression,
                    "tagsSet": tags, "codeSet": codes, "subVersion": self.sub_version,
                    "expressionType": "TAG",
                })
            })
            .collect();
        json!({
            "clientID": self.client_id,
            "producerDataSet": [],
            "consumerDataSet": [{
                "groupName": self.group, "consumeType": "CONSUME_ACTIVELY",
                "messageModel": "CLUSTERING", "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                "unitMode": false, "subscriptionDataSet": subscriptions,
            }],
            "heartbeatFingerprint": 0,
            "isWithoutSub": false,
        })
        .to_string()
        .into_bytes()
    }

    /// Announces this consumer and its subscriptions to every master.
    pub(super) async fn heartbeat(&self) -> Result<()> {
        let body = self.heartbeat_body();
        // The connections' own periodic heartbeats carry the subscriptions too.
        self.admin.remoting.set_heartbeat(body.clone().into());
        for addr in self.admin.namesrv.masters().await?.values() {
            let command = Command::request(codes::HEART_BEAT, []).with_body(body.clone());
            self.admin
                .remoting
                .call(addr, command, self.admin.timeout)
                .await?;
        }
        Ok(())
    }

    /// Tells every master this consumer left, so the others rebalance at once.
    pub(super) async fn unregister(&self) -> Result<()> {
        self.admin.remoting.reset_heartbeat();
        for addr in self.admin.namesrv.masters().await?.values() {
            let command = Command::request(
                codes::UNREGISTER_CLIENT,
                [
                    ("clientID", self.client_id.clone()),
                    ("consumerGroup", self.group.clone()),
                ],
            );
            self.admin
                .remoting
                .call(addr, command, self.admin.timeout)
                .await?;
        }
        Ok(())
    }

    /// Recomputes this consumer's queues: for each subscribed topic, its readable queues split
    /// averagely over the group's consumers (sorted ids), then starts and stops fetch tasks.
    pub(super) async fn rebalance(self: &Arc<Self>) -> Result<()> {
        if self.state().mode != Mode::Subscribe {
            return Ok(());
        }
        let topics: Vec<String> = self.state().subscriptions.keys().cloned().collect();
        let mut mine = BTreeSet::new();
        for topic in topics {
            let route = match self.admin.namesrv.refresh(&topic).await {
                Ok(route) => route,
                // The retry topic appears with the first sent-back message.
                Err(crate::Error::TopicNotFound(_)) => continue,
                Err(e) => return Err(e),
            };
            let Some(addr) = route.masters.values().next() else {
                continue;
            };
            let mut ids = self.admin.consumer_ids(addr, &self.group).await?;
            if !ids.contains(&self.client_id) {
                ids.push(self.client_id.clone());
            }
            ids.sort();
            mine.extend(allocate_average(&route.read_queues, &ids, &self.client_id));
        }
        let current: BTreeSet<MessageQueue> = self.state().queues.keys().cloned().collect();
        for gone in current.difference(&mine) {
            self.stop_queue(gone);
            if let Some(offset) = self.offsets.remove(gone) {
                self.admin
                    .update_consumer_offset(&self.group, gone, offset)
                    .await?;
            }
        }
        for new in mine.difference(&current) {
            self.start_queue(new).await?;
        }
        Ok(())
    }
}
