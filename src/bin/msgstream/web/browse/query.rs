//! What a `/api/messages` request asks for, read from its query string, and why a request gets
//! no page. Pure, so every bad input is tested without a server.

use axum::http::StatusCode;
use msgstream_facade::msgstream::mq::Timestamps;

/// Messages on a page unless `limit` says otherwise.
pub const DEFAULT_LIMIT: usize = 50;

/// The most messages one page may hold: a page is read and held in memory whole.
pub const MAX_LIMIT: usize = 200;

/// In which order a page lists messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Channel order: the start, then later messages.
    Oldest,
    /// Reverse channel order: the start, then earlier messages.
    Newest,
}

/// Where a page starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Start {
    /// The channel's first message (oldest first) or its last (newest first).
    Edge,
    /// The message with this id (its bytes), inclusive: `from`.
    At(Vec<u8>),
    /// Just past the message with this id, in the page's order: `cursor`.
    After(Vec<u8>),
    /// A timestamp: `from_time`, as the core's seek by time reads timestamps (a message's
    /// `end_ts`); given as a number, or as a date where timestamps are hybrid (see
    /// [`crate::time_arg`]). Oldest first starts at the first message, in channel order, whose timestamp
    /// is at or above it; newest first at the last message before the first one above it.
    Time(u64),
}

/// A request for one page of a channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Browse {
    /// The channel.
    pub channel: String,
    /// Where the page starts.
    pub start: Start,
    /// Its order.
    pub order: Order,
    /// How many messages it holds at most.
    pub limit: usize,
}

/// Why a request gets no page; the API answers its status with `{"error", "kind"}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Problem {
    /// A parameter is missing, unknown, repeated, malformed, or conflicts with another (400).
    BadParameter,
    /// `limit` is above [`MAX_LIMIT`] (400).
    PageTooLarge,
    /// The backend has no such channel (404).
    UnknownChannel,
    /// The start lies past the channel's messages: no message at or after it (oldest first),
    /// or at or before it (newest first) (416).
    PastEnd,
    /// The start names a message retention already dropped (410).
    Retained,
    /// The backend failed while reading (502).
    Backend,
    /// Reading the page took longer than its budget (504).
    OutOfTime,
}

impl Problem {
    /// The HTTP status answered.
    pub fn status(self) -> StatusCode {
        match self {
            Problem::BadParameter | Problem::PageTooLarge => StatusCode::BAD_REQUEST,
            Problem::UnknownChannel => StatusCode::NOT_FOUND,
            Problem::PastEnd => StatusCode::RANGE_NOT_SATISFIABLE,
            Problem::Retained => StatusCode::GONE,
            Problem::Backend => StatusCode::BAD_GATEWAY,
            Problem::OutOfTime => StatusCode::GATEWAY_TIMEOUT,
        }
    }

    /// The `kind` of the JSON error.
    pub fn name(self) -> &'static str {
        match self {
            Problem::BadParameter => "bad_parameter",
            Problem::PageTooLarge => "page_too_large",
            Problem::UnknownChannel => "unknown_channel",
            Problem::PastEnd => "past_end",
            Problem::Retained => "below_retention",
            Problem::Backend => "backend",
            Problem::OutOfTime => "out_of_time",
        }
    }
}

/// A request refused: the problem and what to change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// Its kind.
    pub problem: Problem,
    /// Said to the user.
    pub message: String,
}

impl Refused {
    /// A refusal of kind `problem`.
    pub fn new(problem: Problem, message: impl Into<String>) -> Self {
        Refused {
            problem,
            message: message.into(),
        }
    }
}

fn bad(message: String) -> Refused {
    Refused::new(Problem::BadParameter, message)
}

/// Reads the query's `(name, value)` pairs, a `from_time` date as `timestamps` says. Every
/// parameter at most once; an unknown one is refused rather than ignored, so a misspelt
/// `from` cannot silently show another page.
pub fn parse(pairs: &[(String, String)], timestamps: Timestamps) -> Result<Browse, Refused> {
    const NAMES: [&str; 6] = ["channel", "from", "from_time", "cursor", "order", "limit"];
    let mut values: [Option<&str>; 6] = [None; 6];
    for (name, value) in pairs {
        let Some(slot) = NAMES.iter().position(|n| n == name) else {
            return Err(bad(format!(
                "unknown parameter {name:?}; known are {}",
                NAMES.join(", ")
            )));
        };
        if values[slot].replace(value).is_some() {
            return Err(bad(format!("parameter {name:?} is given twice")));
        }
    }
    let [channel, from, from_time, cursor, order, limit] = values;
    let channel = match channel {
        Some(c) if !c.is_empty() => c.to_string(),
        _ => return Err(bad("parameter \"channel\" is required".to_string())),
    };
    let start = match (from, from_time, cursor) {
        (None, None, None) => Start::Edge,
        (Some(id), None, None) => Start::At(parse_id("from", id)?),
        (None, Some(ts), None) => {
            Start::Time(crate::time_arg::parse("from_time", ts, timestamps).map_err(bad)?)
        }
        (None, None, Some(id)) => Start::After(parse_id("cursor", id)?),
        _ => {
            return Err(bad(
                "give at most one of from, from_time and cursor".to_string()
            ))
        }
    };
    let order = match order {
        None | Some("oldest") => Order::Oldest,
        Some("newest") => Order::Newest,
        Some(other) => {
            return Err(bad(format!(
                "order {other:?} is neither \"oldest\" nor \"newest\""
            )))
        }
    };
    let limit = match limit {
        None => DEFAULT_LIMIT,
        Some(text) => {
            let digits = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
            match (digits, text.parse::<usize>()) {
                (true, Ok(n)) if (1..=MAX_LIMIT).contains(&n) => n,
                (false, _) | (true, Ok(0)) => {
                    return Err(bad(format!(
                        "limit {text:?} is not a positive whole number"
                    )))
                }
                _ => {
                    return Err(Refused::new(
                        Problem::PageTooLarge,
                        format!("limit {text} is above the largest page, {MAX_LIMIT} messages"),
                    ))
                }
            }
        }
    };
    Ok(Browse {
        channel,
        start,
        order,
        limit,
    })
}

