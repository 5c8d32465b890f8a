//! Message properties on the wire: `key 0x01 value 0x02` pairs, and the keys this client uses.

use std::collections::BTreeMap;

use crate::error::{Error, Result};

/// Separates a key from its value.
pub const NAME_VALUE_SEPARATOR: char = '\u{1}';
/// Terminates each pair.
pub const PROPERTY_SEPARATOR: char = '\u{2}';

/// The client-generated message id.
pub const UNIQ_KEY: &str = "UNIQ_KEY";
/// Message tags.
pub const TAGS: &str = "TAGS";
/// Message keys (space-separated).
pub const KEYS: &str = "KEYS";
/// Wait for the store to confirm.
pub const WAIT: &str = "WAIT";
/// Delay level of a resent message.
pub const DELAY: &str = "DELAY";
/// Original topic of a retried message.
pub const RETRY_TOPIC: &str = "RETRY_TOPIC";
/// Original id of a retried message.
pub const ORIGIN_MESSAGE_ID: &str = "ORIGIN_MESSAGE_ID";
/// Maximum reconsume times carried by a resent message.
pub const MAX_RECONSUME_TIMES: &str = "MAX_RECONSUME_TIMES";
/// Reconsume count carried by a resent message.
pub const RECONSUME_TIME: &str = "RECONSUME_TIME";

/// Properties the broker or this client set for their own use; hidden from applications.
pub const SYSTEM_KEYS: &[&str] = &[
    UNIQ_KEY,
    TAGS,
    KEYS,
    WAIT,
    DELAY,
    RETRY_TOPIC,
    ORIGIN_MESSAGE_ID,
    MAX_RECONSUME_TIMES,
    RECONSUME_TIME,
    "CLUSTER",
    "MSG_REGION",
    "TRACE_ON",
    "REAL_TOPIC",
    "REAL_QID",
    "MIN_OFFSET",
    "MAX_OFFSET",
    "CONSUME_START_TIME",
    "PGROUP",
    "DLQ_ORIGIN_TOPIC",
    "DLQ_ORIGIN_MESSAGE_ID",
    "INNER_NUM",
    "INNER_BASE",
    "BORN_TIMESTAMP",
    "__BORNHOST",
];

/// Encodes properties; keys and values may not contain the two separators.
pub fn encode(props: &BTreeMap<String, String>) -> Result<String> {
    let mut out = String::new();
    for (k, v) in props {
        if k.is_empty() || has_separator(k) || has_separator(v) {
            return Err(Error::InvalidArgument(format!(
                "property {k:?} is empty or contains a 0x01/0x02 separator"
            )));
        }
        out.push_str(k);
        out.push(NAME_VALUE_SEPARATOR);
        out.push_str(v);
        out.push(PROPERTY_SEPARATOR);
    }
    Ok(out)
}

fn has_separator(s: &str) -> bool {
    s.contains([NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR])
}

/// Decodes properties; tolerates a missing final separator and skips pairs without a value.
pub fn decode(s: &str) -> BTreeMap<String, String> {
    s.split(PROPERTY_SEPARATOR)
        .filter_map(|pair| pair.split_once(NAME_VALUE_SEPARATOR))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// A new 32-hex-digit unique message key: process id, time and a counter, so that keys of
/// concurrent producers (and of restarted processes) differ.
pub fn unique_key() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    format!(
        "{:08X}{:016X}{:08X}",
        std::process::id(),
        nanos,
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_leniency() {
        let mut p = BTreeMap::new();
        p.insert("TAGS".to_owned(), "a".to_owned());
        p.insert("user".to_owned(), "with space".to_owned());
        let s = encode(&p).expect("encode");
        assert_eq!(s, "TAGS\u{1}a\u{2}user\u{1}with space\u{2}");
        assert_eq!(decode(&s), p);
        assert_eq!(
            decode("a\u{1}1\u{2}b\u{1}2"),
            decode("a\u{1}1\u{2}b\u{1}2\u{2}")
        );
        assert!(decode("junk\u{2}\u{2}").is_empty());
        p.insert("bad\u{1}".to_owned(), "x".to_owned());
        assert!(matches!(encode(&p), Err(Error::InvalidArgument(_))));
    }

    #[test]
    fn unique_keys_differ() {
        let (a, b) = (unique_key(), unique_key());
        assert_ne!(a, b);
        assert_eq!(a.len(), 32);
    }
}
