//! A recorded transcript as data: one [`Step`] per JSONL line, classified into what the
//! replay must do (send, connect, close, HTTP request) or check (frame, EOF, silence, HTTP
//! response). Pure: no I/O beyond the caller handing in the file's text.

use serde_json::Value;

/// One line of a transcript.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// The recorder's step number.
    pub step: u32,
    /// The recorder's connection name (`tcp1`, `pub`, `http`, ...).
    pub conn: String,
    /// The recorder's note (what the step shows).
    pub note: String,
    /// The printable rendering, with run-to-run values replaced by labels.
    pub text: String,
    /// Seconds since the flow started, as recorded.
    pub t: f64,
    /// What the step is.
    pub kind: Kind,
}

/// What a step does (client side) or expects (server side).
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    /// Open a TCP connection to the recorded endpoint `target`.
    Connect {
        /// Recorded `host:port`.
        target: String,
    },
    /// The client closed its socket.
    ClientClose,
    /// Exact bytes the client wrote.
    Send(Vec<u8>),
    /// One whole frame the server sent (`[u32 size][u32 type][data]`).
    Frame(Vec<u8>),
    /// The server closed the connection.
    Eof,
    /// Nothing arrived for this many seconds and the connection stayed open.
    Silence(f64),
    /// An HTTP request.
    Request {
        /// Recorded `host:port`.
        target: String,
        /// `GET`, `POST`, ...
        method: String,
        /// Path and query.
        path: String,
        /// Headers the recorder sent explicitly.
        headers: Vec<(String, String)>,
        /// Request body.
        body: Vec<u8>,
    },
    /// An HTTP response.
    Response {
        /// Status code.
        status: u16,
        /// Response headers (without `Date`).
        headers: Vec<(String, String)>,
        /// Response body.
        body: Vec<u8>,
    },
    /// An annotation; not wire traffic.
    Info,
}

impl Step {
    /// Whether the client does this step (as opposed to checking what the server did).
    pub fn is_client_action(&self) -> bool {
        matches!(
            self.kind,
            Kind::Connect { .. } | Kind::ClientClose | Kind::Send(_) | Kind::Request { .. }
        )
    }
}

/// Parses a whole transcript; an error names the line and what is wrong with it.
pub fn parse(text: &str) -> Result<Vec<Step>, String> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(n, line)| parse_line(line).map_err(|e| format!("line {}: {e}", n + 1)))
        .collect()
}

fn parse_line(line: &str) -> Result<Step, String> {
    let v: Value = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
    let field = |name: &str| v.get(name).and_then(Value::as_str).unwrap_or_default();
    let step = v
        .get("step")
        .and_then(Value::as_u64)
        .and_then(|s| u32::try_from(s).ok())
        .ok_or("no step number")?;
    let text = field("text").to_string();
    let bytes = decode_base64(field("b64"))?;
    let headers = headers(v.get("headers"));
    let kind = match field("dir") {
        "info" => Kind::Info,
        "send" if v.get("method").is_some() => Kind::Request {
            target: field("target").to_string(),
            method: field("method").to_string(),
            path: field("path").to_string(),
            headers,
            body: bytes,
        },
        "send" if text.starts_with("<connect ") && bytes.is_empty() => Kind::Connect {
            target: field("target").to_string(),
        },
        "send" if text == "<client close>" && bytes.is_empty() => Kind::ClientClose,
        "send" => Kind::Send(bytes),
        "recv" if v.get("status").is_some() => Kind::Response {
            status: v
                .get("status")
                .and_then(Value::as_u64)
                .and_then(|s| u16::try_from(s).ok())
                .ok_or("bad status")?,
            headers,
            body: bytes,
        },
        "recv" if text == "<EOF>" && bytes.is_empty() => Kind::Eof,
        "recv" if text.starts_with("<silence ") && bytes.is_empty() => {
            let secs = text
                .trim_start_matches("<silence ")
                .trim_end_matches(" s>")
                .parse::<f64>()
                .map_err(|_| format!("bad silence {text:?}"))?;
            Kind::Silence(secs)
        }
        "recv" => Kind::Frame(bytes),
        other => return Err(format!("unknown dir {other:?}")),
    };
    Ok(Step {
        step,
        conn: field("conn").to_string(),
        note: field("note").to_string(),
        text,
        t: v.get("t").and_then(Value::as_f64).unwrap_or(0.0),
        kind,
    })
}

