//! Which requests the admin server answers at all.
//!
//! A web page on another site can make a browser send requests to a loopback address, and with
//! DNS rebinding (the page's own name made to resolve to 127.0.0.1) the browser even treats the
//! answers as the page's own. What such a request cannot forge is its `Host`: it names the
//! attacker's site. So every request must name the server by one of its own host names (the
//! listen address, `localhost` on loopback, and what `--allow-host` adds), and a write must also
//! come from the page itself: a same-origin `Origin` and a JSON body, which a cross-site form
//! cannot send without the browser asking first (and this server never says yes).
//!
//! The decision is a pure function of the request's method and headers, tested without a
//! server; [`middleware`] applies it to every route.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

/// The host names the server answers to, on its port.
#[derive(Debug, Clone)]
pub struct Guard {
    port: u16,
    /// The listen IP; an unspecified one (`0.0.0.0`) accepts every IP literal, since a request
    /// naming an address directly cannot be a rebound name.
    ip: IpAddr,
    /// Lowercase names without a trailing dot.
    names: Vec<String>,
}

/// Why a request is refused: the status and a message saying what to change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// 403 for a foreign host or origin, 415 for a write that is not JSON.
    pub status: StatusCode,
    /// What was wrong.
    pub message: String,
}

impl Guard {
    /// The guard of a server bound to `listen`, also answering to `extra` names.
    pub fn new(listen: SocketAddr, extra: &[String]) -> Guard {
        let ip = listen.ip();
        let mut names: Vec<String> = extra.iter().map(|name| normal(name)).collect();
        if ip.is_loopback() || ip.is_unspecified() {
            names.push("localhost".to_string());
        }
        Guard {
            port: listen.port(),
            ip,
            names,
        }
    }

    /// Refuses a request whose host is not the server's own, and a write (any method but GET
    /// and HEAD) that is not JSON from a same-origin page. `host` is the request's authority:
    /// the `Host` header, or the request target's when it names one.
    pub fn check(
        &self,
        method: &Method,
        host: Option<&str>,
        content_type: Option<&str>,
        origin: Option<&str>,
    ) -> Result<(), Refusal> {
        let forbidden = |message: String| Refusal {
            status: StatusCode::FORBIDDEN,
            message,
        };
        let host = host.ok_or_else(|| forbidden("the request has no Host".to_string()))?;
        if !self.allows(host) {
            return Err(forbidden(format!(
                "Host {host:?} is not a name of this server: open it by its listen address, or \
                 start msgstream admin with --allow-host NAME"
            )));
        }
        if method == Method::GET || method == Method::HEAD {
            return Ok(());
        }
        let json = content_type.is_some_and(|value| {
            let media = value.split(';').next().unwrap_or_default().trim();
            media.eq_ignore_ascii_case("application/json")
        });
        if !json {
            return Err(Refusal {
                status: StatusCode::UNSUPPORTED_MEDIA_TYPE,
                message: "a write must have Content-Type: application/json".to_string(),
            });
        }
        let own = format!("http://{host}");
        match origin {
            Some(origin) if origin.eq_ignore_ascii_case(&own) => Ok(()),
            Some(origin) => Err(forbidden(format!(
                "Origin {origin:?} is not this page ({own}): writes come from the page itself"
            ))),
            None => Err(forbidden(format!(
                "a write needs the page's Origin ({own}); a script sends it as a header"
            ))),
        }
    }

    fn allows(&self, host: &str) -> bool {
        let Some((name, port)) = split_host(host) else {
            return false;
        };
        if port.unwrap_or(80) != self.port {
            return false;
        }
        match name.parse::<IpAddr>() {
            Ok(ip) => self.ip.is_unspecified() || ip == self.ip,
            Err(_) => self.names.contains(&normal(name)),
        }
    }
}

/// A host name compared as DNS does: without case, without the root's trailing dot.
fn normal(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// `name[:port]` or `[ipv6][:port]`; `None` when the port is not a number.
fn split_host(host: &str) -> Option<(&str, Option<u16>)> {
    let (name, port) = if let Some(rest) = host.strip_prefix('[') {
        let (ip, after) = rest.split_once(']')?;
        let port = match after {
            "" => None,
            after => Some(after.strip_prefix(':')?),
        };
        (ip, port)
    } else {
        match host.rsplit_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (host, None),
        }
    };
    let port = match port {
        Some(port) => Some(port.parse().ok()?),
        None => None,
    };
    (!name.is_empty()).then_some((name, port))
}

