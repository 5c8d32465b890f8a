//! How `consume` shows a pack: readable lines (a header, then one line per message), or one
//! JSON object per pack for `jq` and scripts.
//!
//! The readable plain-stream line keeps its historical start (`CHANNEL id=N ts=T type=K`),
//! which scripts and tests read, and adds the kind, keys and payload after it.

use crate::error::Result;
use base64::Engine as _;
use clap::ValueEnum;
use msgstream_facade::msgstream::msg::{MsgPack, TsMsg};
use msgstream_facade::positions;
use serde_json::{json, Value};

use crate::commands::{kinds, short_id};
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
                .try_for_each(|msg| out::line(format_args!("  {}", message_line(msg))))
        }
        Format::Text => pack
            .msgs
            .iter()
            .try_for_each(|msg| out::line(message_line(msg))),
    }
}

/// `CHANNEL id=N ts=T type=K kind=… keys=… payload=…` (and `props=…` when there are any);
/// `keys` are the row keys.
fn message_line(msg: &TsMsg) -> String {
    let position = msg.position.clone().unwrap_or_default();
    let described = kinds::describe(msg);
    let ts = if msg.begin_ts() == msg.end_ts() {
        msg.end_ts().to_string()
    } else {
        format!("{}..{}", msg.begin_ts(), msg.end_ts())
    };
    let mut line = format!(
        "{} id={} ts={ts} type={} kind={} keys={} payload={}",
        position.channel_name,
        short_id(position.msg_id.as_bytes()),
        msg.msg_type(),
        described.kind,
        described.keys.join(","),
        kinds::preview(&described.payload),
    );
    if !msg.properties.is_empty() {
        let props: Vec<String> = msg
            .properties
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        line.push_str(&format!(" props={}", props.join(",")));
    }
    line
}

/// The JSON form of a pack. `end_positions` has the shape of a positions file, so
/// `jq .end_positions` of the last pack is a file `--from-positions` accepts.
fn pack_json(pack: &MsgPack, index: u64) -> Value {
    let messages: Vec<Value> = pack.msgs.iter().map(message_json).collect();
    json!({
        "pack": index,
        "begin_ts": pack.begin_ts,
        "end_ts": pack.end_ts,
        "messages": messages,
        "end_positions": positions::to_json(&pack.end_positions),
    })
}

fn message_json(msg: &TsMsg) -> Value {
    let position = msg.position.clone().unwrap_or_default();
    let described = kinds::describe(msg);
    let mut value = json!({
        "channel": position.channel_name.as_str(),
        "id": short_id(position.msg_id.as_bytes()),
        "kind": described.kind,
        "msg_type": msg.msg_type(),
        "msg_id": msg.id(),
        "begin_ts": msg.begin_ts(),
        "end_ts": msg.end_ts(),
        "keys": described.keys,
        "properties": msg.properties,
    });
    // Text stays readable; other bytes go as base64, the form `produce --format json` reads.
    let payload = match String::from_utf8(described.payload) {
        Ok(text) => ("payload", Value::String(text)),
        Err(e) => (
            "payload_base64",
            Value::String(base64::engine::general_purpose::STANDARD.encode(e.into_bytes())),
        ),
    };
    if let Value::Object(map) = &mut value {
        map.insert(payload.0.to_string(), payload.1);
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;
    use msgstream_facade::msgstream::msg::MsgPosition;

    fn consumed(kind: kinds::Kind, payload: &[u8]) -> TsMsg {
        let mut msg = kinds::build(kind, 1, 5, 2, payload.to_vec()).expect("build");
        msg.position = Some(MsgPosition {
            channel_name: "c0".into(),
            msg_id: msgstream_facade::msgstream::mq::MessageId::from_u64(9),
            ..MsgPosition::default()
        });
        msg
    }

    #[test]
    fn a_text_line_keeps_its_start_and_adds_kind_keys_payload() {
        let mut msg = consumed(kinds::Kind::Insert, b"hello");
        msg.properties.insert("k".into(), "v".into());
        assert_eq!(
            message_line(&msg),
            "c0 id=9 ts=5 type=400 kind=insert keys=1 payload=\"hello\" props=k=v"
        );
    }

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
