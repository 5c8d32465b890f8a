//! `msgstream admin`'s message browser, `/api/messages`, run as a user runs it: on rocksmq each
//! message reads exactly as `consume` prints it, pages walk the channel in both orders and from
//! an id or a time, bad input gets a typed error, the route keeps the page's Host guard, and
//! browsing moves nothing (the same subscriptions, at the same positions, afterwards). On
//! upstream nsq, which has no readers, the answer says unavailable instead of listing nothing.

use std::io::{Read, Write};
use std::net::TcpStream;

use serde_json::Value;

use crate::cli::{msgstream, msgstream_ok, stderr, TempDb};
use crate::cli_admin::{http, json, start_admin, start_admin_with, Admin};

fn get(admin: &Admin, path: &str) -> (u16, Value) {
    let (status, body) = http(&admin.address, "GET", path, "");
    (status, json(&body))
}

/// The subscriptions of channel `a` as the admin page lists them (names and lag).
fn subscriptions(admin: &Admin) -> Value {
    let (status, channels) = get(admin, "/api/channels");
    assert_eq!(status, 200, "{channels}");
    channels["channels"][0]["subscriptions"].clone()
}

/// Follows `next_cursor` from `first`; returns every page's messages.
fn walk(admin: &Admin, first: &str) -> Vec<Vec<Value>> {
    let mut pages = Vec::new();
    let mut path = first.to_string();
    loop {
        let (status, page) = get(admin, &path);
        assert_eq!(status, 200, "{path}: {page}");
        pages.push(page["messages"].as_array().expect("messages").clone());
        match page["next_cursor"].as_str() {
            Some(cursor) => path = format!("{first}&cursor={cursor}"),
            None => return pages,
        }
    }
}

#[test]
fn the_browser_shows_what_consume_prints_and_moves_nothing() {
    if !cfg!(feature = "rocksmq") {
        return;
    }
    let temp = TempDb::new();
    let db = temp.path.clone();
    let run = |args: &[&str]| msgstream_ok(args, &temp.env());
    run(&[
        "produce",
        "--channels",
        "a",
        "--count",
        "60",
        "--tick-every",
        "10",
    ]);
    // What `consume` prints for every message, as text and as JSON.
    let consume = |sub: &str, format: &str| {
        run(&[
            "consume",
            "--channels",
            "a",
            "--subscription",
            sub,
            "--format",
            format,
            "--idle-timeout",
            "1",
        ])
    };
    let lines: Vec<String> = consume("text", "text")
        .lines()
        .map(str::to_string)
        .collect();
    let objects: Vec<Value> = consume("json", "json")
        .lines()
        .flat_map(|pack| json(pack)["messages"].as_array().expect("messages").clone())
        .collect();
    assert_eq!(lines.len(), 67, "60 inserts, 6 ticks and the last one");
    assert_eq!(objects.len(), lines.len());
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
    let before = subscriptions(&admin);
    assert_eq!(before.as_array().map(Vec::len), Some(3), "{before}");

    let pages = walk(&admin, "/api/messages?channel=a");
    assert_eq!(pages.iter().map(Vec::len).collect::<Vec<_>>(), [50, 17]);
    let shown: Vec<Value> = pages.concat();
    for ((message, line), object) in shown.iter().zip(&lines).zip(&objects) {
        assert_eq!(message["line"], line.as_str(), "the line consume prints");
        let mut same = message.clone();
        let map = same.as_object_mut().expect("an object");
        map.remove("line");
        map.remove("preview");
        assert_eq!(&same, object, "the object consume --format json prints");
    }
    let ids: Vec<&str> = shown.iter().filter_map(|m| m["id"].as_str()).collect();

    let newest = walk(&admin, "/api/messages?channel=a&order=newest");
    let newest_ids: Vec<&str> = newest[0].iter().filter_map(|m| m["id"].as_str()).collect();
    let last_fifty: Vec<&str> = ids[17..].iter().rev().copied().collect();
    assert_eq!(newest_ids, last_fifty);
    assert_eq!(newest.concat().len(), 67);

    let (_, page) = get(
        &admin,
        &format!("/api/messages?channel=a&from={}&limit=3", ids[9]),
    );
    assert_eq!(page["messages"][0]["id"], ids[9], "{page}");
    assert_eq!(page["messages"].as_array().map(Vec::len), Some(3));
    let ts = shown[9]["end_ts"].as_u64().expect("end_ts");
    let (status, page) = get(&admin, &format!("/api/messages?channel=a&from_time={ts}"));
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["messages"][0]["id"], ids[9], "{page}");
    let (_, overview) = get(&admin, "/api/overview");
    let by = if overview["capabilities"]["seek_time"] == true {
        "time index"
    } else {
        "scan"
    };
    assert_eq!(page["from_time_found_by"], by, "{overview}");

    for (query, status, kind) in [
        ("channel=nope", 404, "unknown_channel"),
        ("channel=a&from=abc", 400, "bad_parameter"),
        ("channel=a&from_time=noon", 400, "bad_parameter"),
        (
            "channel=a&from_time=1970-01-01T00:00:00Z",
            400,
            "bad_parameter",
        ),
        ("channel=a&limit=100000", 400, "page_too_large"),
        ("channel=a&from=99999", 416, "past_end"),
        ("channel=a&form=1", 400, "bad_parameter"),
    ] {
        let (got, body) = get(&admin, &format!("/api/messages?{query}"));
        assert_eq!(
            (got, body["kind"].as_str()),
            (status, Some(kind)),
            "{query}: {body}"
        );
    }
    assert_eq!(foreign_host(&admin), 403, "the page's Host guard");

    assert_eq!(subscriptions(&admin), before, "browsing moved nothing");
    drop(admin);
    // g resumes exactly after the four messages it had acknowledged.
    let next = run(&[
        "consume",
        "--channels",
        "a",
        "--subscription",
        "g",
        "--max-packs",
        "1",
    ]);
    assert_eq!(next.trim_end(), lines[4], "{next}");

    // A date is a time only where timestamps are hybrid: refused above (opaque, the
    // default), taken here (the epoch is hybrid timestamp 0, so the page starts at the first
    // message).
    let hybrid = start_admin_with(
        &[
            ("MSGSTREAM_ROCKSMQ__PATH", std::ffi::OsStr::new(&db)),
            (
                "MSGSTREAM_STREAM__TIMESTAMPS",
                std::ffi::OsStr::new("hybrid"),
            ),
        ],
        &[],
    );
    let (status, page) = get(
        &hybrid,
        "/api/messages?channel=a&from_time=1970-01-01T00:00:00Z&limit=1",
    );
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["messages"][0]["id"], ids[0], "{page}");
}

