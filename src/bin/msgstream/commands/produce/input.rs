//! Reading the user's messages for `produce --input`: one payload per line (`raw`) or one JSON
//! object per line (`json`). Parsing is separate from writing so that every malformed line is
//! a clear error naming its line, tested without a backend.

use std::collections::BTreeMap;
use std::io::{BufRead, Read};

use base64::Engine as _;
use clap::ValueEnum;
use serde::Deserialize;

use crate::commands::kinds::Kind;

/// How `--input` is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Each line is one payload (bytes as they are, without the line end).
    Raw,
    /// Each line is a JSON object: `{"payload": "…"}` plus optional `channel` or `key`,
    /// `timestamp`, `kind`, `payload_base64` instead of `payload`, and `properties`.
    Json,
}

/// Where a record goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// To the named channel (one of `--channels`).
    Channel(String),
    /// By hash key: channel `key % number of channels`.
    Key(u32),
    /// Spread over the channels in turn.
    Spread,
}

/// One message to write, as read from one input line.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// 1-based line number, for errors found later (a timestamp going back).
    pub line: u64,
    /// Where it goes.
    pub route: Route,
    /// Its timestamp; `None`: one after the previous one.
    pub timestamp: Option<u64>,
    /// What kind of message it becomes.
    pub kind: Kind,
    /// The bytes.
    pub payload: Vec<u8>,
    /// Transport properties.
    pub properties: BTreeMap<String, String>,
}

/// A JSON input line. Unknown fields are refused: a misspelt `timestamp` would otherwise be
/// silently replaced by a generated one.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonLine {
    channel: Option<String>,
    key: Option<u32>,
    timestamp: Option<u64>,
    kind: Option<Kind>,
    payload: Option<String>,
    payload_base64: Option<String>,
    #[serde(default)]
    properties: BTreeMap<String, String>,
}

/// Reads records one line at a time; an error carries its line number (the caller stops there).
pub struct Records<R> {
    reader: R,
    format: Format,
    kind: Kind,
    /// The longest line accepted, without its line end.
    max_line: u64,
    line: u64,
}

impl<R: BufRead> Records<R> {
    /// Records of `reader`; raw lines become messages of `kind`. A line longer than `max_line`
    /// bytes (without its line end) is refused after reading at most that much of it, so an
    /// input without line ends (`/dev/zero`) fails at once instead of filling memory.
    pub fn new(reader: R, format: Format, kind: Kind, max_line: u64) -> Self {
        Records {
            reader,
            format,
            kind,
            max_line,
            line: 0,
        }
    }

    /// The next line without its line end (`\n` or `\r\n`); `Ok(None)` at the end.
    fn read_line(&mut self) -> Result<Option<Vec<u8>>, String> {
        let mut bytes = Vec::new();
        // Room for the line end after the longest line.
        let bound = self.max_line.saturating_add(2);
        let read = (&mut self.reader)
            .take(bound)
            .read_until(b'\n', &mut bytes)
            .map_err(|e| format!("cannot read: {e}"))?;
        if read == 0 {
            return Ok(None);
        }
        if bytes.last() == Some(&b'\n') {
            bytes.pop();
            if bytes.last() == Some(&b'\r') {
                bytes.pop();
            }
        }
        if bytes.len() as u64 > self.max_line {
            return Err(format!(
                "longer than {} bytes, the largest payload: split it, or send it another way",
                self.max_line
            ));
        }
        Ok(Some(bytes))
    }
}

impl<R: BufRead> Iterator for Records<R> {
    /// A record, or `(line, what is wrong)`.
    type Item = Result<Record, (u64, String)>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            self.line += 1;
            let bytes = match self.read_line() {
                Ok(Some(bytes)) => bytes,
                Ok(None) => return None,
                Err(message) => return Some(Err((self.line, message))),
            };
            let record = match self.format {
                Format::Raw => Ok(Record {
                    line: self.line,
                    route: Route::Spread,
                    timestamp: None,
                    kind: self.kind,
                    payload: bytes,
                    properties: BTreeMap::new(),
                }),
                // Blank lines between JSON objects are layout, not messages.
                Format::Json if bytes.iter().all(u8::is_ascii_whitespace) => continue,
                Format::Json => parse_json(&bytes, self.line, self.kind),
            };
            return Some(record.map_err(|message| (self.line, message)));
        }
    }
}

