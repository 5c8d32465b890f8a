//! `msgstream admin` against hostile clients, over raw TCP: a request naming another host
//! (DNS rebinding) or a write from another origin is refused even with
//! `--allow-admin-writes`; a client trickling its headers, or connecting and saying nothing, is
//! cut off within the timeouts; connections over `--max-connections` are answered 503.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::cli_admin::{http, json, start_admin, Admin};

/// How long a test waits for the server to close a connection: well above the 1 s timeouts the
/// tests set, far below the defaults they replace (10 s and 60 s) or no timeout at all.
const CLOSED_WITHIN: Duration = Duration::from_secs(8);

/// `msgstream admin` over the memory backend with `extra` options.
fn start(extra: &[&str]) -> Admin {
    let mut args = vec!["--backend", "memory"];
    args.extend_from_slice(extra);
    start_admin("unused", &args)
}

/// Sends `request` as is and returns the status code of the answer (the connection closed).
fn send(address: &str, request: &str) -> u16 {
    let mut stream = TcpStream::connect(address).expect("connect");
    stream
        .set_read_timeout(Some(CLOSED_WITHIN))
        .expect("timeout");
    stream.write_all(request.as_bytes()).expect("request");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("response");
    status(&response)
}

fn status(response: &str) -> u16 {
    response
        .get(9..12)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not a response: {response:?}"))
}

/// A delete of channel `a` with these Host, Origin and Content-Type lines.
fn delete(host: &str, origin: &str, content_type: &str) -> String {
    let body = r#"{"channel":"a","confirm":"a"}"#;
    format!(
        "POST /api/delete HTTP/1.1\r\nHost: {host}\r\n{origin}{content_type}\
         Connection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// Waits for the server to close `stream`; returns how long that took.
fn closed_by_server(mut stream: TcpStream) -> Duration {
    let started = Instant::now();
    stream
        .set_read_timeout(Some(CLOSED_WITHIN))
        .expect("timeout");
    let mut rest = Vec::new();
    match stream.read_to_end(&mut rest) {
        // A reset is a close too: the client was still writing when the server hung up.
        Ok(_) => started.elapsed(),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => started.elapsed(),
        Err(e) => panic!("still open after {:?}: {e}", started.elapsed()),
    }
}

#[test]
fn foreign_hosts_and_cross_site_writes_are_refused() {
    let admin = start(&["--allow-admin-writes", "--allow-host", "admin.example"]);
    let own = admin.address.as_str();
    let port = own.rsplit_once(':').map(|(_, p)| p).expect("port");
    let get = |host: &str| {
        send(
            own,
            &format!("GET /api/channels HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"),
        )
    };
    assert_eq!(get("evil.example"), 403);
    assert_eq!(get(&format!("evil.example:{port}")), 403);
    assert_eq!(get(&format!("localhost:{port}")), 200);
    assert_eq!(get(&format!("admin.example:{port}")), 200);
    assert_eq!(
        send(
            own,
            "GET http://evil.example/api/channels HTTP/1.1\r\nHost: 127.0.0.1\r\n\
             Connection: close\r\n\r\n"
        ),
        403,
        "the target's authority counts, not only Host"
    );

    let json_type = "Content-Type: application/json\r\n";
    let rebound = delete(
        &format!("evil.example:{port}"),
        &format!("Origin: http://evil.example:{port}\r\n"),
        json_type,
    );
    assert_eq!(send(own, &rebound), 403, "DNS rebinding");
    let page = format!("Origin: http://{own}\r\n");
    let cross_site = delete(own, "Origin: http://evil.example\r\n", json_type);
    assert_eq!(send(own, &cross_site), 403, "another origin");
    assert_eq!(send(own, &delete(own, "", json_type)), 403, "no origin");
    let form = delete(
        own,
        &page,
        "Content-Type: application/x-www-form-urlencoded\r\n",
    );
    assert_eq!(send(own, &form), 415, "not JSON");

    let (status, body) = http(
        own,
        "POST",
        "/api/delete",
        r#"{"channel":"a","confirm":"a"}"#,
    );
    assert_eq!(status, 200, "the page's own delete: {body}");
    assert!(json(&body)["done"].is_string(), "{body}");
}

#[test]
fn slow_and_idle_connections_are_closed() {
    let admin = start(&["--header-timeout", "1", "--idle-timeout", "30"]);
    let mut slow = TcpStream::connect(&admin.address).expect("connect");
    let host = format!("GET / HTTP/1.1\r\nHost: {}\r\n", admin.address);
    slow.write_all(host.as_bytes()).expect("request line");
    // A header line every 100 ms, never the blank line that ends them.
    let mut trickle = slow.try_clone().expect("clone");
    std::thread::spawn(move || {
        for i in 0.. {
            std::thread::sleep(Duration::from_millis(100));
            if write!(trickle, "X-Slow-{i}: 1\r\n").is_err() {
                break;
            }
        }
    });
    let took = closed_by_server(slow);
    assert!(took < CLOSED_WITHIN, "slow headers open for {took:?}");
    drop(admin);

    let admin = start(&["--header-timeout", "30", "--idle-timeout", "1"]);
    let silent = TcpStream::connect(&admin.address).expect("connect");
    let took = closed_by_server(silent);
    assert!(
        took < CLOSED_WITHIN,
        "a silent connection open for {took:?}"
    );
    // Idle after an answer too (keep-alive).
    let mut kept = TcpStream::connect(&admin.address).expect("connect");
    write!(
        kept,
        "GET /api/overview HTTP/1.1\r\nHost: {}\r\n\r\n",
        admin.address
    )
    .expect("request");
    let took = closed_by_server(kept);
    assert!(
        took < CLOSED_WITHIN,
        "a kept-alive connection open for {took:?}"
    );
}

#[test]
fn connections_over_the_bound_are_answered_503() {
    let mut admin = start(&["--max-connections", "2", "--idle-timeout", "30"]);
    let address = admin.address.as_str();
    let mut first = TcpStream::connect(address).expect("connect");
    let _second = TcpStream::connect(address).expect("connect");
    let get = format!("GET /api/overview HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    assert_eq!(send(address, &get), 503, "a third connection");
    // The first one is still served, and its slot is free again once it closes.
    first.write_all(get.as_bytes()).expect("request");
    let mut response = String::new();
    first.read_to_string(&mut response).expect("response");
    assert_eq!(status(&response), 200, "{response}");
    assert_eq!(send(address, &get), 200, "a slot freed");
    // A connection left open does not hold up a stop.
    let status = admin.terminate();
    assert_eq!(status.code(), Some(0), "SIGTERM with a connection open");
}
