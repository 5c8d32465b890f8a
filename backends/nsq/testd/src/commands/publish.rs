//! PUB, MPUB, DPUB, PUB_TRACE and INTERNAL_CREATE_TOPIC.

use std::time::Duration;

use bytes::Bytes;

use super::{number, Fail, Reader, Session};
use tokio::io::AsyncReadExt;

use crate::tcp::{now, read_body};

impl Session {
    /// PUB and MPUB in nsqd's order: params and topic name, then the body (MPUB's read
    /// message by message from the stream, so bytes beyond the last message are the next
    /// command), then the partition.
    pub(super) async fn publish(
        &mut self,
        p: &[Vec<u8>],
        reader: &mut Reader,
        batch: bool,
    ) -> Result<(), Fail> {
        let cmd = if batch { "MPUB" } else { "PUB" };
        let topic = self.topic_name(p.first(), cmd)?;
        let opts = &self.shared.options;
        let bodies = if batch {
            read_mpub(reader, opts.max_msg_size, opts.max_body_size).await?
        } else {
            let read = read_message(reader, cmd, opts.max_msg_size).await;
            // The fork refuses an empty body in its own words (Y3 75).
            let read = match read {
                Err(fail) if opts.extensions.partitions() && fail.text.ends_with("body size 0") => {
                    Err(Fail::fatal("E_BAD_BODY", "invalid body size 0"))
                }
                read => read,
            };
            vec![Bytes::from(read?)]
        };
        self.check_auth()?;
        let ordered_topic = self
            .shared
            .cluster
            .as_ref()
            .is_some_and(|c| c.ordered(&topic));
        if ordered_topic && p.get(1).is_none() {
            return Err(Fail::fatal(
                "E_BAD_PARTITION",
                "topic partition is not valid for multi partition: -1",
            ));
        }
        let pid = match p.get(1) {
            // Which partition a standalone fork picks for a PUB without one is not fixed
            // (partition 1 of two in the Y8 recording, 0 in an earlier run); the test server
            // takes the last. (SUB_ADVANCED with an offset takes the first, Y8 95-100.)
            None if self.shared.cluster.is_none() && opts.extensions.partitions() => {
                let last = self
                    .store()
                    .topics
                    .get(&topic)
                    .and_then(|t| t.partitions.keys().next_back().copied());
                match last {
                    Some(last) => last,
                    None => return Err(Fail::fatal("E_TOPIC_NOT_EXIST", "")),
                }
            }
            param => self.publish_partition(&topic, param)?,
        };
        let count = bodies.len() as u64;
        self.shared.put(&topic, pid, bodies, None, 0);
        self.count_published(&topic, pid, count);
        self.reply(b"OK");
        Ok(())
    }

    pub(super) async fn dpub(&mut self, p: &[Vec<u8>], reader: &mut Reader) -> Result<(), Fail> {
        let topic = self.topic_name(p.first(), "DPUB")?;
        let raw = p
            .get(1)
            .ok_or_else(|| Fail::fatal("E_INVALID", "DPUB insufficient number of parameters"))?;
        let defer = number(raw, "DPUB could not parse timeout")?;
        let max = self.shared.options.max_req_timeout.as_millis() as u64;
        if defer > max {
            return Err(Fail::fatal(
                "E_INVALID",
                &format!("DPUB timeout {defer} out of range 0-{max}"),
            ));
        }
        let body = read_message(reader, "DPUB", self.shared.options.max_msg_size).await?;
        self.check_auth()?;
        let pid = self.partition(&topic, None, false)?;
        let at = now() + Duration::from_millis(defer);
        self.shared
            .put(&topic, pid, vec![Bytes::from(body)], Some(at), 0);
        self.count_published(&topic, pid, 1);
        self.reply(b"OK");
        Ok(())
    }

    /// The connection's `pub_counts` (per topic, nsqd 1.3.0) and per-partition counts (the
    /// fork's `client_pub_stats`) in `/stats`.
    fn count_published(&self, topic: &str, partition: u32, count: u64) {
        if let Some(connection) = self.store().connections.get_mut(&self.id) {
            *connection.pub_counts.entry(topic.to_string()).or_default() += count;
            let pubs = connection
                .partition_pubs
                .entry((topic.to_string(), partition))
                .or_default();
            pubs.count += count;
            pubs.last = crate::unix_seconds();
        }
    }

