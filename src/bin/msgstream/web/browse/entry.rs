//! One message of a page as the browser serves it: what `consume` prints for it, or, for a
//! payload that does not decode, the error and its bytes in hex.

use msgstream_facade::msgstream::mq::Message;
use msgstream_facade::msgstream::msg::{DecoderRegistry, MsgPosition, TsMsg};
use serde_json::{json, Value};

use crate::commands::{kinds, printed, short_id};

/// At most this many bytes of a message that does not decode are shown, in hex.
const HEX_BYTES: usize = 1024;

/// One message of a page: the object `consume --format json` prints for it, with `line` (the
/// line `consume` prints) and `preview` (the payload as that line shows it). A message that
/// does not decode is shown as `kind: "undecodable"` with the error and its first bytes in hex.
pub fn entry(registry: &DecoderRegistry, msg: &Message) -> Value {
    match registry.decode(&msg.payload) {
        Ok(body) => {
            let mut consumed = TsMsg::new(body);
            consumed.position = Some(MsgPosition {
                channel_name: msg.topic.clone(),
                msg_id: msg.id.clone(),
                // As a consumer stamps it.
                timestamp: consumed.begin_ts(),
                ..MsgPosition::default()
            });
            consumed.properties = msg.properties.clone();
            let mut value = printed::json(&consumed);
            if let Value::Object(map) = &mut value {
                let preview = kinds::preview(&kinds::describe(&consumed).payload);
                map.insert("preview".into(), Value::String(preview));
                map.insert("line".into(), Value::String(printed::line(&consumed)));
            }
            value
        }
        Err(e) => {
            let shown = &msg.payload[..msg.payload.len().min(HEX_BYTES)];
            json!({
                "channel": msg.topic.as_str(),
                "id": short_id(msg.id.as_bytes()),
                "kind": "undecodable",
                "error": e.to_string(),
                "properties": msg.properties,
                "size": msg.payload.len(),
                "payload_hex": shown.iter().map(|b| format!("{b:02x}")).collect::<String>(),
                "preview": kinds::preview(&msg.payload),
            })
        }
    }
}