fn headers(v: Option<&Value>) -> Vec<(String, String)> {
    v.and_then(Value::as_object)
        .map(|map| {
            map.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default()
}

/// Standard base64 (with `=` padding), as the recorder writes `b64`.
pub fn decode_base64(text: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let mut acc = 0u32;
    let mut bits = 0;
    for c in text.bytes().filter(|c| *c != b'=') {
        let value = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return Err(format!("bad base64 character {:?}", c as char)),
        };
        acc = (acc << 6) | u32::from(value);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_decodes_padded_and_unpadded_input() {
        assert_eq!(decode_base64("").expect("valid"), b"");
        assert_eq!(decode_base64("TlVQCg==").expect("valid"), b"NUP\n");
        assert_eq!(decode_base64("ICBWMg==").expect("valid"), b"  V2");
        assert_eq!(decode_base64("YWJj").expect("valid"), b"abc");
        assert_eq!(decode_base64("//8=").expect("valid"), [0xff, 0xff]);
        assert!(decode_base64("a$").is_err());
    }

    #[test]
    fn lines_are_classified_by_direction_and_pseudo_event() {
        let text = r#"{"step": 1, "conn": "tcp1", "dir": "send", "note": "n", "text": "<connect 127.0.0.1:4250>", "b64": "", "target": "127.0.0.1:4250", "t": 0.001}
{"step": 2, "conn": "tcp1", "dir": "send", "note": "", "text": "  V2", "b64": "ICBWMg==", "t": 0.002}
{"step": 3, "conn": "tcp1", "dir": "recv", "note": "", "text": "<silence 0.5 s>", "b64": "", "t": 0.5}
{"step": 4, "conn": "tcp1", "dir": "recv", "note": "", "text": "<EOF>", "b64": "", "t": 0.6}
{"step": 5, "conn": "-", "dir": "info", "note": "", "text": "x", "t": 0.6}
{"step": 6, "conn": "http", "dir": "send", "note": "", "text": "GET /ping", "b64": "", "method": "GET", "path": "/ping", "target": "127.0.0.1:4251", "headers": {"Accept": "a"}, "t": 0.7}
{"step": 7, "conn": "http", "dir": "recv", "note": "", "text": "200 OK", "b64": "T0s=", "status": 200, "headers": {"Content-Type": "text/plain"}, "t": 0.8}
{"step": 8, "conn": "tcp1", "dir": "send", "note": "", "text": "<client close>", "b64": "", "t": 0.9}"#;
        let steps = parse(text).expect("valid");
        let kinds: Vec<Kind> = steps.into_iter().map(|s| s.kind).collect();
        assert_eq!(
            kinds,
            vec![
                Kind::Connect {
                    target: "127.0.0.1:4250".into()
                },
                Kind::Send(b"  V2".to_vec()),
                Kind::Silence(0.5),
                Kind::Eof,
                Kind::Info,
                Kind::Request {
                    target: "127.0.0.1:4251".into(),
                    method: "GET".into(),
                    path: "/ping".into(),
                    headers: vec![("Accept".into(), "a".into())],
                    body: vec![],
                },
                Kind::Response {
                    status: 200,
                    headers: vec![("Content-Type".into(), "text/plain".into())],
                    body: b"OK".to_vec(),
                },
                Kind::ClientClose,
            ]
        );
    }

    #[test]
    fn a_bad_line_is_reported_with_its_number() {
        let err = parse("{\"step\": 1, \"dir\": \"send\", \"b64\": \"\"}\nnot json")
            .expect_err("an error");
        assert!(err.starts_with("line 2:"), "{err}");
    }
}