    /// The partition a publish writes to; a cluster node's `E_FAILED_ON_NOT_LEADER` refusal
    /// is counted for the partition (the fork's `pub_failed_cnt`: Y1 100 reports 5 for the
    /// five refused probes of partition 0 on its future leader).
    fn publish_partition(&self, topic: &str, param: Option<&Vec<u8>>) -> Result<u32, Fail> {
        let refused = match self.partition(topic, param, false) {
            Err(fail) if fail.code == "E_FAILED_ON_NOT_LEADER" => fail,
            other => return other,
        };
        let pid = match param {
            Some(p) => super::parse_partition(p).ok(),
            None => self
                .shared
                .cluster
                .as_ref()
                .and_then(|c| c.own_partition(topic)),
        };
        if let Some(pid) = pid {
            *self
                .store()
                .pub_refused
                .entry((topic.to_string(), pid))
                .or_default() += 1;
        }
        Err(refused)
    }

    pub(super) async fn pub_trace(
        &mut self,
        p: &[Vec<u8>],
        reader: &mut Reader,
    ) -> Result<(), Fail> {
        let body = read_body(reader, self.shared.options.max_msg_size + 8, "PUB_TRACE").await?;
        if body.len() <= 8 {
            return Err(Fail::fatal(
                "E_BAD_MESSAGE",
                "PUB_TRACE invalid message body size",
            ));
        }
        self.check_auth()?;
        let topic = self.topic_name(p.first(), "PUB_TRACE")?;
        let pid = self.publish_partition(&topic, p.get(1))?;
        let mut trace = [0u8; 8];
        trace.copy_from_slice(&body[..8]);
        let payload = Bytes::copy_from_slice(&body[8..]);
        let receipt = self
            .shared
            .put(&topic, pid, vec![payload], None, u64::from_be_bytes(trace));
        self.count_published(&topic, pid, 1);
        let mut reply = b"OK".to_vec();
        reply.extend_from_slice(&receipt.0);
        reply.extend_from_slice(&receipt.1.to_be_bytes());
        reply.extend_from_slice(&receipt.2.to_be_bytes());
        self.reply(&reply);
        Ok(())
    }

    /// The fork's MPUB_TRACE: an MPUB whose messages each start with an 8-byte trace id
    /// (a plain body loses its first 8 bytes, which become its trace id, Y3 16-17, Y4 47);
    /// the answer is `OK`, the first id with trace id 0, the first offset and the batch's
    /// total raw size (Y3 14-15).
    pub(super) async fn mpub_trace(
        &mut self,
        p: &[Vec<u8>],
        reader: &mut Reader,
    ) -> Result<(), Fail> {
        let topic = self.topic_name(p.first(), "MPUB_TRACE")?;
        let opts = &self.shared.options;
        let bodies = read_mpub(reader, opts.max_msg_size + 8, opts.max_body_size).await?;
        self.check_auth()?;
        let pid = self.publish_partition(&topic, p.get(1))?;
        let traced = bodies
            .iter()
            .map(|b| {
                let cut = b.len().min(8);
                let mut trace = [0u8; 8];
                trace[..cut].copy_from_slice(&b[..cut]);
                (b.slice(cut..), u64::from_be_bytes(trace))
            })
            .collect();
        let receipts = self.shared.put_traced(&topic, pid, traced, None);
        let Some(first) = receipts.first() else {
            return Err(Fail::fatal(
                "E_BAD_BODY",
                "MPUB_TRACE invalid message count 0",
            ));
        };
        let total: u32 = receipts.iter().map(|r| r.2).sum();
        let mut reply = b"OK".to_vec();
        reply.extend_from_slice(&first.0[..8]);
        reply.extend_from_slice(&0u64.to_be_bytes());
        reply.extend_from_slice(&first.1.to_be_bytes());
        reply.extend_from_slice(&total.to_be_bytes());
        self.count_published(&topic, pid, receipts.len() as u64);
        self.reply(&reply);
        Ok(())
    }

