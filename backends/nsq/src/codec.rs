//! Protocol V2 on the wire, with no I/O (the quinn-proto idea): commands are encoded into a
//! buffer, frames are decoded out of one.
//!
//! Guarantees: decoding never panics and never allocates by a length field read off the wire;
//! a frame is returned only once all of it is buffered; a length above the negotiated maximum
//! is an error before any of its body is read. Message ids are 16 opaque bytes, echoed raw in
//! FIN/REQ/TOUCH (Youzan servers send binary ids that can contain `\n` or spaces).

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// Frames the codec refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CodecError {
    /// The size field is negative or smaller than the frame type.
    #[error("bad frame size {0}")]
    BadFrameSize(i32),
    /// The size field is above the negotiated maximum.
    #[error("frame of {size} bytes exceeds the maximum of {max}")]
    FrameTooLarge {
        /// Declared size.
        size: usize,
        /// Allowed size.
        max: usize,
    },
    /// The frame type is not response, error or message.
    #[error("unknown frame type {0}")]
    UnknownFrameType(i32),
    /// A frame ended early: the connection closed in the middle of one (never reported as a
    /// clean close), or a frame is shorter than its fixed part.
    #[error("truncated {what}: need {needed} bytes, got {got}")]
    Truncated {
        /// What was being decoded.
        what: &'static str,
        /// Bytes the fixed part needs.
        needed: usize,
        /// Bytes there were.
        got: usize,
    },
}

/// The protocol magic a client sends first.
pub const MAGIC_V2: &[u8; 4] = b"  V2";

/// The payload of a heartbeat response frame.
pub const HEARTBEAT: &[u8] = b"_heartbeat_";

/// The response to CLS.
pub const CLOSE_WAIT: &[u8] = b"CLOSE_WAIT";

/// Header bytes of a message frame body: timestamp (8), attempts (2), id (16).
const MESSAGE_HEADER: usize = 26;

/// Offset (8) and raw size (4) that trace/ordered deliveries carry before the body.
const OFFSET_HEADER: usize = 12;

/// A message id: 16 bytes the server chose, never interpreted by the client.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MsgId(pub [u8; 16]);

impl std::fmt::Debug for MsgId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MsgId(")?;
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))?;
        write!(f, ")")
    }
}

/// A consume offset for SUB_ADVANCED (Youzan), written as `<type>:<value>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumeOffset {
    /// A byte offset in the partition's virtual queue (what deliveries carry as `offset`).
    VirtualQueue(u64),
    /// The first message at or after this time, in seconds since the epoch.
    Timestamp(u64),
    /// The current end of the partition: only new messages (`special:-1`).
    Latest,
}

impl std::fmt::Display for ConsumeOffset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConsumeOffset::VirtualQueue(offset) => write!(f, "virtual_queue:{offset}"),
            ConsumeOffset::Timestamp(secs) => write!(f, "timestamp:{secs}"),
            ConsumeOffset::Latest => write!(f, "special:-1"),
        }
    }
}

