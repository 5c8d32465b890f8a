//! The command-line tool, run as a user runs it.

use std::process::{Command, Output};

fn msgstream(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_msgstream"));
    cmd.args(args)
        .env_remove("MSGSTREAM_BACKEND")
        .env_remove("MSGSTREAM_CONFIG");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run msgstream")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn demo_line(out: &Output) -> String {
    stdout(out)
        .lines()
        .rfind(|l| l.starts_with("demo: "))
        .expect("demo summary line")
        .to_string()
}

#[test]
fn demo_on_every_backend_loses_and_duplicates_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let path = path.to_string_lossy();
    let mut backends = vec![("memory", vec![])];
    if cfg!(feature = "rocksmq") {
        backends.push(("rocksmq", vec![("MSGSTREAM_ROCKSMQ__PATH", path.as_ref())]));
    }
    for (backend, env) in backends {
        let out = msgstream(&["--backend", backend, "demo"], &env);
        assert!(out.status.success(), "{backend}: {}", stderr(&out));
        let line = demo_line(&out);
        assert_eq!(
            line, "demo: packs=24 messages=288 resumed_from_pack=12 lost=0 duplicated=0",
            "{backend}"
        );
    }
}

#[test]
fn errors_are_one_line_and_a_nonzero_exit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bad_config = dir.path().join("bad.toml");
    std::fs::write(&bad_config, "[rocksmq]\npth = \"x\"\n").expect("write");
    let garbage = dir.path().join("positions.json");
    std::fs::write(&garbage, "not json").expect("write");
    let config = bad_config.to_string_lossy();
    let positions = garbage.to_string_lossy();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--config", &config, "topics"], "pth"),
        (vec!["--backend", "kafka", "topics"], "kafka"),
        (
            vec!["--config", "/nonexistent/msgstream.toml", "topics"],
            "nonexistent",
        ),
        (
            vec![
                "--backend",
                "memory",
                "consume",
                "--channels",
                "a",
                "--from-positions",
                &positions,
            ],
            "positions.json",
        ),
        (
            vec!["--backend", "memory", "consume", "--channels", "bad/name"],
            "bad/name",
        ),
        (
            vec!["--backend", "memory", "positions", "show", &positions],
            "positions.json",
        ),
    ];
    for (args, needle) in cases {
        let out = msgstream(&args, &[]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 1, "{args:?}: {err}");
        assert!(
            lines[0].starts_with("error: ") && lines[0].contains(needle),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn produce_consume_positions_topics_groups() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let env = [("MSGSTREAM_ROCKSMQ__PATH", db.to_str().expect("utf-8 path"))];
    let backend = if cfg!(feature = "rocksmq") {
        "rocksmq"
    } else {
        "memory"
    };
    if backend == "memory" {
        return; // Each CLI run is a new process: only a persistent backend keeps data between them.
    }
    let run = |args: &[&str]| {
        let out = msgstream(args, &env);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        stdout(&out)
    };
    let out = run(&[
        "produce",
        "--channels",
        "c0,c1",
        "--count",
        "40",
        "--tick-every",
        "10",
    ]);
    assert!(out.contains("produced 40 inserts and 5 timeticks"), "{out}");
    let saved = dir.path().join("saved.json");
    let saved = saved.to_str().expect("utf-8 path");
    let out = run(&[
        "consume",
        "--channels",
        "c0,c1",
        "--tt",
        "--max-packs",
        "2",
        "--save-positions",
        saved,
    ]);
    assert_eq!(
        out.lines().filter(|l| l.starts_with("pack ")).count(),
        2,
        "{out}"
    );
    let out = run(&["positions", "show", saved]);
    assert!(out.contains("c0") && out.contains("c1"), "{out}");
    let out = run(&[
        "consume",
        "--channels",
        "c0,c1",
        "--tt",
        "--from-positions",
        saved,
        "--idle-timeout",
        "2",
    ]);
    let packs: Vec<&str> = out.lines().filter(|l| l.starts_with("pack ")).collect();
    assert_eq!(
        packs.len(),
        3,
        "the three packs after the saved ones: {out}"
    );
    assert!(packs[0].contains("ts 22 -> 33"), "{out}");
    let out = run(&["topics"]);
    assert_eq!(out.lines().collect::<Vec<_>>(), vec!["c0", "c1"]);
    let out = run(&["groups", "--channel", "c0"]);
    assert!(out.contains("msgstream-cli"), "{out}");
    let out = run(&[
        "bench",
        "--messages",
        "2000",
        "--latency-secs",
        "1",
        "--latency-rate",
        "500",
        "--json",
    ]);
    let summary: serde_json::Value = serde_json::from_str(out.trim()).expect("json summary");
    assert!(
        summary["produce_msgs_per_s"].as_f64().expect("rate") > 0.0,
        "{out}"
    );
    assert!(
        summary["latency_p99_us"].as_f64().expect("p99") > 0.0,
        "{out}"
    );
}

#[test]
fn ctrl_c_stops_consume_cleanly_and_saves_positions() {
    if !cfg!(feature = "rocksmq") {
        return; // Needs a backend that keeps data between processes.
    }
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let env = [("MSGSTREAM_ROCKSMQ__PATH", db.to_str().expect("utf-8 path"))];
    let out = msgstream(
        &[
            "produce",
            "--channels",
            "k0",
            "--count",
            "30",
            "--tick-every",
            "10",
        ],
        &env,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let saved = dir.path().join("saved.json");
    let mut child = Command::new(env!("CARGO_BIN_EXE_msgstream"))
        .args(["consume", "--channels", "k0", "--tt", "--save-positions"])
        .arg(&saved)
        .env("MSGSTREAM_ROCKSMQ__PATH", &db)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn consume");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    // Wait (on output, not on time) until the consumer has delivered every pack.
    let mut packs = 0;
    while packs < 4 {
        let line = lines.next().expect("consumer output").expect("utf-8");
        if line.starts_with("pack ") {
            packs += 1;
        }
    }
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let output = child.wait_with_output().expect("wait");
    assert!(
        output.status.success(),
        "exit after Ctrl-C: {:?} {}",
        output.status,
        stderr(&output)
    );
    let positions = msgstream_facade::positions::load(&saved).expect("positions saved on Ctrl-C");
    assert_eq!(positions.len(), 1);
    assert_eq!(
        positions[0].timestamp, 34,
        "end of the last pack (final tick)"
    );
}
