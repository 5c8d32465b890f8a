//! Moving a channel of a Youzan partition to a consume offset over the nsqd's HTTP API
//! (`POST /channel/setoffset?topic=&channel=&partition=` with the offset token as body): where
//! a consumer starts ([`crate::ConsumerConfig::offset`]) or seeks to
//! ([`crate::Consumer::seek`]), e.g. the first message published at or after a time with
//! [`ConsumeOffset::Timestamp`].
//!
//! Only a Youzan nsqd with the cluster coordinator keeps the commit log these offsets are
//! searched in. A standalone Youzan nsqd refuses every offset but `special:-1`
//! (`500 Not supported while coordinator disabled`, transcript Y8 73-79) and upstream nsqd has no
//! such endpoint (`404 NOT_FOUND`, U5 78): both are [`Error::Unsupported`], so a caller can tell
//! "this server cannot" from a failure worth retrying.

use std::time::Duration;

use crate::codec::ConsumeOffset;
use crate::error::{Error, Result};
use crate::http;

/// What `/channel/setoffset` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetSet {
    /// The channel moved; consumers connected to it continue from there too (Y6 366-371).
    Moved,
    /// The nsqd has the partition but not the channel (`404 CHANNEL_NOT_FOUND`): a cluster
    /// sets offsets of existing channels only; subscribe first, then set it.
    NoChannel,
}

/// How a standalone Youzan nsqd refuses consume offsets (Y8 73-77).
const NO_COORDINATOR: &str = "Not supported while coordinator disabled";

/// Moves `channel` of `partition` of `topic` on the nsqd at `nsqd_http` (its HTTP address) to
/// `offset`. The nsqd must lead the partition (`E_FAILED_ON_NOT_LEADER` otherwise, a
/// [`Error::Protocol`]). Messages delivered before the move and not yet finished are forgotten
/// by the server: finishing them fails, and they are not delivered again unless the new
/// position is before them.
pub async fn set_channel_offset(
    nsqd_http: &str,
    topic: &str,
    channel: &str,
    partition: u32,
    offset: ConsumeOffset,
    timeout: Duration,
) -> Result<OffsetSet> {
    let target = format!(
        "/channel/setoffset?topic={}&channel={}&partition={partition}",
        http::query_value(topic),
        http::query_value(channel)
    );
    let body = offset.to_string();
    let (status, reply) =
        http::request(nsqd_http, "POST", &target, body.as_bytes(), timeout).await?;
    classify(nsqd_http, &offset, status, &String::from_utf8_lossy(&reply))
}

/// The answer's meaning. Pure, so every recorded answer is checked without a server.
fn classify(addr: &str, offset: &ConsumeOffset, status: u16, reply: &str) -> Result<OffsetSet> {
    let unsupported = |why: &str| Error::Unsupported {
        addr: addr.to_string(),
        what: format!("consume offset {offset}: {why}"),
    };
    match status {
        200 => Ok(OffsetSet::Moved),
        404 if reply.contains("CHANNEL_NOT_FOUND") => Ok(OffsetSet::NoChannel),
        404 if reply.contains("\"NOT_FOUND\"") => Err(unsupported(
            "this nsqd has no /channel/setoffset (upstream nsqd); offsets need a Youzan cluster",
        )),
        500 if reply.contains(NO_COORDINATOR) => Err(unsupported(
            "this Youzan nsqd runs without the cluster coordinator, which keeps the commit log \
             offsets are searched in",
        )),
        _ => Err(Error::Protocol {
            addr: addr.to_string(),
            what: format!("setoffset answered {status}: {reply}"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(status: u16, reply: &str) -> Result<OffsetSet> {
        classify("n:1", &ConsumeOffset::Timestamp(9), status, reply)
    }

    #[test]
    fn the_recorded_answers_are_told_apart() {
        assert_eq!(answer(200, "").ok(), Some(OffsetSet::Moved));
        assert_eq!(
            answer(404, r#"{"message":"CHANNEL_NOT_FOUND"}"#).ok(),
            Some(OffsetSet::NoChannel)
        );
        // Upstream nsqd 1.3.0 (U5 78) and a standalone Youzan nsqd (Y8 74).
        for (status, reply) in [
            (404, r#"{"message":"NOT_FOUND"}"#),
            (
                500,
                r#"{"message":"Not supported while coordinator disabled"}"#,
            ),
        ] {
            let Err(Error::Unsupported { what, .. }) = answer(status, reply) else {
                panic!("{status} {reply} is Unsupported");
            };
            assert!(what.starts_with("consume offset timestamp:9: "), "{what}");
        }
        // A cluster's refusals are failures of this request, not of the server kind (Y6 319-347).
        for (status, reply) in [
            (404, r#"{"message":"E_TOPIC_NOT_EXIST"}"#),
            (400, r#"{"message":"E_FAILED_ON_NOT_LEADER"}"#),
            (500, r#"{"message":"Invalid timestamp -1"}"#),
        ] {
            assert!(
                matches!(answer(status, reply), Err(Error::Protocol { .. })),
                "{status} {reply}"
            );
        }
    }
}
