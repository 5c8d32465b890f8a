//! IDENTIFY, nsqd's feature negotiation, as pure functions: the body the client sends, the
//! reply it reads, and what to ask for after a refused message timeout. The dialling that
//! carries them is in `handshake`.

use std::time::Duration;

use serde::Deserialize;

use super::config::{ConnConfig, OutputBuffer};
use crate::codec::ServerError;
use crate::error::{Error, Result};

/// What the server granted in its IDENTIFY reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Negotiated {
    /// Highest RDY this connection may send.
    pub max_rdy_count: u32,
    /// Message timeout in effect: the configured one capped at `max_msg_timeout`, or the
    /// server's default when none was configured (see [`ConnConfig::msg_timeout`]).
    pub msg_timeout: Duration,
    /// Highest message timeout the server allows.
    pub max_msg_timeout: Duration,
    /// Whether AUTH was required (and done).
    pub auth_required: bool,
    /// Server version string.
    pub version: String,
}

#[derive(Deserialize)]
struct IdentifyReply {
    #[serde(default = "default_max_rdy")]
    max_rdy_count: u32,
    #[serde(default)]
    msg_timeout: u64,
    #[serde(default)]
    max_msg_timeout: u64,
    #[serde(default)]
    auth_required: bool,
    #[serde(default)]
    version: String,
}

fn default_max_rdy() -> u32 {
    2500
}

/// Whether an IDENTIFY was refused for its message timeout (nsqd and the Youzan fork:
/// `E_BAD_BODY IDENTIFY msg timeout (<ms>) is invalid`).
pub(super) fn refuses_msg_timeout(error: &ServerError) -> bool {
    error.code == "E_BAD_BODY" && error.text.contains("msg timeout")
}

/// What the server granted: its JSON reply, or defaults for a bare `OK` (a server without
/// feature negotiation).
pub(super) fn parse_identify(addr: &str, reply: &[u8]) -> Result<Negotiated> {
    if reply == b"OK" {
        return Ok(Negotiated {
            max_rdy_count: default_max_rdy(),
            msg_timeout: Duration::from_secs(60),
            max_msg_timeout: Duration::from_secs(15 * 60),
            auth_required: false,
            version: String::new(),
        });
    }
    let parsed: IdentifyReply = serde_json::from_slice(reply).map_err(|e| Error::Protocol {
        addr: addr.to_string(),
        what: format!("IDENTIFY reply: {e}"),
    })?;
    Ok(Negotiated {
        max_rdy_count: parsed.max_rdy_count,
        msg_timeout: Duration::from_millis(parsed.msg_timeout),
        max_msg_timeout: Duration::from_millis(parsed.max_msg_timeout),
        auth_required: parsed.auth_required,
        version: parsed.version,
    })
}

/// The IDENTIFY body asking for `msg_timeout` (`None`: the server's default) and the rest of
/// `config`.
pub(super) fn identify_body(config: &ConnConfig, msg_timeout: Option<Duration>) -> String {
    let (output_buffer_size, output_buffer_timeout) = output_buffer_fields(config.output_buffer);
    serde_json::json!({
        "client_id": config.client_id,
        "hostname": "localhost",
        "user_agent": config.user_agent,
        "feature_negotiation": true,
        "heartbeat_interval": config.heartbeat_interval.as_millis() as u64,
        "msg_timeout": msg_timeout.map_or(0, |t| t.as_millis() as u64),
        "output_buffer_size": output_buffer_size,
        "output_buffer_timeout": output_buffer_timeout,
    })
    .to_string()
}

/// The IDENTIFY fields `(output_buffer_size, output_buffer_timeout)`; 0 asks for the server's
/// setting.
fn output_buffer_fields(output_buffer: OutputBuffer) -> (i64, i64) {
    match output_buffer {
        OutputBuffer::ServerDefault => (0, 0),
        OutputBuffer::FlushEvery(every) => (
            0,
            i64::try_from(every.as_millis()).unwrap_or(i64::MAX).max(1),
        ),
        OutputBuffer::Off => (-1, -1),
    }
}

/// What to do once the server refused the message timeout asked for and a probe connection
/// (asking for none) told its maximum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AfterRefusal {
    /// The refusal stands: the timeout asked for is not above the maximum (below the server's
    /// minimum, say), which is not the client's to change, or no maximum was reported.
    Refused,
    /// The probe already runs at the maximum: keep it.
    KeepProbe,
    /// Connect once more, asking for exactly the maximum.
    AskFor(Duration),
}

/// See [`AfterRefusal`].
pub(super) fn after_refusal(asked: Duration, probe: &Negotiated) -> AfterRefusal {
    let max = probe.max_msg_timeout;
    if asked <= max || max.is_zero() {
        AfterRefusal::Refused
    } else if probe.msg_timeout == max {
        AfterRefusal::KeepProbe
    } else {
        AfterRefusal::AskFor(max)
    }
}

#[cfg(test)]
#[path = "identify_tests.rs"]
mod tests;
