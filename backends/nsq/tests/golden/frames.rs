//! TCP frames: splitting a byte stream into frames, rendering them as the transcripts do, and
//! comparing a recorded frame with a replayed one byte for byte except the values that vary
//! run to run (message timestamps always; message ids when [`Labels::varying_ids`] is set),
//! which are compared by consistent labels, and the recorder's wall-clock times in client
//! commands (`timestamp:<unix s>` consume offsets), which are moved by the difference between
//! the recording's clock and this run's. Pure.

use std::collections::HashMap;

/// Frame type of a message.
const MESSAGE: u32 = 2;

/// A one-to-one pairing of recorded values with replayed ones: equal recorded values must
/// replay as equal values, different ones as different values.
#[derive(Debug, Default)]
pub struct Pairing {
    forward: HashMap<Vec<u8>, Vec<u8>>,
    backward: HashMap<Vec<u8>, Vec<u8>>,
}

impl Pairing {
    /// Pairs `recorded` with `actual`, or says which earlier pairing this contradicts.
    pub fn bind(&mut self, what: &str, recorded: &[u8], actual: &[u8]) -> Result<(), String> {
        match (self.forward.get(recorded), self.backward.get(actual)) {
            (None, None) => {
                self.forward.insert(recorded.to_vec(), actual.to_vec());
                self.backward.insert(actual.to_vec(), recorded.to_vec());
                Ok(())
            }
            (Some(a), _) if a == actual => Ok(()),
            (Some(a), _) => Err(format!(
                "{what} {} was seen before as {}, now {}",
                printable(recorded),
                printable(a),
                printable(actual)
            )),
            (None, Some(r)) => Err(format!(
                "{what} {} replayed as {}, which already stood for {}",
                printable(recorded),
                printable(actual),
                printable(r)
            )),
        }
    }

    /// The replayed value paired with `recorded`.
    pub fn actual(&self, recorded: &[u8]) -> Option<&[u8]> {
        self.forward.get(recorded).map(Vec::as_slice)
    }

    /// Every `(recorded, actual)` pair.
    pub fn pairs(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.forward
            .iter()
            .map(|(r, a)| (r.as_slice(), a.as_slice()))
    }
}

/// What varies run to run on the TCP side of one replay.
#[derive(Debug, Default)]
pub struct Labels {
    /// Message ids are run-to-run values (upstream hex ids) rather than deterministic ones
    /// (Youzan binary ids on a fresh cluster).
    pub varying_ids: bool,
    /// Recorded message id ↔ replayed message id.
    pub ids: Pairing,
    /// Recorded message timestamp ↔ replayed timestamp.
    pub timestamps: Pairing,
    /// This run's clock minus the recording's, in ns, from the first message timestamp paired.
    pub clock_shift: Option<i64>,
}

impl Labels {
    /// A client command with recorded message ids replaced by their replayed counterparts
    /// (`FIN <id>` must name the id the server handed out in this run).
    pub fn outgoing(&self, recorded: &[u8]) -> Vec<u8> {
        let shifted = self.shift_times(recorded);
        if !self.varying_ids {
            return shifted;
        }
        self.ids
            .pairs()
            .fold(shifted, |bytes, (r, a)| replace(&bytes, r, a))
    }

