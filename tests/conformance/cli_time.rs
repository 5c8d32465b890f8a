//! `consume --from-time`: a timestamp, or a date under hybrid timestamps, on both streams. Runs
//! on rocksmq with a temporary database, since each command is a new process.

use serde_json::Value;

use crate::cli::{msgstream, msgstream_ok, stderr};

/// 2026-12-04T17:00:00Z as a hybrid timestamp (`date -d … +%s` = 1796403600).
const DATE_HYBRID: u64 = 1_796_403_600_000 << 18;

/// The CLI's environment for the database at `db`, with hybrid timestamps or not.
fn env(db: &str, hybrid: bool) -> Vec<(&str, &str)> {
    let mut env = vec![("MSGSTREAM_ROCKSMQ__PATH", db)];
    if hybrid {
        env.push(("MSGSTREAM_STREAM__TIMESTAMPS", "hybrid"));
    }
    env
}

fn run(db: &str, hybrid: bool, args: &[&str]) -> std::process::Output {
    msgstream(args, &env(db, hybrid))
}

fn ok(db: &str, hybrid: bool, args: &[&str]) -> String {
    msgstream_ok(args, &env(db, hybrid))
}

fn first_end_ts(json: &str) -> Option<u64> {
    let line = json.lines().next()?;
    serde_json::from_str::<Value>(line).ok()?["end_ts"].as_u64()
}

#[test]
fn consume_from_a_time_on_both_streams() {
    if !cfg!(feature = "rocksmq") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db").to_string_lossy().into_owned();
    // Inserts 10, 11, tick 12, inserts 13, 14, tick 15, inserts 16, 17, tick 18, tick 19.
    let produce = [
        "produce",
        "--channels",
        "a",
        "--count",
        "6",
        "--tick-every",
        "2",
    ];
    ok(&db, false, &[&produce[..], &["--start-ts", "10"]].concat());

    let plain = ok(
        &db,
        false,
        &[
            "consume",
            "--channels",
            "a",
            "--from-time",
            "14",
            "--count",
            "1",
            "--format",
            "json",
        ],
    );
    assert_eq!(first_end_ts(&plain), Some(14), "{plain}");
    let tt = ok(
        &db,
        false,
        &[
            "consume",
            "--channels",
            "a",
            "--tt",
            "--subscription",
            "tt",
            "--from-time",
            "14",
            "--max-packs",
            "1",
        ],
    );
    assert!(
        tt.starts_with("pack 1: ts 12 -> 15, 2 msgs"),
        "the packs after tick 12: {tt}"
    );

    let opaque = run(
        &db,
        false,
        &[
            "consume",
            "--channels",
            "a",
            "--from-time",
            "2026-12-04T17:00:00Z",
            "--max-packs",
            "1",
        ],
    );
    assert!(!opaque.status.success());
    assert!(
        stderr(&opaque).contains("[stream] timestamps = \"hybrid\""),
        "a date without hybrid timestamps names the key: {}",
        stderr(&opaque)
    );
    let both = run(
        &db,
        false,
        &[
            "consume",
            "--channels",
            "a",
            "--from-time",
            "14",
            "--from-positions",
            "p.json",
        ],
    );
    assert!(
        !both.status.success(),
        "--from-time and --from-positions conflict"
    );

    // Inserts at the date less 2 and 1, its tick, …: the first message at or after the date is
    // that tick.
    let start = (DATE_HYBRID - 2).to_string();
    ok(
        &db,
        true,
        &[
            "produce",
            "--channels",
            "h",
            "--count",
            "4",
            "--tick-every",
            "2",
            "--start-ts",
            &start,
        ],
    );
    let dated = ok(
        &db,
        true,
        &[
            "consume",
            "--channels",
            "h",
            "--from-time",
            "2026-12-04T17:00:00Z",
            "--count",
            "1",
            "--format",
            "json",
        ],
    );
    assert_eq!(first_end_ts(&dated), Some(DATE_HYBRID), "{dated}");
    let bad = run(
        &db,
        true,
        &[
            "consume",
            "--channels",
            "h",
            "--from-time",
            "2026-13-04T17:00:00Z",
        ],
    );
    assert!(!bad.status.success());
    assert!(
        stderr(&bad).contains("no day 2026-13-04"),
        "{}",
        stderr(&bad)
    );
}
