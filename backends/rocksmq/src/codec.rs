//! Value encodings: fixed-width big-endian records and length-prefixed properties. Pure, no I/O.
//!
//! Decoding never panics: malformed bytes (a corrupted or foreign database) are
//! [`msgstream::Error::Decode`].

use msgstream::mq::Properties;
use msgstream::{Error, Result};

/// A consumer group's durable state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct GroupRecord {
    /// The first id not yet acknowledged: delivery resumes here.
    pub committed: u64,
    /// Wall-clock milliseconds of the last ack or seek, for the idle-group retention policy.
    pub active_ms: u64,
}

/// A closed page: a run of messages whose bytes reached the page size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PageRecord {
    /// Last message id of the page (inclusive); the first is in the key.
    pub last_id: u64,
    /// Payload and property bytes of the page.
    pub bytes: u64,
    /// Wall-clock milliseconds when the page was closed (its newest message was written).
    pub closed_ms: u64,
}

/// How far a topic's open page had got after one of its writes: the page began at `page_first`,
/// and its messages below `next_id` hold `bytes` bytes. Written in the same `WriteBatch` as that
/// write's messages (so it never runs ahead of them) each time the open page grows past another
/// [`PageMark::INTERVAL`]; opening the queue then counts only the open page's bytes after it
/// instead of the whole page (up to `page_size_bytes`, 64 MiB by default, per topic).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PageMark {
    /// First message id of the open page the mark belongs to.
    pub page_first: u64,
    /// One past the last message the mark counts.
    pub next_id: u64,
    /// Payload and property bytes of the messages `page_first..next_id`.
    pub bytes: u64,
}

fn words<const N: usize>(what: &str, bytes: &[u8]) -> Result<[u64; N]> {
    if bytes.len() != N * 8 {
        return Err(Error::Decode(format!(
            "{what} record is {} bytes, expected {}",
            bytes.len(),
            N * 8
        )));
    }
    let mut out = [0u64; N];
    for (word, chunk) in out.iter_mut().zip(bytes.chunks_exact(8)) {
        let mut buf = [0u8; 8];
        buf.copy_from_slice(chunk);
        *word = u64::from_be_bytes(buf);
    }
    Ok(out)
}

fn encode_words<const N: usize, const B: usize>(values: [u64; N]) -> [u8; B] {
    let mut out = [0u8; B];
    for (chunk, value) in out.chunks_exact_mut(8).zip(values) {
        chunk.copy_from_slice(&value.to_be_bytes());
    }
    out
}

/// A single big-endian `u64` value (message ids, topic ids).
pub(crate) fn decode_u64(what: &str, bytes: &[u8]) -> Result<u64> {
    words::<1>(what, bytes).map(|[v]| v)
}

impl GroupRecord {
    pub(crate) fn encode(&self) -> [u8; 16] {
        encode_words([self.committed, self.active_ms])
    }

    pub(crate) fn decode(bytes: &[u8]) -> Result<Self> {
        let [committed, active_ms] = words("consumer group", bytes)?;
        Ok(GroupRecord {
            committed,
            active_ms,
        })
    }
}

impl PageRecord {
    pub(crate) fn encode(&self) -> [u8; 24] {
        encode_words([self.last_id, self.bytes, self.closed_ms])
    }

    pub(crate) fn decode(bytes: &[u8]) -> Result<Self> {
        let [last_id, bytes, closed_ms] = words("page", bytes)?;
        Ok(PageRecord {
            last_id,
            bytes,
            closed_ms,
        })
    }
}

impl PageMark {
    /// Bytes of open page between two marks: what opening the queue reads per topic, at most
    /// (plus the last message), where it read the whole open page before marks existed.
    pub(crate) const INTERVAL: u64 = 1024 * 1024;

    pub(crate) fn encode(&self) -> [u8; 24] {
        encode_words([self.page_first, self.next_id, self.bytes])
    }

    pub(crate) fn decode(bytes: &[u8]) -> Result<Self> {
        let [page_first, next_id, bytes] = words("page mark", bytes)?;
        Ok(PageMark {
            page_first,
            next_id,
            bytes,
        })
    }
}

/// Encodes properties as `count ‖ (len ‖ key ‖ len ‖ value)*` with `u32` big-endian lengths.
pub(crate) fn encode_properties(properties: &Properties) -> Vec<u8> {
    let size = 4 + properties
        .iter()
        .map(|(k, v)| 8 + k.len() + v.len())
        .sum::<usize>();
    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(&(properties.len() as u32).to_be_bytes());
    for (key, value) in properties {
        for part in [key, value] {
            out.extend_from_slice(&(part.len() as u32).to_be_bytes());
            out.extend_from_slice(part.as_bytes());
        }
    }
    out
}

/// Decodes what [`encode_properties`] wrote.
pub(crate) fn decode_properties(mut bytes: &[u8]) -> Result<Properties> {
    fn take<'a>(bytes: &mut &'a [u8], n: usize) -> Result<&'a [u8]> {
        let (head, rest) = bytes
            .split_at_checked(n)
            .ok_or_else(|| Error::Decode("truncated message properties".into()))?;
        *bytes = rest;
        Ok(head)
    }
    fn take_len(bytes: &mut &[u8]) -> Result<usize> {
        let mut buf = [0u8; 4];
        buf.copy_from_slice(take(bytes, 4)?);
        Ok(u32::from_be_bytes(buf) as usize)
    }
    fn take_str(bytes: &mut &[u8]) -> Result<String> {
        let len = take_len(bytes)?;
        String::from_utf8(take(bytes, len)?.to_vec())
            .map_err(|e| Error::Decode(format!("message property is not UTF-8: {e}")))
    }
    let count = take_len(&mut bytes)?;
    let mut properties = Properties::new();
    for _ in 0..count {
        let key = take_str(&mut bytes)?;
        let value = take_str(&mut bytes)?;
        properties.insert(key, value);
    }
    if !bytes.is_empty() {
        return Err(Error::Decode(
            "trailing bytes after message properties".into(),
        ));
    }
    Ok(properties)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        let group = GroupRecord {
            committed: 5,
            active_ms: 77,
        };
        assert_eq!(GroupRecord::decode(&group.encode()).ok(), Some(group));
        assert!(matches!(PageRecord::decode(&[1, 2]), Err(Error::Decode(_))));
        let mark = PageMark {
            page_first: 3,
            next_id: 9,
            bytes: 1 << 20,
        };
        assert_eq!(PageMark::decode(&mark.encode()).ok(), Some(mark));
        assert!(matches!(
            PageMark::decode(&mark.encode()[..16]),
            Err(Error::Decode(_))
        ));
    }

    #[test]
    fn properties_round_trip_and_reject_garbage() {
        let mut properties = Properties::new();
        properties.insert("traceparent".into(), "00-abc".into());
        properties.insert("k".into(), String::new());
        let bytes = encode_properties(&properties);
        assert_eq!(decode_properties(&bytes).ok(), Some(properties));
        assert!(matches!(
            decode_properties(&bytes[..bytes.len() - 1]),
            Err(Error::Decode(_))
        ));
        assert!(matches!(
            decode_properties(&[0, 0, 0, 0, 1]),
            Err(Error::Decode(_))
        ));
    }
}
