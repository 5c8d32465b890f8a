//! Positions files: stored `MsgPosition`s, one JSON object per channel, so that a person can
//! read them and a program can feed them back to `seek`.

use std::path::Path;

use msgstream::mq::MessageId;
use msgstream::msg::MsgPosition;
use serde::{Deserialize, Serialize};

use crate::{Error, Result};

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredPosition {
    channel: String,
    /// Backend message id, lowercase hex.
    msg_id: String,
    group: String,
    timestamp: u64,
}

fn stored(positions: &[MsgPosition]) -> Vec<StoredPosition> {
    positions
        .iter()
        .map(|p| StoredPosition {
            channel: p.channel_name.to_string(),
            msg_id: encode_hex(p.msg_id.as_bytes()),
            group: p.msg_group.to_string(),
            timestamp: p.timestamp,
        })
        .collect()
}

/// Positions as the JSON array a positions file holds, for output that a script may save and
/// feed back to [`load`] (`msgstream consume --format json`).
pub fn to_json(positions: &[MsgPosition]) -> serde_json::Value {
    serde_json::Value::Array(
        stored(positions)
            .into_iter()
            .map(|s| {
                serde_json::json!({
                    "channel": s.channel,
                    "msg_id": s.msg_id,
                    "group": s.group,
                    "timestamp": s.timestamp,
                })
            })
            .collect(),
    )
}

/// Writes positions to `path` (atomically: a temporary file renamed over it).
pub fn save(path: &Path, positions: &[MsgPosition]) -> Result<()> {
    let text = serde_json::to_string_pretty(&stored(positions)).map_err(|e| Error::Positions {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    let io = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text + "\n").map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}

/// Reads positions written by [`save`]. Malformed files are errors naming the file.
pub fn load(path: &Path) -> Result<Vec<MsgPosition>> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let bad = |message: String| Error::Positions {
        path: path.to_path_buf(),
        message,
    };
    let stored: Vec<StoredPosition> =
        serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    stored
        .into_iter()
        .map(|s| {
            Ok(MsgPosition {
                msg_id: MessageId::from_backend_bytes(decode_hex(&s.msg_id).ok_or_else(|| {
                    bad(format!(
                        "msg_id {:?} of {:?} is not hex",
                        s.msg_id, s.channel
                    ))
                })?),
                channel_name: s.channel.into(),
                msg_group: s.group.into(),
                timestamp: s.timestamp,
                ..MsgPosition::default()
            })
        })
        .collect()
}

/// Lowercase hex, as positions files and migrated messages carry ids.
pub(crate) fn encode_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The bytes of [`encode_hex`]'s text; `None` for anything else.
pub(crate) fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| {
            text.get(i..i + 2)
                .and_then(|b| u8::from_str_radix(b, 16).ok())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_garbage() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("p.json");
        let positions = vec![MsgPosition {
            channel_name: "a".into(),
            msg_id: MessageId::from_backend_bytes([0, 1, 0xab]),
            msg_group: "g".into(),
            timestamp: 42,
            ..MsgPosition::default()
        }];
        save(&path, &positions).expect("save");
        assert_eq!(load(&path).expect("load"), positions);
        for garbage in [
            "{",
            "[{\"channel\":\"a\",\"msg_id\":\"zz\",\"group\":\"g\",\"timestamp\":1}]",
            "[1]",
        ] {
            std::fs::write(&path, garbage).expect("write");
            assert!(
                matches!(load(&path), Err(Error::Positions { .. })),
                "{garbage}"
            );
        }
    }
}