/// Applies the guard to every request before its route.
pub async fn middleware(State(guard): State<Arc<Guard>>, request: Request, next: Next) -> Response {
    match check_request(&guard, &request) {
        Ok(()) => next.run(request).await,
        Err(refusal) => (refusal.status, Json(json!({ "error": refusal.message }))).into_response(),
    }
}

/// [`Guard::check`] of a request's method and headers.
fn check_request(guard: &Guard, request: &Request) -> Result<(), Refusal> {
    let text = |name| {
        request
            .headers()
            .get(name)
            .and_then(|value| value.to_str().ok())
    };
    let host = request
        .uri()
        .authority()
        .map(|authority| authority.as_str())
        .or_else(|| text(header::HOST));
    guard.check(
        request.method(),
        host,
        text(header::CONTENT_TYPE),
        text(header::ORIGIN),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(listen: &str, extra: &[&str]) -> Guard {
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        Guard::new(listen.parse().expect("address"), &extra)
    }

    fn read(guard: &Guard, host: &str) -> Result<(), Refusal> {
        guard.check(&Method::GET, Some(host), None, None)
    }

    #[test]
    fn hosts_are_the_listen_address_localhost_on_loopback_and_allowed_names() {
        let local = guard("127.0.0.1:7777", &["Admin.Example"]);
        for ok in [
            "127.0.0.1:7777",
            "localhost:7777",
            "LOCALHOST.:7777",
            "admin.example:7777",
        ] {
            assert_eq!(read(&local, ok), Ok(()), "{ok}");
        }
        for refused in [
            "evil.example:7777",
            "evil.example",
            "127.0.0.1:8080",
            "127.0.0.1",
            "127.0.0.2:7777",
            "localhost:x",
            ":7777",
            "[::1]:7777",
        ] {
            let refusal = read(&local, refused).expect_err(refused);
            assert_eq!(refusal.status, StatusCode::FORBIDDEN, "{refused}");
            assert!(refusal.message.contains("--allow-host"), "{refusal:?}");
        }
        let none = local.check(&Method::GET, None, None, None);
        assert_eq!(none.map_err(|r| r.status), Err(StatusCode::FORBIDDEN));

        let v6 = guard("[::1]:80", &[]);
        assert_eq!(read(&v6, "[::1]"), Ok(()));
        assert_eq!(read(&v6, "localhost"), Ok(()));
        let exposed = guard("0.0.0.0:7777", &[]);
        assert_eq!(read(&exposed, "192.0.2.7:7777"), Ok(()));
        assert!(read(&exposed, "rebound.example:7777").is_err());
        let lan = guard("192.0.2.7:7777", &[]);
        assert!(read(&lan, "localhost:7777").is_err());
    }

    #[test]
    fn writes_need_json_from_the_page_itself() {
        let local = guard("127.0.0.1:7777", &[]);
        let host = Some("127.0.0.1:7777");
        let write = |content_type, origin| local.check(&Method::POST, host, content_type, origin);
        let json = Some("application/json; charset=utf-8");
        assert_eq!(write(json, Some("http://127.0.0.1:7777")), Ok(()));
        let status = |result: Result<(), Refusal>| result.map_err(|r| r.status);
        assert_eq!(
            status(write(Some("text/plain"), Some("http://127.0.0.1:7777"))),
            Err(StatusCode::UNSUPPORTED_MEDIA_TYPE)
        );
        assert_eq!(
            status(write(None, Some("http://127.0.0.1:7777"))),
            Err(StatusCode::UNSUPPORTED_MEDIA_TYPE)
        );
        for origin in [None, Some("http://evil.example"), Some("null")] {
            assert_eq!(
                status(write(json, origin)),
                Err(StatusCode::FORBIDDEN),
                "{origin:?}"
            );
        }
        let foreign = local.check(
            &Method::POST,
            Some("evil.example"),
            json,
            Some("http://evil.example"),
        );
        assert_eq!(status(foreign), Err(StatusCode::FORBIDDEN));
    }
}