    pub(super) fn create_topic(&mut self, p: &[Vec<u8>]) -> Result<(), Fail> {
        if self.shared.cluster.is_some() {
            let name = p.first().map(|n| super::text(n)).unwrap_or_default();
            if !crate::valid_name(&name) {
                return Err(Fail::fatal(
                    "E_BAD_TOPIC",
                    &format!("topic name {name:?} is not valid"),
                ));
            }
            if let Some(partition) = p.get(1) {
                super::parse_partition(partition)?;
            }
            return Err(Fail::soft(
                "E_CREATE_TOPIC_FAILED",
                "CREATE_TOPIC is not allowed here while cluster feature enabled.".into(),
            ));
        }
        let topic = self.topic_name(p.first(), "INTERNAL_CREATE_TOPIC")?;
        // The fork's own words (Y8 34, 42).
        match p.get(1) {
            None => {
                return Err(Fail::fatal(
                    "E_INVALID",
                    "CREATE_TOPIC insufficient number of parameters",
                ))
            }
            Some(partition) if partition.first() == Some(&b'-') => {
                return Err(Fail::fatal(
                    "E_BAD_PARTITION",
                    "partition should not less than 0",
                ))
            }
            Some(_) => {}
        }
        self.partition(&topic, p.get(1), true)?;
        self.reply(b"OK");
        Ok(())
    }
}

/// A `[i32 size][body]` message of PUB / DPUB with nsqd's `E_BAD_MESSAGE` texts.
async fn read_message(reader: &mut Reader, cmd: &str, max: usize) -> Result<Vec<u8>, Fail> {
    let bad = |text: String| Fail::fatal("E_BAD_MESSAGE", &text);
    let size = reader
        .read_i32()
        .await
        .map_err(|_| bad(format!("{cmd} failed to read message body size")))?;
    if size <= 0 {
        return Err(bad(format!("{cmd} invalid message body size {size}")));
    }
    if size as usize > max {
        return Err(bad(format!("{cmd} message too big {size} > {max}")));
    }
    let mut body = vec![0u8; size as usize];
    reader
        .read_exact(&mut body)
        .await
        .map_err(|_| bad(format!("{cmd} failed to read message body")))?;
    Ok(body)
}

/// nsqd 1.3.0's MPUB body: the outer size is checked against `max_body` (before anything
/// else is read), then `[i32 count]([i32 size][msg])*` is read from the stream by count.
async fn read_mpub(
    reader: &mut Reader,
    max_msg: usize,
    max_body: usize,
) -> Result<Vec<Bytes>, Fail> {
    let body = |text: String| Fail::fatal("E_BAD_BODY", &text);
    let message = |text: String| Fail::fatal("E_BAD_MESSAGE", &text);
    let size = reader
        .read_i32()
        .await
        .map_err(|_| body("MPUB failed to read body size".into()))?;
    if size <= 0 {
        return Err(body(format!("MPUB invalid body size {size}")));
    }
    if size as usize > max_body {
        return Err(body(format!("MPUB body too big {size} > {max_body}")));
    }
    let count = reader
        .read_i32()
        .await
        .map_err(|_| body("MPUB failed to read message count".into()))?;
    if count <= 0 || count as usize > max_body.saturating_sub(4) / 5 {
        return Err(body(format!("MPUB invalid message count {count}")));
    }
    // Nothing is stored until every message checked out: a refused batch leaves no trace.
    let mut out = Vec::with_capacity(count as usize);
    for i in 0..count {
        let len = reader
            .read_i32()
            .await
            .map_err(|_| message(format!("MPUB failed to read message({i}) body size")))?;
        if len <= 0 {
            return Err(message(format!(
                "MPUB invalid message({i}) body size {len}"
            )));
        }
        if len as usize > max_msg {
            return Err(message(format!("MPUB message too big {len} > {max_msg}")));
        }
        let mut msg = vec![0u8; len as usize];
        reader
            .read_exact(&mut msg)
            .await
            .map_err(|_| message("MPUB failed to read message body".into()))?;
        out.push(Bytes::from(msg));
    }
    Ok(out)
}
