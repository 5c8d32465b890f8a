//! What `produce` refuses before a tt consumer could lose it: timestamps no timetick-aligned
//! pack can hold (0, `u64::MAX`), inputs that cannot be read, and lines longer than the
//! largest payload. Each is an error naming the line, with nothing written for it; an input
//! refused at its first line leaves no channel behind. Runs on rocksmq (each command is a new
//! process).

use std::io::Write;
use std::process::{Output, Stdio};

use crate::cli::{command, exit_within, lines, msgstream, rest, spawn, stderr, stdout};

/// A temporary rocksmq database.
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

    fn run(&self, args: &[&str]) -> Output {
        msgstream(args, &self.env())
    }

    /// `produce --input -` of `input` in `format` to `channel`, a tick after every line.
    fn produce(&self, channel: &str, format: &str, input: &[u8]) -> Output {
        let env = [("MSGSTREAM_ROCKSMQ__PATH", self.path.as_ref())];
        let args = [
            "produce",
            "--channels",
            channel,
            "--input",
            "-",
            "--format",
            format,
            "--tick-every",
            "1",
        ];
        let mut child = command(&args, &env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(input).expect("write stdin");
        drop(stdin);
        child.wait_with_output().expect("wait")
    }

    /// The channels the database holds.
    fn topics(&self) -> Vec<String> {
        let out = self.run(&["topics"]);
        assert!(out.status.success(), "{}", stderr(&out));
        stdout(&out).lines().map(str::to_string).collect()
    }

    /// The payloads a tt consumer gets from `channel` (reading `count` messages).
    fn payloads(&self, channel: &str, count: usize) -> Vec<String> {
        let out = self.run(&[
            "consume",
            "--channels",
            channel,
            "--tt",
            "--format",
            "json",
            "--count",
            &count.to_string(),
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        stdout(&out)
            .lines()
            .flat_map(|line| {
                let pack: serde_json::Value =
                    serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
                let messages = pack["messages"].as_array().cloned().unwrap_or_default();
                messages
                    .into_iter()
                    .map(|m| m["payload"].as_str().unwrap_or_default().to_string())
            })
            .collect()
    }

    fn file(&self, name: &str, bytes: &[u8]) -> String {
        let path = self.dir.path().join(name);
        std::fs::write(&path, bytes).expect("write input");
        path.to_string_lossy().into_owned()
    }
}

/// Exit 1 with one `error:` line containing `needle`.
fn refused(out: &Output, needle: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let error = err
        .lines()
        .find(|l| l.starts_with("error: "))
        .unwrap_or_else(|| panic!("no error line: {err}"));
    assert!(error.contains(needle), "{err}");
}

#[test]
fn timestamps_no_pack_can_hold_are_refused_naming_the_line() {
    if !cfg!(feature = "rocksmq") {
        return;
    }
    let db = Db::new();
    let max = u64::MAX.to_string();
    // The first line refused: nothing at all is written, not even the channel.
    let out = db.produce("zero", "json", b"{\"payload\":\"a\",\"timestamp\":0}\n");
    refused(&out, "stdin line 1: timestamp 0 cannot be delivered");
    let out = db.run(&["produce", "--channels", "zero", "--start-ts", "0"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "a usage error: {}",
        stderr(&out)
    );
    assert!(stderr(&out).contains("--start-ts"), "{}", stderr(&out));
    assert!(db.topics().is_empty(), "{:?}", db.topics());
    // A later line refused: the lines before it are written with their ticks, it is not.
    let input = format!(
        "{{\"payload\":\"ok\",\"timestamp\":5}}\n{{\"payload\":\"top\",\"timestamp\":{max}}}\n"
    );
    let out = db.produce("top", "json", input.as_bytes());
    refused(
        &out,
        &format!("stdin line 2: timestamp {max} cannot be delivered"),
    );
    assert_eq!(db.topics(), ["top"]);
    assert_eq!(db.payloads("top", 1), ["ok"]);
    let out = db.run(&[
        "consume",
        "--channels",
        "top",
        "--subscription",
        "plain",
        "--idle-timeout",
        "1",
    ]);
    assert!(
        !stdout(&out).contains("payload=\"top\""),
        "the refused line is not stored: {}",
        stdout(&out)
    );
    // The highest timestamp a message may have still gets its timetick.
    let last = (u64::MAX - 1).to_string();
    let input = format!("{{\"payload\":\"last\",\"timestamp\":{last}}}\n");
    let out = db.produce("last", "json", input.as_bytes());
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(db.payloads("last", 1), ["last"]);
}

#[test]
fn inputs_that_cannot_be_read_leave_the_backend_untouched() {
    if !cfg!(feature = "rocksmq") {
        return;
    }
    let db = Db::new();
    let dir = db.dir.path().to_string_lossy().into_owned();
    let out = db.run(&["produce", "--channels", "d", "--input", &dir]);
    refused(&out, "is a directory");
    let bad_first = db.file("bad.jsonl", b"{\"payload\":\n{\"payload\":\"ok\"}\n");
    let out = db.run(&[
        "produce",
        "--channels",
        "d",
        "--input",
        &bad_first,
        "--format",
        "json",
    ]);
    refused(&out, "bad.jsonl line 1: not a message");
    assert!(db.topics().is_empty(), "{:?}", db.topics());
}

#[test]
fn a_line_longer_than_the_largest_payload_is_refused_naming_it() {
    if !cfg!(feature = "rocksmq") {
        return;
    }
    let db = Db::new();
    // Without a line end, /dev/zero is one endless line: refused once the limit is read, not
    // after memory runs out.
    let env = [("MSGSTREAM_ROCKSMQ__PATH", db.path.as_ref())];
    let mut running = spawn(&mut command(
        &["produce", "--channels", "z", "--input", "/dev/zero"],
        &env,
    ));
    let err = lines(running.stderr.take().expect("stderr"));
    let status = exit_within(running);
    let err = rest(&err);
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(
        err.contains("/dev/zero line 1: longer than 67108864 bytes"),
        "{err}"
    );
    assert!(db.topics().is_empty(), "{:?}", db.topics());

    let mut text = b"first\n".to_vec();
    text.resize(text.len() + (64 << 20) + 1, b'x');
    text.push(b'\n');
    let big = db.file("big.txt", &text);
    let out = db.run(&["produce", "--channels", "big", "--input", &big]);
    refused(&out, "big.txt line 2: longer than 67108864 bytes");
    assert_eq!(db.payloads("big", 1), ["first"]);
}
