//! The command-line tool with the user's own data: `produce --input` (raw and JSON lines, from
//! a file and from standard input) and what `consume` shows of it, in text and JSON. Runs on
//! rocksmq with a temporary database, since each command is a new process.

use std::io::Write;
use std::process::{Output, Stdio};

use serde_json::Value;

use crate::cli::{command, msgstream, stderr, stdout};

/// A temporary rocksmq database and the environment pointing at it.
struct Db {
    dir: tempfile::TempDir,
    path: String,
}

impl Db {
    fn new() -> Db {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("db").to_string_lossy().into_owned();
        Db { dir, path }
    }

    fn env(&self) -> [(&str, &str); 1] {
        [("MSGSTREAM_ROCKSMQ__PATH", self.path.as_str())]
    }

    /// Runs a command that must succeed; returns its stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = msgstream(args, &self.env());
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        stdout(&out)
    }

    /// Runs a command with `input` on its standard input.
    fn with_stdin(&self, args: &[&str], input: &str) -> Output {
        let env: Vec<(&str, &std::ffi::OsStr)> =
            vec![("MSGSTREAM_ROCKSMQ__PATH", self.path.as_ref())];
        let mut child = command(args, &env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(input.as_bytes()).expect("write stdin");
        drop(stdin);
        child.wait_with_output().expect("wait")
    }

    fn file(&self, name: &str, text: &str) -> String {
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).expect("write input");
        path.to_string_lossy().into_owned()
    }
}

