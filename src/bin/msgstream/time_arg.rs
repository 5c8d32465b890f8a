//! A time given by a user (`consume --from-time`, the admin page's `from_time`): a message
//! timestamp as a number, or a date when timestamps are hybrid.
//!
//! A number is taken as it is: the streams' timestamps are opaque `u64`s unless the
//! configuration says otherwise. A date (RFC 3339, `2026-12-04T17:00:00Z`, an offset instead of
//! `Z` allowed, fractions of a second down to the millisecond) means a point in wall-clock
//! time, which only Milvus hybrid timestamps carry: with `[stream] timestamps = "hybrid"` it is
//! converted to the smallest hybrid timestamp of that millisecond (`ms << 18`), so reading
//! starts with everything stamped at or after it; otherwise it is refused, naming the key.

use msgstream_facade::msgstream::mq::time::hybrid_from_unix_ms;
use msgstream_facade::msgstream::mq::Timestamps;

/// The timestamp `text` (given as `name`, which messages name) stands for, or why it stands
/// for none.
pub fn parse(name: &str, text: &str, timestamps: Timestamps) -> Result<u64, String> {
    let text = text.trim();
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return text
            .parse()
            .map_err(|_| format!("{name} {text}: larger than a 64-bit timestamp"));
    }
    let unix_ms = rfc3339_unix_ms(text).map_err(|why| {
        format!("{name} {text:?}: neither a timestamp (a number) nor a date like 2026-12-04T17:00:00Z ({why})")
    })?;
    match timestamps {
        Timestamps::Hybrid { .. } => Ok(hybrid_from_unix_ms(unix_ms)),
        Timestamps::Opaque => Err(format!(
            "{name} {text:?}: a date needs hybrid timestamps ([stream] timestamps = \"hybrid\" in the config); timestamps here are opaque numbers, give one"
        )),
    }
}

/// Unix milliseconds of an RFC 3339 date-time at or after 1970.
fn rfc3339_unix_ms(text: &str) -> Result<u64, String> {
    let bytes = text.as_bytes();
    let number = |range: std::ops::Range<usize>| -> Result<i64, String> {
        let part = text.get(range.clone()).ok_or("too short")?;
        if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!("{part:?} is not a number"));
        }
        part.parse()
            .map_err(|_| format!("{part:?} is not a number"))
    };
    let separator = |at: usize, allowed: &[u8]| match bytes.get(at) {
        Some(b) if allowed.contains(b) => Ok(()),
        _ => Err(format!(
            "expected one of {:?} at {at}",
            String::from_utf8_lossy(allowed)
        )),
    };
    separator(4, b"-")?;
    separator(7, b"-")?;
    separator(10, b"Tt ")?;
    separator(13, b":")?;
    separator(16, b":")?;
    let (year, month, day) = (number(0..4)?, number(5..7)?, number(8..10)?);
    let (hour, minute, second) = (number(11..13)?, number(14..16)?, number(17..19)?);
    let mut at = 19;
    let mut millis = 0;
    if bytes.get(at) == Some(&b'.') {
        let digits = bytes[at + 1..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        if digits == 0 {
            return Err("no digits after the decimal point".into());
        }
        let fraction = &text[at + 1..at + 1 + digits.min(3)];
        millis = number(at + 1..at + 1 + fraction.len())? * 10i64.pow(3 - fraction.len() as u32);
        at += 1 + digits;
    }
    let offset_minutes = match &text[at..] {
        "Z" | "z" => 0,
        zone if zone.len() == 6 && matches!(zone.as_bytes()[0], b'+' | b'-') => {
            separator(at + 3, b":")?;
            let minutes = number(at + 1..at + 3)? * 60 + number(at + 4..at + 6)?;
            if zone.starts_with('-') {
                -minutes
            } else {
                minutes
            }
        }
        other => return Err(format!("the zone {other:?} is neither Z nor +hh:mm")),
    };
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return Err(format!("no day {year:04}-{month:02}-{day:02}"));
    }
    if hour > 23 || minute > 59 || second > 60 {
        return Err(format!("no time {hour:02}:{minute:02}:{second:02}"));
    }
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset_minutes * 60;
    u64::try_from(seconds * 1000 + millis).map_err(|_| "before 1970".to_string())
}

fn days_in_month(year: i64, month: i64) -> i64 {
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: Timestamps = Timestamps::Hybrid { clock_slack_ms: 0 };

    #[test]
    fn numbers_are_timestamps_as_they_are() {
        assert_eq!(parse("--from-time", "42", Timestamps::Opaque), Ok(42));
        assert_eq!(
            parse("--from-time", "18446744073709551615", HYBRID),
            Ok(u64::MAX)
        );
        assert!(parse("--from-time", "18446744073709551616", HYBRID).is_err());
    }

    #[test]
    fn dates_become_hybrid_timestamps() {
        // `date -d 2026-12-04T17:00:00Z +%s` = 1796403600.
        let ms = 1_796_403_600_000u64;
        assert_eq!(
            parse("--from-time", "2026-12-04T17:00:00Z", HYBRID),
            Ok(ms << 18)
        );
        assert_eq!(
            parse("--from-time", "2026-12-04T18:30:00.25+01:30", HYBRID),
            Ok((ms + 250) << 18)
        );
        assert_eq!(
            parse("--from-time", "2026-12-04 16:00:00.1234-01:00", HYBRID),
            Ok((ms + 123) << 18)
        );
        assert_eq!(parse("--from-time", "1970-01-01T00:00:00Z", HYBRID), Ok(0));
        assert_eq!(
            parse("--from-time", "2024-02-29T00:00:00Z", HYBRID),
            Ok(1_709_164_800_000 << 18)
        );
    }

    #[test]
    fn bad_dates_and_opaque_timestamps_say_why() {
        let opaque =
            parse("--from-time", "2026-12-04T17:00:00Z", Timestamps::Opaque).expect_err("opaque");
        assert!(
            opaque.contains("[stream] timestamps = \"hybrid\""),
            "{opaque}"
        );
        for bad in [
            "",
            "yesterday",
            "2026-13-01T00:00:00Z",
            "2025-02-29T00:00:00Z",
            "2026-12-04T24:00:00Z",
            "2026-12-04T17:00:00",
            "2026-12-04T17:00:00.Z",
            "2026-12-04T17:00:00+0100",
            "1969-12-31T23:59:59Z",
            "2026-12-04T17:00:00Zjunk",
        ] {
            assert!(
                parse("--from-time", bad, HYBRID).is_err(),
                "{bad:?} accepted"
            );
        }
    }
}
