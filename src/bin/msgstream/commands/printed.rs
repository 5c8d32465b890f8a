//! How one consumed message is shown, wherever it is shown: `consume` prints it (a line, or an
//! object of a pack's JSON) and the admin page's message browser serves the same object, so a
//! message reads the same in both.
//!
//! The readable line keeps its historical start (`CHANNEL id=N ts=T type=K`), which scripts
//! and tests read, and adds the kind, keys and payload after it.

use base64::Engine as _;
use msgstream_facade::msgstream::msg::TsMsg;
use serde_json::{json, Value};

use crate::commands::{kinds, short_id};

/// `CHANNEL id=N ts=T type=K kind=… keys=… payload=…` (and `props=…` when there are any);
/// `keys` are the row keys.
pub fn line(msg: &TsMsg) -> String {
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

/// The JSON object of one message: `channel`, `id`, `kind`, `msg_type`, `msg_id`, `begin_ts`,
/// `end_ts`, `keys`, `properties`, and `payload` (text) or `payload_base64` (other bytes).
pub fn json(msg: &TsMsg) -> Value {
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
pub(crate) mod tests {
    use super::*;
    use msgstream_facade::msgstream::mq::MessageId;
    use msgstream_facade::msgstream::msg::MsgPosition;

    /// A message of `kind` as a consumer hands it over (with a position), for printer tests.
    pub(crate) fn consumed(kind: kinds::Kind, payload: &[u8]) -> TsMsg {
        let mut msg = kinds::build(kind, 1, 5, 2, payload.to_vec()).expect("build");
        msg.position = Some(MsgPosition {
            channel_name: "c0".into(),
            msg_id: MessageId::from_u64(9),
            ..MsgPosition::default()
        });
        msg
    }

    #[test]
    fn a_text_line_keeps_its_start_and_adds_kind_keys_payload() {
        let mut msg = consumed(kinds::Kind::Insert, b"hello");
        msg.properties.insert("k".into(), "v".into());
        assert_eq!(
            line(&msg),
            "c0 id=9 ts=5 type=400 kind=insert keys=1 payload=\"hello\" props=k=v"
        );
    }

    #[test]
    fn json_keeps_text_readable_and_other_bytes_as_base64() {
        let text = json(&consumed(kinds::Kind::Insert, b"hello"));
        assert_eq!(
            (&text["id"], &text["kind"], &text["payload"]),
            (&json!("9"), &json!("insert"), &json!("hello"))
        );
        let bytes = json(&consumed(kinds::Kind::Custom, &[0xff]));
        assert_eq!(bytes["payload_base64"], "/w==");
        assert!(bytes.get("payload").is_none(), "{bytes}");
    }
}
