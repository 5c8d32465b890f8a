//! Crash test: a child process produces in a loop and prints each acknowledged id; the parent
//! SIGKILLs it at a random moment, reopens the database and checks that every acknowledged id is
//! there, in order, with no gaps and no duplicates. Repeated on the same database.
//!
//! The child is this test binary itself, re-executed with `CRASH_CHILD_DB` set and filtered to
//! the `child_producer` test.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

use msgstream::mq::{Client, ProducerMessage};
use msgstream_rocksmq::{Rocksmq, RocksmqClient, RocksmqOptions};

const CHILD_ENV: &str = "CRASH_CHILD_DB";
const TOPIC: &str = "crash";
const ROUNDS: usize = 5;

fn options(path: &std::path::Path) -> RocksmqOptions {
    let mut options = RocksmqOptions::new(path);
    options.retention_interval = None;
    options
}

/// The payload of message `id`: its decimal id, so the parent can check content as well.
fn payload(id: u64) -> Vec<u8> {
    format!("message {id}").into_bytes()
}

/// Not a test on its own: the child's body, a no-op unless the parent started it.
#[test]
fn child_producer() {
    let Some(path) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let mq = Rocksmq::open(options(path.as_ref())).expect("child open");
        mq.create_topic(TOPIC).expect("topic");
        // Single messages also go through the mq producer's `send`, which has a path of its
        // own (no batch vector): its acknowledgements must be as durable.
        let producer = RocksmqClient::from(mq.clone())
            .create_producer(TOPIC)
            .await
            .expect("producer");
        let mut next = mq.latest_message_id(TOPIC).expect("latest").unwrap_or(0) + 1;
        let stdout = std::io::stdout();
        for round in 0u64.. {
            let size = 1 + (round % 7) as usize;
            let ids = if size == 1 || round % 7 == 3 {
                let sent = producer.send(ProducerMessage::new(payload(next))).await;
                let id = sent.expect("send").as_u64().expect("a rocksmq id");
                id..id + 1
            } else {
                let batch = (0..size)
                    .map(|i| ProducerMessage::new(payload(next + i as u64)))
                    .collect();
                mq.produce(TOPIC, batch).await.expect("produce")
            };
            assert_eq!(ids.start, next, "ids continue after a crash");
            next = ids.end;
            let mut out = stdout.lock();
            for id in ids {
                writeln!(out, "ACK {id}").expect("stdout");
            }
            out.flush().expect("flush");
        }
    });
}

/// While the child holds the database, opening it here is a clear error, not a panic.
fn assert_locked_by_child(path: &std::path::Path) {
    match Rocksmq::open(options(path)) {
        Err(msgstream::Error::Backend { message, .. }) => {
            assert!(message.contains("locked"), "{message}")
        }
        other => panic!("expected the child's lock, got {other:?}"),
    }
}

/// A small xorshift seeded from the clock: a different kill moment on every run.
fn random(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

#[tokio::test]
async fn every_acknowledged_id_survives_sigkill() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut seed = std::env::var("CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        })
        | 1;
    eprintln!("crash test seed: {seed} (replay with CRASH_SEED={seed})");
    let exe = std::env::current_exe().expect("test binary");
    let mut max_acked = 0;
    for round in 0..ROUNDS {
        let kill_after = 1 + random(&mut seed) % 3000;
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "child_producer",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn child");
        let stdout = child.stdout.take().expect("child stdout");
        let mut lines = BufReader::new(stdout).lines();
        let mut acked = Vec::new();
        // Kill once the child has acknowledged `kill_after` ids: a random moment in its loop.
        while let Some(Ok(line)) = lines.next() {
            // libtest may print "test child_producer ... " without a newline before the output.
            let ack = line.split_once("ACK ").map(|(_, id)| id.parse::<u64>());
            if let Some(Ok(id)) = ack {
                if acked.is_empty() {
                    assert_locked_by_child(dir.path());
                }
                acked.push(id);
                if acked.len() as u64 == kill_after {
                    child.kill().expect("SIGKILL");
                }
            }
        }
        child.wait().expect("reap child");
        // Lines printed before the kill are acknowledged too; a torn last line is not parsed.
        assert!(
            !acked.is_empty(),
            "round {round}: the child acknowledged nothing"
        );
        assert!(
            acked.windows(2).all(|w| w[1] == w[0] + 1),
            "acks are consecutive"
        );
        assert_eq!(
            acked[0],
            max_acked + 1,
            "round {round}: the child resumed after the survivors"
        );
        max_acked = *acked.last().unwrap_or(&max_acked);

        let mq = Rocksmq::open(options(dir.path())).expect("reopen after SIGKILL");
        let mut reader = mq.reader(TOPIC, 0).expect("reader");
        let stored = reader.read(usize::MAX).expect("read");
        for (expected, message) in (1u64..).zip(&stored) {
            assert_eq!(
                message.id, expected,
                "round {round}: in order, no gap, no duplicate"
            );
            assert_eq!(
                message.payload.as_ref(),
                payload(expected),
                "round {round}: content"
            );
        }
        let last = stored.last().map_or(0, |m| m.id);
        assert!(
            last >= max_acked,
            "round {round}: acked {max_acked} but only {last} survived"
        );
        max_acked = last;
        mq.close();
    }
}