fn packs(out: &str) -> Vec<Value> {
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn json_lines_in_json_packs_out() {
    if !cfg!(feature = "rocksmq") {
        return;
    }
    let db = Db::new();
    let input = db.file(
        "in.jsonl",
        concat!(
            r#"{"channel":"b","timestamp":10,"payload":"first","properties":{"trace":"t1"}}"#,
            "\n",
            r#"{"channel":"a","timestamp":11,"kind":"delete","payload":"42"}"#,
            "\n\n",
            r#"{"key":1,"timestamp":12,"kind":"custom","payload_base64":"AP8="}"#,
            "\n",
        ),
    );
    let out = db.ok(&[
        "produce",
        "--channels",
        "a,b",
        "--input",
        &input,
        "--format",
        "json",
    ]);
    assert!(
        out.contains("produced 3 messages and 1 timeticks to 2 channel(s); last timestamp 13"),
        "{out}"
    );
    let out = db.ok(&[
        "consume",
        "--channels",
        "a,b",
        "--tt",
        "--format",
        "json",
        "--count",
        "3",
    ]);
    let packs = packs(&out);
    assert_eq!(packs.len(), 1, "{out}");
    let pack = &packs[0];
    assert_eq!(
        (pack["begin_ts"].as_u64(), pack["end_ts"].as_u64()),
        (Some(0), Some(13))
    );
    let seen: Vec<(String, String, String)> = pack["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| {
            let payload = m.get("payload").or(m.get("payload_base64"));
            (
                m["channel"].as_str().unwrap_or_default().to_string(),
                m["kind"].as_str().unwrap_or_default().to_string(),
                payload
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect();
    // Channels in subscription order, each in arrival order.
    let expected = [
        ("a", "delete", "42"),
        ("b", "insert", "first"),
        ("b", "custom", "AP8="),
    ];
    let expected: Vec<(String, String, String)> = expected
        .iter()
        .map(|(c, k, p)| (c.to_string(), k.to_string(), p.to_string()))
        .collect();
    assert_eq!(seen, expected, "{out}");
    assert_eq!(pack["messages"][1]["properties"]["trace"], "t1", "{out}");
    // The end positions are a positions file: resuming there shows nothing old again.
    let saved = db.file("end.json", &pack["end_positions"].to_string());
    db.ok(&[
        "produce",
        "--channels",
        "a,b",
        "--count",
        "2",
        "--tick-every",
        "0",
        "--start-ts",
        "20",
    ]);
    let out = db.ok(&[
        "consume",
        "--channels",
        "a,b",
        "--tt",
        "--subscription",
        "other",
        "--from-positions",
        &saved,
        "--max-packs",
        "1",
    ]);
    assert!(out.starts_with("pack 1: ts 13 -> 22, 2 msgs"), "{out}");
}

#[test]
fn raw_lines_from_stdin_show_as_readable_lines() {
    if !cfg!(feature = "rocksmq") {
        return;
    }
    let db = Db::new();
    let out = db.with_stdin(
        &[
            "produce",
            "--channels",
            "r",
            "--input",
            "-",
            "--tick-every",
            "2",
        ],
        "alpha\nbeta\ngamma\n",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("produced 3 messages and 2 timeticks"),
        "{}",
        stdout(&out)
    );
    let out = db.ok(&["consume", "--channels", "r", "--tt", "--max-packs", "2"]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "pack 1: ts 0 -> 3, 2 msgs", "{out}");
    assert!(
        lines[1].starts_with("  r id=")
            && lines[1].ends_with("kind=insert keys=0 payload=\"alpha\""),
        "{out}"
    );
    assert!(
        lines[2].contains(" ts=2 ") && lines[2].ends_with("keys=1 payload=\"beta\""),
        "{out}"
    );
    assert_eq!(lines[3], "pack 2: ts 3 -> 5, 1 msgs", "{out}");
    assert!(lines[4].ends_with("payload=\"gamma\""), "{out}");
    // A plain stream: one line per message, timeticks included, in the historical form.
    let out = db.ok(&[
        "consume",
        "--channels",
        "r",
        "--subscription",
        "plain",
        "--count",
        "1",
    ]);
    assert!(out.starts_with("r id="), "{out}");
    assert!(
        out.contains(" ts=1 type=400 kind=insert keys=0 payload=\"alpha\""),
        "{out}"
    );
}

#[test]
fn a_bad_line_is_an_error_naming_it_after_writing_the_lines_before() {
    if !cfg!(feature = "rocksmq") {
        return;
    }
    let db = Db::new();
    let cases = [
        ("{\"payload\":\"ok\"}\n{\"payload\":\"x\",\"kind\":\"upsert\"}\n", "stdin line 2: not a message", 1),
        ("{\"payload\":\"ok\"}\n{\"payload\":\"ok\"}\n{\"channel\":\"nope\",\"payload\":\"x\"}\n", "line 3: channel \"nope\" is not one of --channels", 2),
        ("{\"payload\":\"a\",\"timestamp\":5}\n{\"payload\":\"b\",\"timestamp\":3}\n", "line 2: timestamp 3 is not after the timetick 6", 1),
    ];
    for (i, (input, expected, written)) in cases.into_iter().enumerate() {
        let channel = format!("bad{i}");
        let out = db.with_stdin(
            &[
                "produce",
                "--channels",
                &channel,
                "--input",
                "-",
                "--format",
                "json",
                "--tick-every",
                "1",
            ],
            input,
        );
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{input}: {err}");
        assert!(err.contains(expected), "{input}: {err}");
        assert!(!err.contains("panicked"), "{err}");
        // What came before the bad line was written, with its ticks.
        let shown = db.ok(&[
            "consume",
            "--channels",
            &channel,
            "--tt",
            "--count",
            &written.to_string(),
            "--format",
            "json",
        ]);
        let count: usize = packs(&shown)
            .iter()
            .map(|p| p["messages"].as_array().map_or(0, Vec::len))
            .sum();
        assert_eq!(count, written, "{input}: {shown}");
    }
    let out = msgstream(
        &[
            "produce",
            "--channels",
            "x",
            "--input",
            "/nonexistent/in.txt",
        ],
        &db.env(),
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("/nonexistent/in.txt"),
        "{}",
        stderr(&out)
    );
}