/// The status answered to `/api/messages` asked with another site's Host (DNS rebinding).
fn foreign_host(admin: &Admin) -> u16 {
    let mut stream = TcpStream::connect(&admin.address).expect("connect");
    let port = admin.address.rsplit(':').next().expect("port");
    write!(
        stream,
        "GET /api/messages?channel=a HTTP/1.1\r\nHost: evil.example:{port}\r\n\
         Connection: close\r\n\r\n"
    )
    .expect("request");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("response");
    response
        .get(9..12)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{response}"))
}

#[cfg(feature = "nsq")]
#[test]
fn without_readers_the_browser_says_unavailable() {
    use std::ffi::OsStr;
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let server = runtime.block_on(crate::harness::nsq_server(false));
    let (nsqd, nsqd_http, lookupd) = server.config_addresses();
    let (nsqd, nsqd_http, lookupd) = (
        format!("{nsqd:?}"),
        format!("{nsqd_http:?}"),
        format!("{lookupd:?}"),
    );
    let env = [
        ("MSGSTREAM_BACKEND", "nsq"),
        ("MSGSTREAM_NSQ__NSQD", nsqd.as_str()),
        ("MSGSTREAM_NSQ__NSQD_HTTP", nsqd_http.as_str()),
        ("MSGSTREAM_NSQ__LOOKUPD", lookupd.as_str()),
    ];
    let channel = format!("browse{}", std::process::id());
    let out = msgstream(
        &[
            "produce",
            "--channels",
            &channel,
            "--count",
            "3",
            "--tick-every",
            "0",
        ],
        &env,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let os_env: Vec<(&str, &OsStr)> = env.iter().map(|(k, v)| (*k, OsStr::new(*v))).collect();
    let admin = start_admin_with(&os_env, &[]);
    let (status, page) = get(&admin, &format!("/api/messages?channel={channel}"));
    assert_eq!(status, 200, "{page}");
    assert_eq!(
        page["unavailable"], "messages not available from nsq (no readers)",
        "{page}"
    );
    assert!(
        page.get("messages").is_none(),
        "no list stands for what cannot be read"
    );
    let (status, page) = get(&admin, &format!("/api/messages?channel={channel}&limit=0"));
    assert_eq!(
        (status, &page["kind"]),
        (400, &Value::from("bad_parameter"))
    );
    drop(admin);
    drop((server, runtime));
}