/// One client command. Names are validated by the caller ([`validate_name`]).
#[derive(Debug, Clone, Copy)]
pub enum Command<'a> {
    /// `IDENTIFY` with its JSON body.
    Identify(&'a [u8]),
    /// `AUTH` with the secret.
    Auth(&'a [u8]),
    /// `SUB topic channel [partition]`.
    Sub {
        /// Topic.
        topic: &'a str,
        /// NSQ channel.
        channel: &'a str,
        /// Youzan partition; `None` is the server's default.
        partition: Option<u32>,
    },
    /// `SUB_ORDERED topic channel partition` (Youzan).
    SubOrdered {
        /// Topic.
        topic: &'a str,
        /// NSQ channel.
        channel: &'a str,
        /// Partition consumed in order.
        partition: u32,
    },
    /// `SUB_ADVANCED topic channel [partition [offset]]` (Youzan). With an offset the server
    /// ignores the partition (notes §2.6.1); the caller decides what to send.
    SubAdvanced {
        /// Topic.
        topic: &'a str,
        /// NSQ channel.
        channel: &'a str,
        /// Partition.
        partition: u32,
        /// Where the channel starts, applied only by its first client.
        offset: Option<ConsumeOffset>,
    },
    /// `PUB topic [partition]` + body.
    Pub {
        /// Topic.
        topic: &'a str,
        /// Partition (Youzan).
        partition: Option<u32>,
        /// Message body.
        body: &'a [u8],
    },
    /// `MPUB topic [partition]` + count + bodies: one atomic batch.
    Mpub {
        /// Topic.
        topic: &'a str,
        /// Partition (Youzan).
        partition: Option<u32>,
        /// Message bodies, in order.
        bodies: &'a [Bytes],
    },
    /// `DPUB topic defer_ms` + body.
    Dpub {
        /// Topic.
        topic: &'a str,
        /// Delay before the message becomes visible.
        defer_ms: u64,
        /// Message body.
        body: &'a [u8],
    },
    /// `PUB_TRACE topic partition` + trace id + body (Youzan): the reply carries the offset.
    PubTrace {
        /// Topic.
        topic: &'a str,
        /// Partition.
        partition: u32,
        /// Trace id stored with the message.
        trace_id: u64,
        /// Message body.
        body: &'a [u8],
    },
    /// `RDY n`.
    Rdy(u32),
    /// `FIN id`.
    Fin(&'a MsgId),
    /// `REQ id delay_ms`.
    Req(&'a MsgId, u64),
    /// `TOUCH id`.
    Touch(&'a MsgId),
    /// `CLS`: stop sending, answer `CLOSE_WAIT`.
    Cls,
    /// `NOP`: the answer to a heartbeat.
    Nop,
}

fn line(buf: &mut BytesMut, words: &[&[u8]]) {
    for (i, word) in words.iter().enumerate() {
        if i > 0 {
            buf.put_u8(b' ');
        }
        buf.put_slice(word);
    }
    buf.put_u8(b'\n');
}

/// Appends `n` in decimal. Commands sent per message (REQ's delay, a publish's partition) are
/// encoded without the `String` that `to_string` would allocate and free each time.
fn put_decimal(buf: &mut BytesMut, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut start = digits.len();
    loop {
        start -= 1;
        digits[start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    buf.put_slice(&digits[start..]);
}

/// `NAME id[ delay]\n` for FIN, REQ and TOUCH, the commands sent once per message, with one
/// reservation for the whole line instead of the word-by-word [`line`]; `name` ends in its
/// space.
fn id_line(buf: &mut BytesMut, name: &[u8], id: &MsgId, delay_ms: Option<u64>) {
    buf.reserve(name.len() + id.0.len() + 22);
    buf.put_slice(name);
    buf.put_slice(&id.0);
    if let Some(delay) = delay_ms {
        buf.put_u8(b' ');
        put_decimal(buf, delay);
    }
    buf.put_u8(b'\n');
}

fn sized_body(buf: &mut BytesMut, body: &[u8]) {
    buf.put_u32(body.len() as u32);
    buf.put_slice(body);
}

impl Command<'_> {
    /// Appends the wire form of the command to `buf`.
    pub fn encode(&self, buf: &mut BytesMut) {
        let partition_text;
        match *self {
            Command::Identify(body) => {
                line(buf, &[b"IDENTIFY"]);
                sized_body(buf, body);
            }
            Command::Auth(secret) => {
                line(buf, &[b"AUTH"]);
                sized_body(buf, secret);
            }
            Command::Sub {
                topic,
                channel,
                partition,
            } => match partition {
                Some(p) => {
                    partition_text = p.to_string();
                    line(
                        buf,
                        &[
                            b"SUB",
                            topic.as_bytes(),
                            channel.as_bytes(),
                            partition_text.as_bytes(),
                        ],
                    );
                }
                None => line(buf, &[b"SUB", topic.as_bytes(), channel.as_bytes()]),
            },
            Command::SubOrdered {
                topic,
                channel,
                partition,
            } => {
                partition_text = partition.to_string();
                line(
                    buf,
                    &[
                        b"SUB_ORDERED",
                        topic.as_bytes(),
                        channel.as_bytes(),
                        partition_text.as_bytes(),
                    ],
                );
            }
            Command::SubAdvanced {
                topic,
                channel,
                partition,
                offset,
            } => {
                partition_text = partition.to_string();
                let mut words: Vec<&[u8]> = vec![
                    b"SUB_ADVANCED",
                    topic.as_bytes(),
                    channel.as_bytes(),
                    partition_text.as_bytes(),
                ];
                let offset_text = offset.map(|o| o.to_string());
                if let Some(text) = &offset_text {
                    words.push(text.as_bytes());
                }
                line(buf, &words);
            }
            Command::Pub {
                topic,
                partition,
                body,
            } => {
                // One reservation for the whole command: line (name, topic, a partition of at
                // most 10 digits, separators), size and body.
                buf.reserve(4 + topic.len() + 12 + 4 + body.len());
                publish_line(buf, b"PUB", topic, partition);
                sized_body(buf, body);
            }
            Command::Mpub {
                topic,
                partition,
                bodies,
            } => {
                publish_line(buf, b"MPUB", topic, partition);
                let total: usize = 4 + bodies.iter().map(|b| 4 + b.len()).sum::<usize>();
                buf.put_u32(total as u32);
                buf.put_u32(bodies.len() as u32);
                for body in bodies {
                    sized_body(buf, body);
                }
            }
            Command::Dpub {
                topic,
                defer_ms,
                body,
            } => {
                buf.put_slice(b"DPUB ");
                buf.put_slice(topic.as_bytes());
                buf.put_u8(b' ');
                put_decimal(buf, defer_ms);
                buf.put_u8(b'\n');
                sized_body(buf, body);
            }
            Command::PubTrace {
                topic,
                partition,
                trace_id,
                body,
            } => {
                publish_line(buf, b"PUB_TRACE", topic, Some(partition));
                buf.put_u32((8 + body.len()) as u32);
                buf.put_u64(trace_id);
                buf.put_slice(body);
            }
            Command::Rdy(count) => {
                buf.put_slice(b"RDY ");
                put_decimal(buf, u64::from(count));
                buf.put_u8(b'\n');
            }
            Command::Fin(id) => id_line(buf, b"FIN ", id, None),
            Command::Req(id, delay_ms) => id_line(buf, b"REQ ", id, Some(delay_ms)),
            Command::Touch(id) => id_line(buf, b"TOUCH ", id, None),
            Command::Cls => line(buf, &[b"CLS"]),
            Command::Nop => line(buf, &[b"NOP"]),
        }
    }
}

/// `NAME topic[ partition]\n`, the line of every publish: written directly (no word list, no
/// `String` for the partition).
fn publish_line(buf: &mut BytesMut, name: &[u8], topic: &str, partition: Option<u32>) {
    buf.put_slice(name);
    buf.put_u8(b' ');
    buf.put_slice(topic.as_bytes());
    if let Some(p) = partition {
        buf.put_u8(b' ');
        put_decimal(buf, u64::from(p));
    }
    buf.put_u8(b'\n');
}

/// An error frame: the code (first word) and the server's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerError {
    /// `E_INVALID`, `E_FIN_FAILED`, …
    pub code: String,
    /// The rest of the frame.
    pub text: String,
}

impl ServerError {
    /// Whether the server closes the connection after this error. Only the three "id not in
    /// flight" errors leave it usable (nsqd 1.3.0, observed on the wire).
    pub fn is_fatal(&self) -> bool {
        !matches!(
            self.code.as_str(),
            "E_FIN_FAILED" | "E_REQ_FAILED" | "E_TOUCH_FAILED"
        )
    }

    fn parse(data: &[u8]) -> ServerError {
        let text = String::from_utf8_lossy(data);
        match text.split_once(' ') {
            Some((code, rest)) => ServerError {
                code: code.to_string(),
                text: rest.to_string(),
            },
            None => ServerError {
                code: text.into_owned(),
                text: String::new(),
            },
        }
    }
}

/// One server frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// Frame type 0: `OK`, `CLOSE_WAIT`, `_heartbeat_`, JSON.
    Response(Bytes),
    /// Frame type 1.
    Error(ServerError),
    /// Frame type 2: the undecoded message (see [`RawMessage::parse`]).
    Message(Bytes),
}

/// Takes one frame off the front of `buf`, or `Ok(None)` when more bytes are needed. Frames
/// whose declared size exceeds `max_size` are refused without waiting for their bytes.
pub fn decode_frame(buf: &mut BytesMut, max_size: usize) -> Result<Option<Frame>, CodecError> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let declared = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
    let size = usize::try_from(declared)
        .ok()
        .filter(|s| *s >= 4)
        .ok_or(CodecError::BadFrameSize(declared))?;
    if size > max_size {
        return Err(CodecError::FrameTooLarge {
            size,
            max: max_size,
        });
    }
    if buf.len() < 4 + size {
        return Ok(None);
    }
    buf.advance(4);
    let mut frame = buf.split_to(size).freeze();
    let kind = frame.get_i32();
    match kind {
        0 => Ok(Some(Frame::Response(frame))),
        1 => Ok(Some(Frame::Error(ServerError::parse(&frame)))),
        2 => Ok(Some(Frame::Message(frame))),
        other => Err(CodecError::UnknownFrameType(other)),
    }
}

/// A delivered message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawMessage {
    /// Publish time, nanoseconds since the epoch (kept across requeues).
    pub timestamp: i64,
    /// 1 on first delivery, +1 per redelivery.
    pub attempts: u16,
    /// The server's id, echoed in FIN/REQ/TOUCH.
    pub id: MsgId,
    /// `(offset, raw_size)` of trace/ordered deliveries: the next message is at
    /// `offset + raw_size`.
    pub position: Option<(u64, u32)>,
    /// The payload.
    pub body: Bytes,
}

impl RawMessage {
    /// Decodes a message frame; `with_position` for SUB_ADVANCED/SUB_ORDERED subscriptions,
    /// whose frames carry offset and raw size before the body.
    pub fn parse(mut data: Bytes, with_position: bool) -> Result<RawMessage, CodecError> {
        let needed = MESSAGE_HEADER + if with_position { OFFSET_HEADER } else { 0 };
        if data.len() < needed {
            return Err(CodecError::Truncated {
                what: "message header",
                needed,
                got: data.len(),
            });
        }
        let timestamp = data.get_i64();
        let attempts = data.get_u16();
        let mut id = [0u8; 16];
        data.copy_to_slice(&mut id);
        let position = with_position.then(|| (data.get_u64(), data.get_u32()));
        Ok(RawMessage {
            timestamp,
            attempts,
            id: MsgId(id),
            position,
            body: data,
        })
    }
}

/// The reply to PUB_TRACE: `OK`, id, offset, raw size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceReceipt {
    /// The message id.
    pub id: MsgId,
    /// Its offset in the partition.
    pub offset: u64,
    /// Its stored size; the next message starts at `offset + raw_size`.
    pub raw_size: u32,
}