    /// A request with every `timestamp:<unix s>` the recorder computed from its clock (a time
    /// between two of its messages, an hour after now) moved to the same place on this run's
    /// clock, so that it names the same messages. Values below [`WALL_CLOCK`] are positions
    /// (`timestamp:0` = the beginning, `-1` an error) and stay as recorded, as does everything
    /// before the first message paired a timestamp.
    pub fn shift_times(&self, recorded: &[u8]) -> Vec<u8> {
        let Some(shift) = self.clock_shift else {
            return recorded.to_vec();
        };
        let shift_secs = (shift as f64 / 1e9).round() as i64;
        let mut out = Vec::with_capacity(recorded.len());
        let mut rest = recorded;
        while let Some(at) = find(rest, TIMESTAMP) {
            let digits_from = at + TIMESTAMP.len();
            let digits = rest[digits_from..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .count();
            out.extend_from_slice(&rest[..digits_from]);
            let number = std::str::from_utf8(&rest[digits_from..digits_from + digits])
                .ok()
                .and_then(|d| d.parse::<i64>().ok());
            match number {
                Some(secs) if secs >= WALL_CLOCK => {
                    out.extend_from_slice((secs + shift_secs).to_string().as_bytes())
                }
                _ => out.extend_from_slice(&rest[digits_from..digits_from + digits]),
            }
            rest = &rest[digits_from + digits..];
        }
        out.extend_from_slice(rest);
        out
    }

    /// Compares a recorded frame with a replayed one; on a difference, says what differs.
    pub fn compare(&mut self, expected: &[u8], actual: &[u8]) -> Result<(), String> {
        let (Some((e_kind, e_data)), Some((a_kind, a_data))) = (split(expected), split(actual))
        else {
            return Err("malformed frame".into());
        };
        if e_kind != a_kind {
            return Err(format!("frame type {a_kind}, expected {e_kind}"));
        }
        if e_kind == MESSAGE {
            return self.compare_message(e_data, a_data);
        }
        let translated = self.outgoing(e_data);
        if translated != a_data {
            return Err("frame data differs".into());
        }
        Ok(())
    }

    fn compare_message(&mut self, expected: &[u8], actual: &[u8]) -> Result<(), String> {
        if expected.len() < 26 || actual.len() < 26 {
            return Err("message frame shorter than its header".into());
        }
        if expected[8..10] != actual[8..10] {
            return Err("attempts differ".into());
        }
        if expected[26..] != actual[26..] {
            return Err("message body (or offset/raw size) differs".into());
        }
        self.timestamps
            .bind("timestamp", &expected[..8], &actual[..8])?;
        if self.clock_shift.is_none() {
            let nanos = |b: &[u8]| i64::from_be_bytes(b.try_into().unwrap_or_default());
            self.clock_shift = Some(nanos(&actual[..8]) - nanos(&expected[..8]));
        }
        if self.varying_ids {
            self.ids
                .bind("message id", &expected[10..26], &actual[10..26])
        } else if expected[10..26] != actual[10..26] {
            Err("message id differs".into())
        } else {
            Ok(())
        }
    }
}

/// The consume-offset token whose value is a time (Youzan `timestamp:<unix s>`).
const TIMESTAMP: &[u8] = b"timestamp:";

/// The smallest `timestamp:` value read as a time on the recorder's clock (2001-09-09).
const WALL_CLOCK: i64 = 1_000_000_000;

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// `[u32 size][u32 type][data]` → `(type, data)`, if whole.
fn split(frame: &[u8]) -> Option<(u32, &[u8])> {
    let size = u32::from_be_bytes(frame.get(..4)?.try_into().ok()?) as usize;
    let kind = u32::from_be_bytes(frame.get(4..8)?.try_into().ok()?);
    (frame.len() == 4 + size && size >= 4).then(|| (kind, &frame[8..]))
}

/// Takes one whole frame off the front of `buffer`, if it holds one.
pub fn take_frame(buffer: &mut Vec<u8>) -> Option<Vec<u8>> {
    let size = u32::from_be_bytes(buffer.get(..4)?.try_into().ok()?) as usize;
    if buffer.len() < 4 + size {
        return None;
    }
    Some(buffer.drain(..4 + size).collect())
}

/// A frame as the transcripts render it: `RESPONSE ..`, `ERROR ..` or
/// `MESSAGE ts=.. attempts=.. id=.. body=..` (raw values, no labels).
pub fn render(frame: &[u8]) -> String {
    match split(frame) {
        Some((0, data)) => format!("RESPONSE {}", printable(data)),
        Some((1, data)) => format!("ERROR {}", printable(data)),
        Some((MESSAGE, data)) if data.len() >= 26 => format!(
            "MESSAGE ts={} attempts={} id={} rest={}",
            i64::from_be_bytes(data[..8].try_into().unwrap_or_default()),
            u16::from_be_bytes([data[8], data[9]]),
            printable(&data[10..26]),
            printable(&data[26..])
        ),
        _ => format!("malformed frame {}", printable(frame)),
    }
}

/// Bytes with `\n` and other non-printables escaped.
pub fn printable(bytes: &[u8]) -> String {
    let mut out = String::new();
    for &b in bytes {
        match b {
            b'\n' => out.push_str("\\n"),
            0x20..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out
}

fn replace(haystack: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    if from.is_empty() {
        return haystack.to_vec();
    }
    let mut out = Vec::with_capacity(haystack.len());
    let mut i = 0;
    while i < haystack.len() {
        if haystack[i..].starts_with(from) {
            out.extend_from_slice(to);
            i += from.len();
        } else {
            out.push(haystack[i]);
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u32, data: &[u8]) -> Vec<u8> {
        let mut f = ((data.len() + 4) as u32).to_be_bytes().to_vec();
        f.extend_from_slice(&kind.to_be_bytes());
        f.extend_from_slice(data);
        f
    }

    fn message(ts: i64, attempts: u16, id: &[u8; 16], body: &[u8]) -> Vec<u8> {
        let mut data = ts.to_be_bytes().to_vec();
        data.extend_from_slice(&attempts.to_be_bytes());
        data.extend_from_slice(id);
        data.extend_from_slice(body);
        frame(MESSAGE, &data)
    }

    fn upstream() -> Labels {
        Labels {
            varying_ids: true,
            ..Labels::default()
        }
    }

    #[test]
    fn responses_and_errors_compare_byte_for_byte() {
        let mut labels = upstream();
        assert!(labels.compare(&frame(0, b"OK"), &frame(0, b"OK")).is_ok());
        assert!(labels.compare(&frame(0, b"OK"), &frame(1, b"OK")).is_err());
        assert!(labels
            .compare(&frame(1, b"E_INVALID x"), &frame(1, b"E_INVALID y"))
            .is_err());
    }

    #[test]
    fn message_ids_and_timestamps_compare_by_consistent_labels() {
        let mut labels = upstream();
        let (r1, r2, a1, a2) = (
            b"aaaaaaaaaaaaaaaa",
            b"bbbbbbbbbbbbbbbb",
            b"0000000000000001",
            b"0000000000000002",
        );
        assert!(labels
            .compare(&message(10, 1, r1, b"m1"), &message(7, 1, a1, b"m1"))
            .is_ok());
        assert!(labels
            .compare(&message(20, 1, r2, b"m2"), &message(8, 1, a2, b"m2"))
            .is_ok());
        // The same recorded id and timestamp again (a redelivery) must be the same replayed ones.
        assert!(labels
            .compare(&message(10, 2, r1, b"m1"), &message(7, 2, a1, b"m1"))
            .is_ok());
        assert!(labels
            .compare(&message(10, 2, r1, b"m1"), &message(7, 2, a2, b"m1"))
            .is_err());
        assert!(labels
            .compare(&message(10, 2, r1, b"m1"), &message(8, 2, a1, b"m1"))
            .is_err());
        // A new recorded value must not reuse a replayed value that stands for another.
        let r3 = b"cccccccccccccccc";
        assert!(labels
            .compare(&message(30, 1, r3, b"m3"), &message(9, 1, a1, b"m3"))
            .is_err());
        // Attempts and body are exact.
        assert!(labels
            .compare(&message(10, 2, r1, b"m1"), &message(7, 3, a1, b"m1"))
            .is_err());
        assert!(labels
            .compare(&message(10, 2, r1, b"m1"), &message(7, 2, a1, b"mX"))
            .is_err());
    }

    #[test]
    fn deterministic_ids_compare_exactly() {
        let mut labels = Labels::default();
        let id = [7u8; 16];
        assert!(labels
            .compare(&message(1, 1, &id, b"x"), &message(2, 1, &id, b"x"))
            .is_ok());
        assert!(labels
            .compare(&message(1, 1, &id, b"x"), &message(2, 1, &[8u8; 16], b"x"))
            .is_err());
    }

    #[test]
    fn recorded_ids_are_translated_in_commands_and_error_texts() {
        let mut labels = upstream();
        let (r1, a1) = (b"aaaaaaaaaaaaaaaa", b"0000000000000001");
        labels
            .compare(&message(1, 1, r1, b"x"), &message(2, 1, a1, b"x"))
            .expect("valid");
        assert_eq!(
            labels.outgoing(b"FIN aaaaaaaaaaaaaaaa\n"),
            b"FIN 0000000000000001\n"
        );
        assert_eq!(
            labels.outgoing(b"FIN 0123456789abcdef\n"),
            b"FIN 0123456789abcdef\n"
        );
        let recorded = frame(
            1,
            b"E_FIN_FAILED FIN aaaaaaaaaaaaaaaa failed ID not in flight",
        );
        let replayed = frame(
            1,
            b"E_FIN_FAILED FIN 0000000000000001 failed ID not in flight",
        );
        assert!(labels.compare(&recorded, &replayed).is_ok());
    }

    #[test]
    fn recorded_wall_clock_offsets_move_with_the_clock_difference() {
        let mut labels = Labels::default();
        let id = [7u8; 16];
        assert_eq!(
            labels.outgoing(b"timestamp:1796405529"),
            b"timestamp:1796405529",
            "no message paired yet: as recorded"
        );
        let recorded = 1_796_405_526_089_729_800;
        let replayed = recorded + 20_900_400_000_000;
        labels
            .compare(
                &message(recorded, 1, &id, b"x"),
                &message(replayed, 1, &id, b"x"),
            )
            .expect("valid");
        assert_eq!(
            labels.outgoing(b"timestamp:1796405529"),
            b"timestamp:1796426429"
        );
        assert_eq!(labels.outgoing(b"timestamp:0"), b"timestamp:0");
        assert_eq!(labels.outgoing(b"timestamp:-1"), b"timestamp:-1");
        assert_eq!(
            labels.outgoing(b"SUB_ADVANCED t c 0 timestamp:1796405529\n"),
            b"SUB_ADVANCED t c 0 timestamp:1796426429\n"
        );
    }

    #[test]
    fn frames_are_taken_whole_from_a_stream() {
        let mut buffer = frame(0, b"OK");
        buffer.extend_from_slice(&frame(1, b"E")[..6]);
        assert_eq!(take_frame(&mut buffer), Some(frame(0, b"OK")));
        assert_eq!(take_frame(&mut buffer), None);
        buffer.extend_from_slice(&frame(1, b"E")[6..]);
        assert_eq!(take_frame(&mut buffer), Some(frame(1, b"E")));
        assert!(buffer.is_empty());
    }

    #[test]
    fn frames_render_like_the_transcripts() {
        assert_eq!(render(&frame(0, b"OK")), "RESPONSE OK");
        assert_eq!(render(&frame(1, b"E_X a\n")), "ERROR E_X a\\n");
        assert_eq!(
            render(&message(5, 2, b"0123456789abcdef", b"hi")),
            "MESSAGE ts=5 attempts=2 id=0123456789abcdef rest=hi"
        );
    }
}
