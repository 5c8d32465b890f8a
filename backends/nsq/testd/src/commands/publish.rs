//! PUB, MPUB, DPUB, PUB_TRACE and INTERNAL_CREATE_TOPIC.

use std::time::Duration;

use bytes::Bytes;

use super::{number, Fail, Reader, Session};
use crate::tcp::{now, read_body};

impl Session {
    pub(super) async fn publish(
        &mut self,
        p: &[Vec<u8>],
        reader: &mut Reader,
        batch: bool,
    ) -> Result<(), Fail> {
        let cmd = if batch { "MPUB" } else { "PUB" };
        let opts = &self.shared.options;
        let bodies = if batch {
            let body = read_body(reader, opts.max_body_size, cmd).await?;
            split_mpub(&body, opts.max_msg_size)?
        } else {
            let body = read_body(reader, opts.max_msg_size, cmd)
                .await
                .map_err(|f| {
                    Fail::fatal("E_BAD_MESSAGE", &f.text.replace("body", "message body"))
                })?;
            vec![Bytes::from(body)]
        };
        self.check_auth()?;
        let topic = self.topic_name(p.first(), cmd)?;
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
        let pid = self.partition(&topic, p.get(1), false)?;
        self.shared.put(&topic, pid, bodies, None, 0);
        self.reply(b"OK");
        Ok(())
    }

    pub(super) async fn dpub(&mut self, p: &[Vec<u8>], reader: &mut Reader) -> Result<(), Fail> {
        let topic = self.topic_name(p.first(), "DPUB")?;
        let defer = number(p.get(1).map_or(&b""[..], |v| v), "timeout")?;
        let max = self.shared.options.max_req_timeout.as_millis() as i64;
        if !(0..=max).contains(&defer) {
            return Err(Fail::fatal(
                "E_INVALID",
                &format!("DPUB timeout {defer} out of range 0-{max}"),
            ));
        }
        let body = read_body(reader, self.shared.options.max_msg_size, "DPUB")
            .await
            .map_err(|f| Fail::fatal("E_BAD_MESSAGE", &f.text))?;
        self.check_auth()?;
        let pid = self.partition(&topic, None, false)?;
        let at = now() + Duration::from_millis(defer as u64);
        self.shared
            .put(&topic, pid, vec![Bytes::from(body)], Some(at), 0);
        self.reply(b"OK");
        Ok(())
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
        let pid = self.partition(&topic, p.get(1), false)?;
        let mut trace = [0u8; 8];
        trace.copy_from_slice(&body[..8]);
        let payload = Bytes::copy_from_slice(&body[8..]);
        let receipt = self
            .shared
            .put(&topic, pid, vec![payload], None, u64::from_be_bytes(trace));
        let mut reply = b"OK".to_vec();
        reply.extend_from_slice(&receipt.0);
        reply.extend_from_slice(&receipt.1.to_be_bytes());
        reply.extend_from_slice(&receipt.2.to_be_bytes());
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
        self.partition(&topic, p.get(1), true)?;
        self.reply(b"OK");
        Ok(())
    }
}

/// Splits an MPUB body `[u32 n]([u32 len][msg])*`, checking every length against what is left.
fn split_mpub(body: &[u8], max_msg: usize) -> Result<Vec<Bytes>, Fail> {
    let bad = |what: &str| Fail::fatal("E_BAD_BODY", &format!("MPUB {what}"));
    let count = body
        .get(..4)
        .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        .ok_or_else(|| bad("failed to read message count"))?;
    if count == 0 {
        return Err(bad("invalid message count 0"));
    }
    let mut rest = &body[4..];
    let mut out = Vec::new();
    // Nothing is stored until every message checked out: a refused batch leaves no trace.
    for i in 0..count {
        let len = rest
            .get(..4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
            .ok_or_else(|| {
                Fail::fatal(
                    "E_BAD_MESSAGE",
                    &format!("MPUB failed to read message({i}) body size"),
                )
            })?;
        // nsqd 1.3.0 readMPUB's codes and texts.
        if len == 0 {
            return Err(Fail::fatal(
                "E_BAD_MESSAGE",
                &format!("MPUB invalid message({i}) body size {len}"),
            ));
        }
        if len > max_msg {
            return Err(Fail::fatal(
                "E_BAD_MESSAGE",
                &format!("MPUB message too big {len} > {max_msg}"),
            ));
        }
        let msg = rest
            .get(4..4 + len)
            .ok_or_else(|| Fail::fatal("E_BAD_MESSAGE", "MPUB failed to read message body"))?;
        out.push(Bytes::copy_from_slice(msg));
        rest = &rest[4 + len..];
    }
    if !rest.is_empty() {
        return Err(bad("trailing bytes after the last message"));
    }
    Ok(out)
}
