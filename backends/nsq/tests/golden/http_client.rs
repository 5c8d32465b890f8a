//! A minimal HTTP/1.1 client for the replay: one request per connection
//! (`Connection: close`), the recorded method, path, headers and body sent as they are; the
//! answer read to the end (`Content-Length` or the server closing).

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A response as the replay compares it.
#[derive(Debug)]
pub struct Answer {
    /// Status code.
    pub status: u16,
    /// Headers, names as sent.
    pub headers: Vec<(String, String)>,
    /// Body.
    pub body: Vec<u8>,
}

impl Answer {
    /// The first header of that name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        header(&self.headers, name)
    }
}

/// The first header of that name in `headers` (case-insensitive).
pub fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// Sends one request and reads its answer.
pub async fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> std::io::Result<Answer> {
    let mut stream = TcpStream::connect(addr).await?;
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if !body.is_empty() || method == "POST" || method == "PUT" {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body).await?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await?;
    parse(&raw).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// Parses a whole response (head and `Content-Length` body).
pub fn parse(raw: &[u8]) -> Result<Answer, String> {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("response without a complete head")?;
    let head = String::from_utf8_lossy(&raw[..end]);
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or("bad status line")?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    if header(&headers, "transfer-encoding").is_some() {
        return Err("chunked responses are not supported".into());
    }
    let mut body = raw[end + 4..].to_vec();
    if let Some(len) = header(&headers, "content-length").and_then(|l| l.parse::<usize>().ok()) {
        if body.len() < len {
            return Err(format!("body of {} bytes, announced {len}", body.len()));
        }
        body.truncate(len);
    }
    Ok(Answer {
        status,
        headers,
        body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_response_parses_into_status_headers_and_body() {
        let a = parse(b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}").expect("valid");
        assert_eq!(a.status, 404);
        assert_eq!(a.header("content-type"), Some("application/json"));
        assert_eq!(a.body, b"{}");
        assert!(parse(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab").is_err());
        assert!(parse(b"HTTP/1.1 200 OK\r\n").is_err());
    }
}
