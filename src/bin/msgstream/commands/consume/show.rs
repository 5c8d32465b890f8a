//! How `consume` shows a pack: readable lines (a header, then one line per message), or one
//! JSON object per pack for `jq` and scripts.
//!
//! Each message is shown by [`printed`], which the admin page's message browser shares.

use crate::error::Result;
use clap::ValueEnum;
use msgstream_facade::msgstream::msg::MsgPack;
use msgstream_facade::positions;
use serde_json::{json, Value};

use crate::commands::printed;
use crate::out;

/// Output format of `consume`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Lines for people.
    Text,
    /// One JSON object per pack: `pack`, `begin_ts`, `end_ts`, `messages`, `end_positions`.
    Json,
}

/// Writes pack number `index` in `format`; `tt` packs get a header line in text.
pub fn pack(pack: &MsgPack, index: u64, tt: bool, format: Format) -> Result<()> {
    match format {
        Format::Json => out::line(pack_json(pack, index)),
        Format::Text if tt => {
            out::line(format_args!(
                "pack {index}: ts {} -> {}, {} msgs",
                pack.begin_ts,
                pack.end_ts,
                pack.msgs.len()
            ))?;
            pack.msgs
                .iter()
                .try_for_each(|msg| out::line(format_args!("  {}", printed::line(msg))))
        }
        Format::Text => pack
            .msgs
            .iter()
            .try_for_each(|msg| out::line(printed::line(msg))),
    }
}

/// The JSON form of a pack. `end_positions` has the shape of a positions file, so
/// `jq .end_positions` of the last pack is a file `--from-positions` accepts.
fn pack_json(pack: &MsgPack, index: u64) -> Value {
    let messages: Vec<Value> = pack.msgs.iter().map(printed::json).collect();
    json!({
        "pack": index,
        "begin_ts": pack.begin_ts,
        "end_ts": pack.end_ts,
        "messages": messages,
        "end_positions": positions::to_json(&pack.end_positions),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::kinds;
    use crate::commands::printed::tests::consumed;
    use msgstream_facade::msgstream::msg::MsgPosition;

    #[test]
    fn json_has_messages_and_positions_a_file_can_hold() {
        let pack = MsgPack {
            begin_ts: 1,
            end_ts: 6,
            msgs: vec![consumed(kinds::Kind::Custom, &[0xff])],
            end_positions: vec![MsgPosition {
                channel_name: "c0".into(),
                msg_id: msgstream_facade::msgstream::mq::MessageId::from_backend_bytes([0xab]),
                msg_group: "g".into(),
                timestamp: 6,
                ..MsgPosition::default()
            }],
            ..MsgPack::default()
        };
        let value = pack_json(&pack, 3);
        assert_eq!(value["pack"], 3);
        assert_eq!(value["messages"][0]["kind"], "custom");
        assert_eq!(value["messages"][0]["payload_base64"], "/w==");
        assert_eq!(value["messages"][0]["channel"], "c0");
        assert_eq!(
            value["end_positions"][0],
            json!({"channel": "c0", "msg_id": "ab", "group": "g", "timestamp": 6})
        );
    }
}
