//! The command-line tool, run as a user runs it. Tests that need data to outlive one process
//! run on rocksmq and are skipped in builds without it; the rest run on `memory`.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// How long a command gets to stop after a signal or a closed pipe: generous for a loaded CI
/// machine, far below what an ignored signal would take (millions of writes).
const PROMPTLY: Duration = Duration::from_secs(20);

/// The binary with no `MSGSTREAM_*` variable of the test's own environment.
pub(crate) fn command(args: &[&str], env: &[(&str, &OsStr)]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_msgstream"));
    cmd.args(args);
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("MSGSTREAM_") {
            cmd.env_remove(name);
        }
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

pub(crate) fn msgstream(args: &[&str], env: &[(&str, &str)]) -> Output {
    let env: Vec<(&str, &OsStr)> = env.iter().map(|(k, v)| (*k, OsStr::new(*v))).collect();
    command(args, &env).output().expect("run msgstream")
}

/// `msgstream args` with `env`, which must succeed: its standard output.
pub(crate) fn msgstream_ok(args: &[&str], env: &[(&str, &str)]) -> String {
    let out = msgstream(args, env);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    stdout(&out)
}

/// A rocksmq database in a temporary directory, for CLI runs that share it: each run is a
/// process of its own, so only a persistent backend keeps data between them.
pub(crate) struct TempDb {
    _dir: tempfile::TempDir,
    /// The database's path, as `MSGSTREAM_ROCKSMQ__PATH` takes it.
    pub(crate) path: String,
}

impl TempDb {
    pub(crate) fn new() -> TempDb {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("db").to_string_lossy().into_owned();
        TempDb { _dir: dir, path }
    }

    /// The environment that points the CLI at it.
    pub(crate) fn env(&self) -> [(&str, &str); 1] {
        [("MSGSTREAM_ROCKSMQ__PATH", self.path.as_str())]
    }
}

pub(crate) fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub(crate) fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn demo_line(out: &Output) -> String {
    stdout(out)
        .lines()
        .rfind(|l| l.starts_with("demo: "))
        .expect("demo summary line")
        .to_string()
}

/// The lines of a child's pipe, read on a thread so that waiting for one can time out.
pub(crate) fn lines(pipe: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Waits (on output, bounded) for a line starting with `prefix`; returns the lines up to it.
fn wait_for_line(rx: &mpsc::Receiver<String>, prefix: &str) -> Vec<String> {
    let mut seen = Vec::new();
    loop {
        match rx.recv_timeout(PROMPTLY) {
            Ok(line) => {
                let found = line.starts_with(prefix);
                seen.push(line);
                if found {
                    return seen;
                }
            }
            Err(e) => panic!("no line starting with {prefix:?} ({e}); got {seen:?}"),
        }
    }
}

fn signal(child: &Child, name: &str) {
    let status = Command::new("kill")
        .args([format!("-{name}"), child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success(), "kill -{name}");
}

/// A running msgstream, killed when dropped before it exited: a test that fails while waiting
/// on it leaves no endless `produce` behind.
pub(crate) struct Running(Option<Child>);

impl std::ops::Deref for Running {
    type Target = Child;

    fn deref(&self) -> &Child {
        self.0.as_ref().expect("running child")
    }
}

impl std::ops::DerefMut for Running {
    fn deref_mut(&mut self) -> &mut Child {
        self.0.as_mut().expect("running child")
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Waits for the child to exit within [`PROMPTLY`]; kills it and fails otherwise.
pub(crate) fn exit_within(mut running: Running) -> ExitStatus {
    let mut child = running.0.take().expect("running child");
    let pid = child.id().to_string();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    match rx.recv_timeout(PROMPTLY) {
        Ok(status) => status.expect("wait"),
        Err(_) => {
            let _ = Command::new("kill").args(["-KILL", &pid]).status();
            panic!("msgstream did not stop within {PROMPTLY:?}");
        }
    }
}

pub(crate) fn spawn(cmd: &mut Command) -> Running {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn msgstream");
    Running(Some(child))
}

pub(crate) fn rest(rx: &mpsc::Receiver<String>) -> String {
    rx.iter().collect::<Vec<_>>().join("\n")
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
        let out = msgstream(&["--backend", backend, "topics"], &env);
        assert_eq!(stdout(&out), "", "{backend}: the demo deletes its channels");
    }
    demo_on_networked_backends();
    // 34 channels put more messages in a round than the default tick spacing holds.
    let out = msgstream(
        &["--backend", "memory", "demo", "--channels", "34", "--quiet"],
        &[],
    );
    assert!(out.status.success(), "{}", stdout(&out));
    assert!(
        demo_line(&out).ends_with(" lost=0 duplicated=0"),
        "{}",
        stdout(&out)
    );
}

/// The demo over the servers the tests start: RocketMQ's shared cluster, and a Youzan test
/// cluster (the NSQ mode that can seek, which the demo's resume needs).
fn demo_on_networked_backends() {
    let mut runs: Vec<(&str, Vec<(String, String)>)> = Vec::new();
    #[cfg(feature = "rocketmq")]
    {
        let namesrv = msgstream_rocketmq::testserver::shared().namesrv.clone();
        runs.push((
            "rocketmq",
            vec![(
                "MSGSTREAM_ROCKETMQ__NAME_SERVERS".into(),
                format!("[{namesrv:?}]"),
            )],
        ));
    }
    #[cfg(feature = "nsq")]
    let (runtime, server) = {
        let runtime = tokio::runtime::Runtime::new().expect("runtime");
        let server = runtime.block_on(crate::harness::nsq_cluster_server());
        (runtime, server)
    };
    #[cfg(feature = "nsq")]
    {
        let (nsqd, nsqd_http, lookupd) = server.config_addresses();
        runs.push((
            "nsq",
            vec![
                ("MSGSTREAM_NSQ__NSQD".into(), format!("{nsqd:?}")),
                ("MSGSTREAM_NSQ__NSQD_HTTP".into(), format!("{nsqd_http:?}")),
                ("MSGSTREAM_NSQ__LOOKUPD".into(), format!("{lookupd:?}")),
                ("MSGSTREAM_NSQ__EXTENSIONS".into(), "partitions".into()),
                ("MSGSTREAM_NSQ__CLUSTER".into(), "true".into()),
            ],
        ));
    }
    for (backend, env) in runs {
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let out = msgstream(&["--backend", backend, "demo", "--quiet"], &env);
        assert!(out.status.success(), "{backend}: {}", stderr(&out));
        assert!(
            demo_line(&out).ends_with(" lost=0 duplicated=0"),
            "{backend}: {}",
            stdout(&out)
        );
    }
    #[cfg(feature = "nsq")]
    drop((server, runtime));
}

/// Arguments, environment, and a word the error must contain.
type Case<'a> = (Vec<&'a str>, Vec<(&'a str, &'a str)>, &'a str);

#[test]
fn errors_are_one_line_and_a_nonzero_exit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bad_config = dir.path().join("bad.toml");
    std::fs::write(&bad_config, "[rocksmq]\npth = \"x\"\n").expect("write");
    let huge_buffer = dir.path().join("buffer.toml");
    std::fs::write(&huge_buffer, "[stream]\nbuffer = 4611686018427387904\n").expect("write");
    let garbage = dir.path().join("positions.json");
    std::fs::write(&garbage, "not json").expect("write");
    let config = bad_config.to_string_lossy();
    let huge_buffer = huge_buffer.to_string_lossy();
    let positions = garbage.to_string_lossy();
    let max = u64::MAX.to_string();
    let memory = ("MSGSTREAM_BACKEND", "memory");
    let cases: Vec<Case> = vec![
        (vec!["--config", &config, "topics"], vec![], "pth"),
        (
            vec!["topics"],
            vec![("MSGSTREAM_BACKEND", "kafka")],
            "kafka",
        ),
        (
            vec!["--config", "/nonexistent/msgstream.toml", "topics"],
            vec![],
            "nonexistent",
        ),
        (
            vec!["consume", "--channels", "a", "--from-positions", &positions],
            vec![memory],
            "positions.json",
        ),
        (
            vec!["consume", "--channels", "bad/name"],
            vec![memory],
            "bad/name",
        ),
        (
            vec!["positions", "show", &positions],
            vec![],
            "positions.json",
        ),
        (
            vec!["--config", &huge_buffer, "demo"],
            vec![memory],
            "buffer",
        ),
        (
            vec!["demo"],
            vec![memory, ("MSGSTREAM_STREAM__BUFFER", "4611686018427387904")],
            "MSGSTREAM_STREAM__BUFFER",
        ),
        (
            vec!["topics"],
            vec![memory, ("MSGSTREAM_ROCKSMQ_PATH", "/tmp/q")],
            "MSGSTREAM_ROCKSMQ_PATH",
        ),
        (
            vec![
                "produce",
                "--channels",
                "a",
                "--start-ts",
                &max,
                "--count",
                "1",
            ],
            vec![memory],
            "--start-ts",
        ),
        (
            vec![
                "bench",
                "--latency-rate",
                "1000000",
                "--latency-secs",
                "86400",
            ],
            vec![memory],
            "--latency-rate",
        ),
    ];
    for (args, env, needle) in cases {
        let out = msgstream(&args, &env);
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
fn out_of_range_options_are_usage_errors_not_panics() {
    let max = u64::MAX.to_string();
    let tib = (1u64 << 40).to_string();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["produce", "--channels", "a", "--payload-size", &max],
            "--payload-size",
        ),
        (
            vec!["produce", "--channels", "a", "--payload-size", &tib],
            "--payload-size",
        ),
        (vec!["bench", "--payload", &max], "--payload"),
        (vec!["bench", "--payload", &tib], "--payload"),
        (
            vec!["bench", "--latency-rate", "4294967296"],
            "--latency-rate",
        ),
        (
            vec![
                "bench",
                "--latency-rate",
                "1000000000",
                "--latency-secs",
                "1000000",
            ],
            "--latency-rate",
        ),
        (vec!["bench", "--channels", "0"], "--channels"),
        (vec!["bench", "--batch", &max], "--batch"),
        (vec!["demo", "--channels", "100000"], "--channels"),
        (vec!["demo", "--rounds", &max], "--rounds"),
        (
            vec!["--backend", "kafka", "topics"],
            "[possible values: rocksmq, rocketmq, nsq, memory]",
        ),
    ];
    for (args, needle) in cases {
        let mut full = vec!["--backend", "memory"];
        if args.first() == Some(&"--backend") {
            full.clear();
        }
        full.extend(&args);
        let out = msgstream(&full, &[]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(
            err.starts_with("error: ") && err.contains(needle),
            "{args:?}: {err}"
        );
    }
    let help = msgstream(&["-h"], &[]);
    assert!(
        stdout(&help).contains("[possible values: rocksmq, rocketmq, nsq, memory]"),
        "{}",
        stdout(&help)
    );
}

#[cfg(unix)]
#[test]
fn environment_that_is_not_utf8() {
    use std::os::unix::ffi::OsStrExt;
    let bad = OsStr::from_bytes(b"/tmp/\xff");
    let memory = ("MSGSTREAM_BACKEND", OsStr::new("memory"));
    let out = command(&["topics"], &[memory, ("SOME_OTHER_TOOL", bad)])
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "someone else's variable: {}",
        stderr(&out)
    );
    let out = command(&["topics"], &[memory, ("MSGSTREAM_ROCKSMQ__PATH", bad)])
        .output()
        .expect("run");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("MSGSTREAM_ROCKSMQ__PATH") && err.contains("UTF-8"),
        "{err}"
    );
}

#[test]
fn positions_show_does_not_open_the_backend() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("p.json");
    let position = msgstream_facade::msgstream::msg::MsgPosition {
        channel_name: "shown-channel".into(),
        msg_id: msgstream::mq::MessageId::from_u64(7),
        timestamp: 42,
        ..Default::default()
    };
    msgstream_facade::positions::save(&file, &[position]).expect("save");
    // The default backend, at a path that cannot be created: opening it would fail.
    let out = msgstream(
        &["positions", "show", file.to_str().expect("utf-8 path")],
        &[("MSGSTREAM_ROCKSMQ__PATH", "/proc/msgstream-no-such-dir/db")],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("shown-channel"), "{}", stdout(&out));
}

#[test]
fn ctrl_c_and_sigterm_stop_writers_promptly() {
    let endless = "1000000000000";
    let commands: [(&[&str], &str); 2] = [
        (
            &[
                "produce",
                "--channels",
                "s0",
                "--count",
                endless,
                "--payload-size",
                "0",
            ],
            "producing ",
        ),
        (
            &[
                "bench",
                "--channels",
                "1",
                "--messages",
                endless,
                "--payload",
                "0",
            ],
            "bench on memory",
        ),
    ];
    for (args, first_line) in commands {
        for sig in ["INT", "TERM"] {
            let memory = ("MSGSTREAM_BACKEND", OsStr::new("memory"));
            let mut child = spawn(&mut command(args, &[memory]));
            let err = lines(child.stderr.take().expect("stderr"));
            wait_for_line(&err, first_line);
            signal(&child, sig);
            let status = exit_within(child);
            let err = rest(&err);
            assert_eq!(status.code(), Some(130), "{args:?} {sig}: {err}");
            assert!(err.contains("interrupted"), "{args:?} {sig}: {err}");
        }
    }
}

#[test]
fn sigterm_stops_consume_and_keeps_a_good_positions_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("p.json");
    let good = "[]\nnot overwritten\n";
    std::fs::write(&file, good).expect("write");
    let memory = ("MSGSTREAM_BACKEND", OsStr::new("memory"));
    let args = ["consume", "--channels", "quiet", "--save-positions"];
    let mut child = spawn(command(&args, &[memory]).arg(&file));
    let err = lines(child.stderr.take().expect("stderr"));
    wait_for_line(&err, "consuming ");
    signal(&child, "TERM");
    let status = exit_within(child);
    let err = rest(&err);
    assert!(status.success(), "{status:?}: {err}");
    assert!(err.contains("left as it was"), "{err}");
    assert_eq!(std::fs::read_to_string(&file).expect("read"), good);
}