impl TraceReceipt {
    /// Decodes the 30-byte PUB_TRACE response.
    pub fn parse(mut data: &[u8]) -> Result<TraceReceipt, CodecError> {
        const LEN: usize = 2 + 16 + 8 + 4;
        if data.len() < LEN || !data.starts_with(b"OK") {
            return Err(CodecError::Truncated {
                what: "PUB_TRACE response",
                needed: LEN,
                got: data.len(),
            });
        }
        data.advance(2);
        let mut id = [0u8; 16];
        data.copy_to_slice(&mut id);
        Ok(TraceReceipt {
            id: MsgId(id),
            offset: data.get_u64(),
            raw_size: data.get_u32(),
        })
    }
}

/// Checks a topic or channel name against nsqd's rule: `[.a-zA-Z0-9_-]{1,64}`, optionally
/// ending in `#ephemeral` (counted in the 64). Spaces would split the command line.
pub fn validate_name(name: &str) -> bool {
    let base = name.strip_suffix("#ephemeral").unwrap_or(name);
    !base.is_empty() && name.len() <= 64 && base.bytes().all(|b| NAME_BYTES[usize::from(b)])
}

/// Which bytes a name may hold: `[.a-zA-Z0-9_-]` (a table: every publish checks its topic).
const NAME_BYTES: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = c.is_ascii_alphanumeric() || c == b'.' || c == b'_' || c == b'-';
        b += 1;
    }
    table
};

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(cmd: Command<'_>) -> Vec<u8> {
        let mut buf = BytesMut::new();
        cmd.encode(&mut buf);
        buf.to_vec()
    }

    fn frame(kind: i32, data: &[u8]) -> BytesMut {
        let mut buf = BytesMut::new();
        buf.put_i32(4 + data.len() as i32);
        buf.put_i32(kind);
        buf.put_slice(data);
        buf
    }

    #[test]
    fn binary_ids_are_written_raw() {
        let id = MsgId(*b"ab\ncd ef\n\x00\xff12345");
        let mut want = b"FIN ".to_vec();
        want.extend_from_slice(&id.0);
        want.push(b'\n');
        assert_eq!(encode(Command::Fin(&id)), want);
        let mut want = b"REQ ".to_vec();
        want.extend_from_slice(&id.0);
        want.extend_from_slice(b" 1500\n");
        assert_eq!(encode(Command::Req(&id, 1500)), want);
        let touch = encode(Command::Touch(&id));
        assert_eq!(&touch[6..22], &id.0);
        assert_eq!(touch.len(), 23);
    }

    #[test]
    fn numbers_are_written_in_decimal() {
        assert_eq!(encode(Command::Rdy(0)), b"RDY 0\n");
        assert_eq!(encode(Command::Rdy(2500)), b"RDY 2500\n");
        let id = MsgId([b'a'; 16]);
        let mut want = b"REQ aaaaaaaaaaaaaaaa ".to_vec();
        want.extend_from_slice(u64::MAX.to_string().as_bytes());
        want.push(b'\n');
        assert_eq!(encode(Command::Req(&id, u64::MAX)), want);
        assert_eq!(
            encode(Command::Dpub {
                topic: "t",
                defer_ms: 10,
                body: b"x"
            }),
            b"DPUB t 10\n\0\0\0\x01x"
        );
        assert_eq!(
            encode(Command::Pub {
                topic: "t",
                partition: Some(u32::MAX),
                body: b"x"
            }),
            b"PUB t 4294967295\n\0\0\0\x01x"
        );
    }

    #[test]
    fn commands_with_bodies() {
        assert_eq!(
            encode(Command::Pub {
                topic: "t",
                partition: None,
                body: b"hi"
            }),
            b"PUB t\n\0\0\0\x02hi"
        );
        assert_eq!(
            encode(Command::Pub {
                topic: "t",
                partition: Some(3),
                body: b"x"
            }),
            b"PUB t 3\n\0\0\0\x01x"
        );
        let bodies = [Bytes::from_static(b"a"), Bytes::from_static(b"bc")];
        assert_eq!(
            encode(Command::Mpub {
                topic: "t",
                partition: None,
                bodies: &bodies
            }),
            b"MPUB t\n\0\0\0\x0f\0\0\0\x02\0\0\0\x01a\0\0\0\x02bc"
        );
        assert_eq!(
            encode(Command::PubTrace {
                topic: "t",
                partition: 1,
                trace_id: 7,
                body: b"z"
            }),
            b"PUB_TRACE t 1\n\0\0\0\x09\0\0\0\0\0\0\0\x07z"
        );
        assert_eq!(
            encode(Command::SubAdvanced {
                topic: "t",
                channel: "c",
                partition: 2,
                offset: Some(ConsumeOffset::Latest)
            }),
            b"SUB_ADVANCED t c 2 special:-1\n"
        );
        assert_eq!(
            ConsumeOffset::VirtualQueue(35).to_string(),
            "virtual_queue:35"
        );
        assert_eq!(ConsumeOffset::Timestamp(9).to_string(), "timestamp:9");
    }

    #[test]
    fn frames_of_each_type() {
        let mut buf = frame(0, b"OK");
        buf.extend_from_slice(&frame(1, b"E_FIN_FAILED FIN x failed"));
        buf.extend_from_slice(&frame(1, b"E_INVALID invalid command X"));
        assert_eq!(
            decode_frame(&mut buf, 1024).expect("ok"),
            Some(Frame::Response(Bytes::from_static(b"OK")))
        );
        let Some(Frame::Error(fin)) = decode_frame(&mut buf, 1024).expect("ok") else {
            panic!("error frame expected")
        };
        assert_eq!(fin.code, "E_FIN_FAILED");
        assert!(!fin.is_fatal());
        let Some(Frame::Error(invalid)) = decode_frame(&mut buf, 1024).expect("ok") else {
            panic!("error frame expected")
        };
        assert_eq!(invalid.text, "invalid command X");
        assert!(invalid.is_fatal());
        assert!(buf.is_empty());
        assert_eq!(decode_frame(&mut buf, 1024).expect("ok"), None);
    }

    fn server_error(frame_data: &[u8]) -> ServerError {
        let mut buf = frame(1, frame_data);
        match decode_frame(&mut buf, 1024).expect("ok") {
            Some(Frame::Error(error)) => error,
            other => panic!("error frame expected, got {other:?}"),
        }
    }

    #[test]
    fn only_the_three_id_not_in_flight_errors_leave_the_connection_usable() {
        for code in ["E_FIN_FAILED", "E_REQ_FAILED", "E_TOUCH_FAILED"] {
            let error =
                server_error(format!("{code} {code} 0123 failed ID not in flight").as_bytes());
            assert_eq!(error.code, code);
            assert!(!error.is_fatal(), "{code} leaves the connection open");
        }
        for code in [
            "E_INVALID",
            "E_BAD_TOPIC",
            "E_BAD_CHANNEL",
            "E_BAD_BODY",
            "E_BAD_MESSAGE",
            "E_PUB_FAILED",
            "E_AUTH_FAILED",
        ] {
            let error = server_error(format!("{code} some text").as_bytes());
            assert_eq!(
                (error.code.as_str(), error.text.as_str()),
                (code, "some text")
            );
            assert!(error.is_fatal(), "{code} closes the connection");
        }
        // A code alone, and one that merely starts like a non-fatal one, are fatal too.
        assert!(server_error(b"E_INVALID").is_fatal());
        assert!(server_error(b"E_FIN_FAILED_X text").is_fatal());
    }

    #[test]
    fn truncated_frames_wait_and_bad_sizes_fail() {
        let whole = frame(0, b"_heartbeat_");
        for cut in 0..whole.len() {
            let mut part = BytesMut::from(&whole[..cut]);
            assert_eq!(
                decode_frame(&mut part, 1024).expect("ok"),
                None,
                "cut {cut}"
            );
            assert_eq!(part.len(), cut, "nothing consumed");
        }
        let mut huge = BytesMut::from(&[0x7f, 0xff, 0xff, 0xff, 0, 0][..]);
        assert!(matches!(
            decode_frame(&mut huge, 1 << 20),
            Err(CodecError::FrameTooLarge { .. })
        ));
        assert!(
            huge.capacity() < 1024,
            "no allocation sized by the length field"
        );
        for bad in [-1i32, 0, 3] {
            let mut buf = BytesMut::from(&bad.to_be_bytes()[..]);
            assert!(matches!(
                decode_frame(&mut buf, 1024),
                Err(CodecError::BadFrameSize(_))
            ));
        }
        let mut unknown = frame(9, b"");
        assert!(matches!(
            decode_frame(&mut unknown, 1024),
            Err(CodecError::UnknownFrameType(9))
        ));
    }

    fn message_bytes(id: &[u8; 16], position: Option<(u64, u32)>, body: &[u8]) -> Bytes {
        let mut buf = BytesMut::new();
        buf.put_i64(1_700_000_000_000_000_000);
        buf.put_u16(3);
        buf.put_slice(id);
        if let Some((offset, raw)) = position {
            buf.put_u64(offset);
            buf.put_u32(raw);
        }
        buf.put_slice(body);
        buf.freeze()
    }

    #[test]
    fn messages_with_binary_ids_and_positions() {
        let id = *b"\x00\x0a\x20\x0a\x20\x00\x00\x01 \n\n  \x0a\x20z";
        let plain = RawMessage::parse(message_bytes(&id, None, b"body"), false).expect("plain");
        assert_eq!(plain.id.0, id);
        assert_eq!(plain.attempts, 3);
        assert_eq!(plain.body.as_ref(), b"body");
        assert_eq!(plain.position, None);
        let traced =
            RawMessage::parse(message_bytes(&id, Some((183, 35)), b"b"), true).expect("traced");
        assert_eq!(traced.position, Some((183, 35)));
        assert_eq!(traced.body.as_ref(), b"b");
        let short = message_bytes(&id, None, b"");
        assert!(matches!(
            RawMessage::parse(short.slice(..20), false),
            Err(CodecError::Truncated { .. })
        ));
        assert!(matches!(
            RawMessage::parse(short, true),
            Err(CodecError::Truncated { .. })
        ));
    }

    #[test]
    fn trace_receipts() {
        let mut reply = b"OK".to_vec();
        reply.extend_from_slice(&[5u8; 16]);
        reply.extend_from_slice(&144u64.to_be_bytes());
        reply.extend_from_slice(&39u32.to_be_bytes());
        let receipt = TraceReceipt::parse(&reply).expect("receipt");
        assert_eq!((receipt.offset, receipt.raw_size), (144, 39));
        assert!(TraceReceipt::parse(&reply[..29]).is_err());
        assert!(TraceReceipt::parse(b"E_").is_err());
    }

    #[test]
    fn names() {
        assert!(validate_name("by-dev.rootcoord_dml_0"));
        assert!(validate_name("t#ephemeral"));
        for bad in ["", "a b", "a/b", "#ephemeral", &"x".repeat(65)] {
            assert!(!validate_name(bad), "{bad:?}");
        }
    }
}