fn parse_json(bytes: &[u8], line: u64, default_kind: Kind) -> Result<Record, String> {
    let json: JsonLine =
        serde_json::from_slice(bytes).map_err(|e| format!("not a message: {e}"))?;
    let route = match (json.channel, json.key) {
        (Some(_), Some(_)) => return Err("give \"channel\" or \"key\", not both".to_string()),
        (Some(channel), None) => Route::Channel(channel),
        (None, Some(key)) => Route::Key(key),
        (None, None) => Route::Spread,
    };
    let payload = match (json.payload, json.payload_base64) {
        (Some(_), Some(_)) => {
            return Err("give \"payload\" or \"payload_base64\", not both".to_string())
        }
        (Some(text), None) => text.into_bytes(),
        (None, Some(encoded)) => base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .map_err(|e| format!("\"payload_base64\" is not base64: {e}"))?,
        (None, None) => return Err("no \"payload\" (or \"payload_base64\")".to_string()),
    };
    Ok(Record {
        line,
        route,
        timestamp: json.timestamp,
        kind: json.kind.unwrap_or(default_kind),
        payload,
        properties: json.properties,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(format: Format, text: &str) -> Vec<Result<Record, (u64, String)>> {
        Records::new(text.as_bytes(), format, Kind::Insert, 1 << 20).collect()
    }

    #[test]
    fn a_line_past_the_limit_is_refused_after_reading_the_limit() {
        let records: Vec<_> = Records::new(
            "abcd\r\nabcde\nok\n".as_bytes(),
            Format::Raw,
            Kind::Insert,
            4,
        )
        .collect();
        assert_eq!(records[0].clone().expect("at the limit").payload, b"abcd");
        let (line, message) = records[1].clone().expect_err("past the limit");
        assert_eq!(line, 2);
        assert!(message.contains("longer than 4 bytes"), "{message}");
        // An endless line: the reader stops after the limit and the line end's room.
        let mut endless = std::io::repeat(b'x').take(1 << 30);
        let mut records = Records::new(
            std::io::BufReader::new(&mut endless),
            Format::Raw,
            Kind::Insert,
            1000,
        );
        let (line, _) = records.next().expect("a record").expect_err("too long");
        assert_eq!(line, 1);
        drop(records);
        assert!(
            endless.limit() >= (1 << 30) - 1002 - 8192,
            "read past the limit"
        );
    }

    #[test]
    fn raw_lines_are_payloads() {
        let records = read(Format::Raw, "a\r\n\nb");
        let payloads: Vec<Vec<u8>> = records
            .into_iter()
            .map(|r| r.expect("ok").payload)
            .collect();
        assert_eq!(payloads, vec![b"a".to_vec(), Vec::new(), b"b".to_vec()]);
    }

    #[test]
    fn json_lines_carry_route_time_kind_payload_properties() {
        let text = concat!(
            r#"{"channel":"c1","timestamp":5,"kind":"delete","payload":"7","properties":{"k":"v"}}"#,
            "\n\n",
            r#"{"key":3,"kind":"custom","payload_base64":"AP8="}"#,
            "\n"
        );
        let records: Vec<Record> = read(Format::Json, text)
            .into_iter()
            .map(|r| r.expect("ok"))
            .collect();
        assert_eq!(records[0].route, Route::Channel("c1".into()));
        assert_eq!(
            (records[0].timestamp, records[0].kind),
            (Some(5), Kind::Delete)
        );
        assert_eq!(
            records[0].properties.get("k").map(String::as_str),
            Some("v")
        );
        assert_eq!(
            (records[1].line, records[1].route.clone()),
            (3, Route::Key(3))
        );
        assert_eq!(records[1].payload, vec![0, 0xff]);
    }

    #[test]
    fn bad_lines_name_their_line_and_the_problem() {
        let cases = [
            ("{\"payload\":\"a\"}\n{\"payload\":", "not a message"),
            ("{}\n{\"payload\":\"a\",\"timestamp\":-1}", "not a message"),
            (
                "{}\n{\"payload\":\"a\",\"timestmap\":1}",
                "unknown field `timestmap`",
            ),
            (
                "{}\n{\"payload\":\"a\",\"kind\":\"upsert\"}",
                "unknown variant `upsert`",
            ),
            (
                "{}\n{\"payload\":\"a\",\"channel\":\"c\",\"key\":1}",
                "not both",
            ),
            ("{}\n{\"payload_base64\":\"%%\"}", "not base64"),
            ("{}\n{\"channel\":\"c\"}", "no \"payload\""),
        ];
        for (text, expected) in cases {
            let records = read(Format::Json, text);
            let (line, message) = records[1].clone().expect_err(text);
            assert_eq!(line, 2, "{text}");
            assert!(message.contains(expected), "{text}: {message}");
        }
    }
}