#[test]
fn produce_consume_positions_topics_groups() {
    if !cfg!(feature = "rocksmq") {
        return; // Each CLI run is a new process: only a persistent backend keeps data between them.
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let env = [("MSGSTREAM_ROCKSMQ__PATH", db.to_str().expect("utf-8 path"))];
    let run = |args: &[&str]| msgstream_ok(args, &env);
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
    // The three packs after the saved ones; the group's lag then says nothing is left, so no
    // wait for a fourth that would not come.
    let out = run(&[
        "consume",
        "--channels",
        "c0,c1",
        "--tt",
        "--from-positions",
        saved,
        "--max-packs",
        "3",
        "--save-positions",
        saved,
    ]);
    let packs: Vec<&str> = out.lines().filter(|l| l.starts_with("pack ")).collect();
    assert_eq!(packs.len(), 3, "{out}");
    assert!(packs[0].contains("ts 22 -> 33"), "{out}");
    let end = msgstream_facade::positions::load(saved.as_ref()).expect("positions");
    assert!(end.iter().all(|p| p.timestamp == 45), "{end:?}");
    let out = run(&["groups", "--channel", "c0"]);
    let line = out
        .lines()
        .find(|l| l.contains("msgstream-cli"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(line.ends_with(" 0"), "everything read was committed: {out}");

    let latest = dir.path().join("latest.json");
    let latest = latest.to_str().expect("utf-8 path");
    let out = run(&[
        "positions",
        "save",
        "--channels",
        "c0,absent",
        "--out",
        latest,
    ]);
    assert!(out.contains("saved 1 position(s)"), "{out}");
    let out = run(&["topics"]);
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        vec!["c0", "c1"],
        "nothing created"
    );
    let out = run(&["groups"]);
    assert!(
        !out.contains("positions"),
        "no group left by positions save: {out}"
    );

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
    let out = run(&["topics"]);
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        vec!["c0", "c1"],
        "bench cleaned up"
    );

    let out = run(&["groups", "delete", "c0", "msgstream-cli"]);
    assert_eq!(
        out.trim(),
        "deleted group \"msgstream-cli\" of channel \"c0\""
    );
    let out = run(&["groups", "--channel", "c0"]);
    assert!(!out.contains("msgstream-cli"), "{out}");
    let out = run(&["groups", "delete", "c0", "msgstream-cli"]);
    assert!(out.contains("nothing to delete"), "{out}");
    let out = run(&["topics", "delete", "c1"]);
    assert!(out.starts_with("deleted channel \"c1\""), "{out}");
    let out = run(&["topics"]);
    assert_eq!(out.lines().collect::<Vec<_>>(), vec!["c0"]);
}

#[test]
fn signals_stop_consume_cleanly_and_save_positions() {
    if !cfg!(feature = "rocksmq") {
        return; // Needs a backend that keeps data between processes.
    }
    for sig in ["INT", "TERM"] {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("db");
        let env = [("MSGSTREAM_ROCKSMQ__PATH", db.to_str().expect("utf-8 path"))];
        let args = [
            "produce",
            "--channels",
            "k0",
            "--count",
            "30",
            "--tick-every",
            "10",
        ];
        let out = msgstream(&args, &env);
        assert!(out.status.success(), "{}", stderr(&out));
        let earlier = dir.path().join("earlier.json");
        let position = msgstream_facade::msgstream::msg::MsgPosition {
            channel_name: "k0".into(),
            msg_id: msgstream::mq::MessageId::from_u64(1),
            ..Default::default()
        };
        msgstream_facade::positions::save(&earlier, &[position]).expect("save");
        let saved = dir.path().join("saved.json");
        let env = [("MSGSTREAM_ROCKSMQ__PATH", db.as_os_str())];
        let mut child = spawn(
            command(&["consume", "--channels", "k0", "--tt"], &env)
                .arg("--save-positions")
                .arg(&saved),
        );
        let out = lines(child.stdout.take().expect("stdout"));
        let err = lines(child.stderr.take().expect("stderr"));
        // Every pack delivered (4: ticks 11, 22, 33 and the final 34).
        for _ in 0..4 {
            wait_for_line(&out, "pack ");
        }
        // The database is locked by the consumer; a positions file is still readable.
        let shown = msgstream(
            &["positions", "show", earlier.to_str().expect("utf-8 path")],
            &[("MSGSTREAM_ROCKSMQ__PATH", db.to_str().expect("utf-8 path"))],
        );
        assert!(shown.status.success(), "{}", stderr(&shown));
        signal(&child, sig);
        let status = exit_within(child);
        assert!(status.success(), "{sig}: {status:?} {}", rest(&err));
        let positions =
            msgstream_facade::positions::load(&saved).expect("positions saved on the signal");
        assert_eq!(positions.len(), 1);
        assert_eq!(
            positions[0].timestamp, 34,
            "end of the last pack (final tick)"
        );
    }
}

#[test]
fn a_closed_pipe_stops_consume_quietly_and_commits_only_what_was_written() {
    if !cfg!(feature = "rocksmq") {
        return; // Needs a backend that keeps data between processes.
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let env = [("MSGSTREAM_ROCKSMQ__PATH", db.to_str().expect("utf-8 path"))];
    // More output than a pipe buffers, so the consumer is still writing when the reader leaves.
    let total = 5000u64;
    let count = total.to_string();
    let args = [
        "produce",
        "--channels",
        "p0",
        "--count",
        &count,
        "--tick-every",
        "0",
    ];
    let out = msgstream(&args, &env);
    assert!(out.status.success(), "{}", stderr(&out));
    let os_env = [("MSGSTREAM_ROCKSMQ__PATH", db.as_os_str())];
    let mut child = spawn(&mut command(&["consume", "--channels", "p0"], &os_env));
    let err = lines(child.stderr.take().expect("stderr"));
    {
        let mut head = BufReader::new(child.stdout.take().expect("stdout")).lines();
        for _ in 0..3 {
            let line = head.next().expect("a line").expect("utf-8");
            assert!(line.starts_with("p0 id="), "{line}");
        }
    } // `| head -3` exits here: the read end closes.
    let status = exit_within(child);
    let err = rest(&err);
    assert!(status.success(), "{status:?}: {err}");
    assert!(!err.contains("panicked"), "{err}");
    let shown: u64 = err
        .lines()
        .find_map(|l| {
            l.strip_prefix("consumed ")?
                .strip_suffix(" pack(s)")?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("{err}"));
    assert!(shown >= 3 && shown < total, "{shown}");
    // The message whose write failed was not committed: the group resumes right at it.
    let out = msgstream(&["consume", "--channels", "p0", "--max-packs", "1"], &env);
    assert!(out.status.success(), "{}", stderr(&out));
    let first = stdout(&out);
    assert!(
        first.contains(&format!(" ts={} ", shown + 1)),
        "after {shown} shown: {first}"
    );
}
