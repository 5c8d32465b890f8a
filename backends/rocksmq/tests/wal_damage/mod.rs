//! The scenario of issue 42 for the WAL-damage recovery tests: a child process produces 30,000
//! messages under `Buffered` durability and is SIGKILLed; the write-ahead log, which holds all
//! of them (nothing was flushed into tables), is then truncated to half its length, as a
//! damaged disk or a power loss may leave it.
//!
//! The child is the test binary itself, re-executed with [`CHILD_ENV`] set and filtered to the
//! test that calls [`child_body`].

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use msgstream::mq::ProducerMessage;
use msgstream_rocksmq::{Durability, Recovery, Rocksmq, RocksmqOptions};

pub const CHILD_ENV: &str = "WAL_DAMAGE_CHILD_DB";
pub const TOPIC: &str = "t";
pub const MESSAGES: u64 = 30_000;

pub fn options(path: &Path, recovery: Recovery) -> RocksmqOptions {
    let mut options = RocksmqOptions::new(path);
    options.retention_interval = None;
    options.sync = Durability::Buffered;
    options.recovery = recovery;
    options
}

/// The child's body, a no-op unless the parent started it: produces [`MESSAGES`] messages,
/// has the queue record the ids it gave out, says `READY` and waits to be killed.
pub fn child_body() {
    let Some(path) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let mq = Rocksmq::open(options(path.as_ref(), Recovery::Report)).expect("child open");
    mq.create_topic(TOPIC).expect("topic");
    runtime.block_on(async {
        for chunk in 0..MESSAGES / 100 {
            let batch = (0..100)
                .map(|i| ProducerMessage::new(format!("message {}", chunk * 100 + i).into_bytes()))
                .collect();
            mq.produce(TOPIC, batch).await.expect("produce");
        }
    });
    mq.record_promised_ids().expect("ledger");
    let mut out = std::io::stdout().lock();
    writeln!(out, "READY").expect("stdout");
    out.flush().expect("flush");
    loop {
        std::thread::park();
    }
}

/// Runs the child on `dir` (through test `child_test` of this binary), SIGKILLs it once it is
/// ready, and truncates its newest write-ahead log file to half its length.
pub fn crash_and_truncate_wal(dir: &Path, child_test: &str) {
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", child_test, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn child");
    let stdout = child.stdout.take().expect("child stdout");
    let ready = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .any(|line| line.contains("READY"));
    child.kill().expect("SIGKILL");
    child.wait().expect("reap child");
    assert!(ready, "the child never got ready");
    let wal = newest_wal(dir);
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&wal)
        .expect("open the WAL");
    let length = file.metadata().expect("WAL size").len();
    assert!(
        length > 500_000,
        "the WAL holds the messages: {length} bytes"
    );
    file.set_len(length / 2).expect("truncate the WAL");
}

fn newest_wal(dir: &Path) -> PathBuf {
    std::fs::read_dir(dir)
        .expect("read dir")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "log"))
        .max()
        .expect("a WAL file")
}
