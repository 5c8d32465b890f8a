//! A minimal HTTP/1.1 server: one request per connection, `Content-Length` bodies only.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Largest request head.
const MAX_HEAD: usize = 16 * 1024;

/// A parsed request.
pub(crate) struct Request {
    pub method: String,
    pub path: String,
    pub query: HashMap<String, String>,
    pub accept: String,
    pub body: Vec<u8>,
}

/// A response.
pub(crate) struct Response {
    pub status: u16,
    pub json: bool,
    pub body: Vec<u8>,
}

impl Response {
    pub(crate) fn text(body: &str) -> Response {
        Response {
            status: 200,
            json: false,
            body: body.as_bytes().to_vec(),
        }
    }

    pub(crate) fn json(value: &serde_json::Value) -> Response {
        Response {
            status: 200,
            json: true,
            body: value.to_string().into_bytes(),
        }
    }

    /// nsqd's error shape: `{"message":"CODE"}`.
    pub(crate) fn error(status: u16, code: &str) -> Response {
        Response {
            status,
            json: true,
            body: serde_json::json!({ "message": code })
                .to_string()
                .into_bytes(),
        }
    }
}

impl Request {
    /// Whether the client asked for bare JSON (`Accept: application/vnd.nsq; version=1.0`).
    pub(crate) fn wants_bare(&self) -> bool {
        self.accept.contains("application/vnd.nsq")
    }
}

/// The Youzan servers' envelope, in their field order.
#[derive(serde::Serialize)]
pub(crate) struct Wrapped<T: serde::Serialize> {
    pub status_code: u16,
    pub status_txt: String,
    pub data: T,
}

/// A Youzan success: `data` wrapped, or bare when the client asked for bare JSON.
pub(crate) fn wrapped_ok<T: serde::Serialize>(req: &Request, data: T) -> Response {
    let body = if req.wants_bare() {
        serde_json::to_vec(&data)
    } else {
        serde_json::to_vec(&Wrapped {
            status_code: 200,
            status_txt: "OK".into(),
            data,
        })
    };
    Response {
        status: 200,
        json: true,
        body: body.unwrap_or_default(),
    }
}

/// An error of a Youzan endpoint that wraps its replies: HTTP 500 with
/// `{"status_code":500,"status_txt":message,"data":null}`, or, when the client asked for bare
/// JSON, the real status with `{"message":message}`.
pub(crate) fn wrapped_error(req: &Request, status: u16, message: &str) -> Response {
    if req.wants_bare() {
        return Response::error(status, message);
    }
    let body = serde_json::to_vec(&Wrapped {
        status_code: 500,
        status_txt: message.to_string(),
        data: (),
    });
    Response {
        status: 500,
        json: true,
        body: body.unwrap_or_default(),
    }
}

/// Something that answers requests.
pub(crate) trait Handler: Send + Sync + 'static {
    fn handle(&self, request: Request) -> Response;
    /// Largest accepted body.
    fn max_body(&self) -> usize;
}

pub(crate) async fn serve(listener: TcpListener, handler: Arc<dyn Handler>) {
    while let Ok((stream, _)) = listener.accept().await {
        let handler = handler.clone();
        tokio::spawn(async move {
            if let Err(e) = one(stream, handler).await {
                tracing::debug!("http connection: {e}");
            }
        });
    }
}

async fn one(mut stream: TcpStream, handler: Arc<dyn Handler>) -> std::io::Result<()> {
    let mut buf = Vec::new();
    let head_end = loop {
        let mut chunk = [0u8; 4096];
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos;
        }
        if buf.len() > MAX_HEAD {
            return respond(&mut stream, Response::error(431, "HEADER_TOO_LARGE")).await;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or_default().split(' ');
    let method = first.next().unwrap_or_default().to_string();
    let target = first.next().unwrap_or_default().to_string();
    let mut content_length = 0usize;
    let mut accept = String::new();
    for line in lines {
        if let Some((name, value)) = line.split_once(':') {
            match name.trim().to_ascii_lowercase().as_str() {
                "content-length" => content_length = value.trim().parse().unwrap_or(0),
                "accept" => accept = value.trim().to_string(),
                _ => {}
            }
        }
    }
    if content_length > handler.max_body() {
        return respond(&mut stream, Response::error(413, "MSG_TOO_BIG")).await;
    }
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < content_length {
        let mut chunk = [0u8; 8192];
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        body.extend_from_slice(&chunk[..n]);
    }
    body.truncate(content_length);
    let (path, query) = target.split_once('?').unwrap_or((target.as_str(), ""));
    let request = Request {
        method,
        path: path.to_string(),
        query: parse_query(query),
        accept,
        body,
    };
    let response = handler.handle(request);
    respond(&mut stream, response).await
}

fn parse_query(query: &str) -> HashMap<String, String> {
    query
        .split('&')
        .filter_map(|pair| pair.split_once('=').or(Some((pair, ""))))
        .filter(|(k, _)| !k.is_empty())
        .map(|(k, v)| (k.to_string(), percent_decode(v)))
        .collect()
}

/// Decodes `%XX` escapes (and `+` as a space, as Go's query parser does).
fn percent_decode(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 3;
                        continue;
                    }
                    None => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

async fn respond(stream: &mut TcpStream, response: Response) -> std::io::Result<()> {
    let reason = match response.status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        500 => "Internal Server Error",
        _ => "Error",
    };
    let kind = if response.json {
        "application/json; charset=utf-8"
    } else {
        "text/plain; charset=utf-8"
    };
    let head = format!(
        "HTTP/1.1 {} {reason}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        response.status,
        response.body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(&response.body).await?;
    stream.shutdown().await
}
