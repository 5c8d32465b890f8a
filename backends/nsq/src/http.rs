//! A minimal HTTP/1.1 client for nsqlookupd and nsqd's HTTP API: one request per connection
//! (`Connection: close`), bodies by `Content-Length`, chunked, or end of stream; responses are
//! bounded so a misbehaving peer cannot make the client allocate without limit.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::error::{Error, Result};

/// Largest response accepted.
const MAX_RESPONSE: u64 = 16 * 1024 * 1024;

/// What nsqlookupd wants to see to answer unwrapped JSON.
pub const ACCEPT_NSQ: &str = "application/vnd.nsq; version=1.0";

/// Percent-encodes a query value: NSQ names are `[.a-zA-Z0-9_-]` plus `#ephemeral`, and `#`
/// would otherwise end the URL.
pub fn query_value(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'.' | b'_' | b'-' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Sends one request to `addr` (`host:port`) and returns status and body.
pub async fn request(
    addr: &str,
    method: &str,
    target: &str,
    body: &[u8],
    timeout: Duration,
) -> Result<(u16, Vec<u8>)> {
    tokio::time::timeout(timeout, exchange(addr, method, target, body))
        .await
        .map_err(|_| Error::Timeout {
            addr: addr.to_string(),
            what: "HTTP request",
            after: timeout,
        })?
}

async fn exchange(addr: &str, method: &str, target: &str, body: &[u8]) -> Result<(u16, Vec<u8>)> {
    let io = |source| Error::Io {
        addr: addr.to_string(),
        source,
    };
    let mut stream = TcpStream::connect(addr).await.map_err(io)?;
    let head = format!(
        "{method} {target} HTTP/1.1\r\nHost: {addr}\r\nAccept: {ACCEPT_NSQ}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.map_err(io)?;
    stream.write_all(body).await.map_err(io)?;
    let mut raw = Vec::new();
    (&mut stream)
        .take(MAX_RESPONSE)
        .read_to_end(&mut raw)
        .await
        .map_err(io)?;
    parse(addr, &raw)
}

fn protocol(addr: &str, what: &str) -> Error {
    Error::Protocol {
        addr: addr.to_string(),
        what: what.to_string(),
    }
}

fn parse(addr: &str, raw: &[u8]) -> Result<(u16, Vec<u8>)> {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| protocol(addr, "HTTP response without a header end"))?;
    let head = String::from_utf8_lossy(&raw[..end]);
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| protocol(addr, "HTTP status line"))?;
    let mut length = None;
    let mut chunked = false;
    for line in lines {
        if let Some((name, value)) = line.split_once(':') {
            let name = name.trim().to_ascii_lowercase();
            if name == "content-length" {
                length = value.trim().parse::<usize>().ok();
            } else if name == "transfer-encoding" && value.trim().eq_ignore_ascii_case("chunked") {
                chunked = true;
            }
        }
    }
    let rest = &raw[end + 4..];
    let body = if chunked {
        dechunk(rest).ok_or_else(|| protocol(addr, "bad chunked body"))?
    } else {
        let n = length.unwrap_or(rest.len());
        rest.get(..n)
            .ok_or_else(|| protocol(addr, "HTTP body shorter than Content-Length"))?
            .to_vec()
    };
    Ok((status, body))
}

fn dechunk(mut data: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = data.windows(2).position(|w| w == b"\r\n")?;
        let size_text = std::str::from_utf8(&data[..line_end]).ok()?;
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        data = &data[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(data.get(..size)?);
        data = data.get(size + 2..)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_values_are_escaped() {
        assert_eq!(query_value("c#ephemeral"), "c%23ephemeral");
        assert_eq!(query_value("a.b_c-1"), "a.b_c-1");
    }

    #[test]
    fn bodies_by_length_chunks_and_eof() {
        let plain = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nOKxx";
        assert_eq!(parse("a", plain).expect("plain"), (200, b"OK".to_vec()));
        let chunked = b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
        assert_eq!(
            parse("a", chunked).expect("chunked"),
            (404, b"abcde".to_vec())
        );
        let eof = b"HTTP/1.0 200 OK\r\n\r\nall";
        assert_eq!(parse("a", eof).expect("eof"), (200, b"all".to_vec()));
        assert!(parse("a", b"HTTP/1.1 200").is_err());
        assert!(parse("a", b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nab").is_err());
    }
}
