//! `msgstream admin` (its JSON API, `/metrics`, read-only by default) and `consume --stats`,
//! run as a user runs them, on rocksmq with a temporary database. The page itself is checked
//! in a browser by `scripts/admin-browser-test.sh`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};

use serde_json::Value;

use crate::cli::{command, msgstream, msgstream_ok, stderr, TempDb};

/// A running `msgstream admin`, killed when dropped.
pub(crate) struct Admin {
    child: Child,
    pub(crate) address: String,
}

impl Admin {
    /// Sends SIGTERM and waits for the exit, at most 20 s (then kills it and fails).
    pub(crate) fn terminate(&mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill");
        assert!(sent.success(), "kill -TERM");
        let child = &mut self.child;
        std::thread::scope(|scope| {
            let (tx, rx) = std::sync::mpsc::channel();
            scope.spawn(move || tx.send(child.wait()));
            match rx.recv_timeout(std::time::Duration::from_secs(20)) {
                Ok(status) => status.expect("wait"),
                Err(_) => {
                    let _ = std::process::Command::new("kill")
                        .args(["-KILL", &pid])
                        .status();
                    panic!("admin still running 20 s after SIGTERM");
                }
            }
        })
    }
}

impl Drop for Admin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn start_admin(db: &str, extra: &[&str]) -> Admin {
    start_admin_with(
        &[("MSGSTREAM_ROCKSMQ__PATH", std::ffi::OsStr::new(db))],
        extra,
    )
}

/// `msgstream admin` with this environment (a backend's configuration) and `extra` options.
pub(crate) fn start_admin_with(env: &[(&str, &std::ffi::OsStr)], extra: &[&str]) -> Admin {
    let mut args = vec!["admin", "--listen", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    let mut child = command(&args, env)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn admin");
    // The address line comes after the first look at the backend: from then on the API
    // answers with what the database holds.
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("address line");
    let address = line
        .strip_prefix("admin page on http://")
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_string();
    assert!(
        line.contains("(read-only)") != extra.contains(&"--allow-admin-writes"),
        "{line}"
    );
    Admin { child, address }
}

/// One HTTP/1.1 request as the page sends it (its own Host and Origin); returns the status
/// code and body.
pub(crate) fn http(address: &str, method: &str, path: &str, body: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(address).expect("connect");
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nOrigin: http://{address}\r\n\
         Connection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("request");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("response");
    let status = response
        .get(9..12)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{response}"));
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

pub(crate) fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[test]
fn admin_api_shows_channels_lag_and_the_watermark_holder() {
    if !cfg!(feature = "rocksmq") {
        return;
    }
    let temp = TempDb::new();
    let db = temp.path.clone();
    let run = |args: &[&str]| {
        msgstream_ok(args, &temp.env());
    };
    run(&[
        "produce",
        "--channels",
        "a,b",
        "--count",
        "20",
        "--tick-every",
        "10",
    ]);
    run(&[
        "produce",
        "--channels",
        "a",
        "--count",
        "5",
        "--tick-every",
        "0",
        "--start-ts",
        "50",
    ]);
    run(&[
        "consume",
        "--channels",
        "a",
        "--subscription",
        "g",
        "--max-packs",
        "4",
    ]);

    let admin = start_admin(&db, &[]);
    let (status, body) = http(&admin.address, "GET", "/api/channels", "");
    assert_eq!(status, 200, "{body}");
    let channels = json(&body);
    let names: Vec<&str> = channels["channels"]
        .as_array()
        .expect("channels")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(names, ["a", "b"], "{body}");
    // a: 10 inserts, 2 ticks and the final one (23), then 5 inserts and a tick (55): 19
    // messages, of which g read 4.
    let sub = &channels["channels"][0]["subscriptions"][0];
    assert_eq!(
        (sub["name"].as_str(), sub["lag"]["value"].as_u64()),
        (Some("g"), Some(15)),
        "{body}"
    );
    assert_eq!(channels["channels"][0]["last_tick"], 55, "{body}");

    let (_, body) = http(&admin.address, "GET", "/api/timetick", "");
    let tt = json(&body);
    assert_eq!(
        (tt["holder"].as_str(), tt["watermark"].as_u64()),
        (Some("b"), Some(23)),
        "{body}"
    );
    assert_eq!(tt["lag"], 32, "{body}");
    let (_, body) = http(&admin.address, "GET", "/api/timetick?channels=a", "");
    assert_eq!(json(&body)["holder"], "a", "{body}");

    let (status, body) = http(&admin.address, "GET", "/metrics", "");
    assert_eq!(status, 200);
    assert!(body.starts_with("# HELP"), "{body}");
    assert!(
        body.contains("msgstream_admin_subscription_lag{channel=\"a\",subscription=\"g\"} 15\n"),
        "{body}"
    );
    assert!(
        body.contains("msgstream_admin_last_tick{channel=\"b\"} 23\n"),
        "{body}"
    );
    let (status, body) = http(&admin.address, "GET", "/", "");
    assert!(status == 200 && body.contains("msgstream admin"), "{body}");

    let delete = r#"{"channel":"a","subscription":"g","confirm":"g"}"#;
    let (status, body) = http(&admin.address, "POST", "/api/delete", delete);
    assert_eq!(status, 403, "read-only by default: {body}");
    assert!(body.contains("--allow-admin-writes"), "{body}");
    drop(admin);

    let admin = start_admin(&db, &["--allow-admin-writes"]);
    let wrong = r#"{"channel":"a","subscription":"g","confirm":"a"}"#;
    let (status, body) = http(&admin.address, "POST", "/api/delete", wrong);
    assert_eq!(status, 400, "the confirmation must repeat the name: {body}");
    let (status, body) = http(&admin.address, "POST", "/api/delete", delete);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("deleted group"), "{body}");
}

#[test]
fn consume_stats_and_bench_summarise_the_instruments() {
    if !cfg!(feature = "rocksmq") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db").to_string_lossy().into_owned();
    let env = [("MSGSTREAM_ROCKSMQ__PATH", db.as_str())];
    let out = msgstream(
        &[
            "produce",
            "--channels",
            "s0,s1",
            "--count",
            "20",
            "--tick-every",
            "10",
        ],
        &env,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let out = msgstream(
        &[
            "consume",
            "--channels",
            "s0,s1",
            "--tt",
            "--max-packs",
            "3",
            "--stats",
        ],
        &env,
    );
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("metrics: consumed "), "{err}");
    assert!(err.contains("(s0: "), "{err}");
    assert!(
        err.contains("metrics: tt msgstream-cli: watermark 23, held by s0, lag 0"),
        "{err}"
    );
    let out = msgstream(
        &[
            "--backend",
            "memory",
            "bench",
            "--messages",
            "200",
            "--latency-secs",
            "1",
        ],
        &[],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(text.contains("metrics: produced "), "{text}");
    assert!(text.contains("metrics: produce batches "), "{text}");
}