/// A message id as `consume` and the page print it (`short_id`): the decimal number of an
/// 8-byte id, else the id's bytes in hex. Returns the id's bytes, which the backend then checks.
fn parse_id(name: &str, text: &str) -> Result<Vec<u8>, Refused> {
    if !text.is_empty() && text.len() <= 20 && text.bytes().all(|b| b.is_ascii_digit()) {
        if let Ok(n) = text.parse::<u64>() {
            return Ok(n.to_be_bytes().to_vec());
        }
    }
    let hex = |pair: &[u8]| {
        std::str::from_utf8(pair)
            .ok()
            .and_then(|p| u8::from_str_radix(p, 16).ok())
    };
    let bytes: Option<Vec<u8>> = (!text.is_empty() && text.len().is_multiple_of(2))
        .then(|| text.as_bytes().chunks(2).map(hex).collect())
        .flatten();
    bytes.ok_or_else(|| {
        bad(format!(
            "{name} {text:?} is not a message id (the number of an 8-byte id, else hex bytes, \
             as the page shows ids)"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(query: &[(&str, &str)]) -> Result<Browse, Refused> {
        let pairs: Vec<(String, String)> = query
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        parse(&pairs, Timestamps::Opaque)
    }

    fn problem(query: &[(&str, &str)]) -> Problem {
        ask(query).expect_err("refused").problem
    }

    #[test]
    fn a_channel_alone_is_its_first_page_oldest_first() {
        let browse = ask(&[("channel", "c")]).expect("page");
        assert_eq!(
            browse,
            Browse {
                channel: "c".into(),
                start: Start::Edge,
                order: Order::Oldest,
                limit: DEFAULT_LIMIT,
            }
        );
    }

    #[test]
    fn ids_read_as_consume_prints_them_and_times_as_numbers() {
        let at = |q| ask(&[("channel", "c"), q]).expect("page").start;
        assert_eq!(at(("from", "5")), Start::At(vec![0, 0, 0, 0, 0, 0, 0, 5]));
        assert_eq!(
            at(("from", "18446744073709551615")),
            Start::At(vec![0xff; 8])
        );
        let nsq = "0123456789abcdef0123456789abcdef";
        assert_eq!(at(("from", nsq)).clone(), Start::At(hex_of(nsq)));
        assert_eq!(at(("cursor", "ab")), Start::After(vec![0xab]));
        assert_eq!(at(("from_time", "1700")), Start::Time(1700));
        let pairs = [("channel", "c"), ("from_time", "1970-01-01T00:00:01Z")]
            .map(|(k, v)| (k.to_string(), v.to_string()));
        let hybrid = Timestamps::Hybrid { clock_slack_ms: 0 };
        assert_eq!(
            parse(&pairs, hybrid).expect("page").start,
            Start::Time(1000 << 18),
            "a date, where timestamps are hybrid"
        );
        let refused = ask(&[("channel", "c"), ("from_time", "1970-01-01T00:00:01Z")]);
        let refused = refused.expect_err("a date with opaque timestamps");
        assert!(refused.message.contains("hybrid"), "{}", refused.message);
        let newest = ask(&[("channel", "c"), ("order", "newest"), ("limit", "200")]);
        let newest = newest.expect("page");
        assert_eq!((newest.order, newest.limit), (Order::Newest, 200));
    }

    fn hex_of(text: &str) -> Vec<u8> {
        (0..text.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex"))
            .collect()
    }

    #[test]
    fn bad_input_is_refused_with_its_kind() {
        use Problem::*;
        for (query, expected) in [
            (vec![], BadParameter),
            (vec![("channel", "")], BadParameter),
            (vec![("channel", "c"), ("form", "1")], BadParameter),
            (vec![("channel", "c"), ("channel", "d")], BadParameter),
            (vec![("channel", "c"), ("from", "-1")], BadParameter),
            (vec![("channel", "c"), ("from", "abc")], BadParameter),
            (vec![("channel", "c"), ("from", "zz")], BadParameter),
            (
                vec![("channel", "c"), ("from_time", "yesterday")],
                BadParameter,
            ),
            (vec![("channel", "c"), ("from_time", "-5")], BadParameter),
            (
                vec![("channel", "c"), ("from", "1"), ("cursor", "2")],
                BadParameter,
            ),
            (
                vec![("channel", "c"), ("from", "1"), ("from_time", "2")],
                BadParameter,
            ),
            (vec![("channel", "c"), ("order", "up")], BadParameter),
            (vec![("channel", "c"), ("limit", "0")], BadParameter),
            (vec![("channel", "c"), ("limit", "ten")], BadParameter),
            (vec![("channel", "c"), ("limit", "201")], PageTooLarge),
            (vec![("channel", "c"), ("limit", "-3")], BadParameter),
            (
                vec![("channel", "c"), ("limit", "99999999999999999999999")],
                PageTooLarge,
            ),
        ] {
            assert_eq!(problem(&query), expected, "{query:?}");
        }
        let refused = ask(&[("channel", "c"), ("limit", "1000000")]).expect_err("too large");
        assert!(refused.message.contains("200"), "{refused:?}");
        assert_eq!(Problem::PageTooLarge.status(), StatusCode::BAD_REQUEST);
        assert_eq!(Problem::PastEnd.status(), StatusCode::RANGE_NOT_SATISFIABLE);
    }
}
