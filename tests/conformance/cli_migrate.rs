//! `msgstream migrate` as a user runs it: killed with SIGKILL 20 times at random moments and
//! run again, it leaves each message exactly once at the target and translates a stopped tt
//! consumer's positions; `--follow` copies until Ctrl-C. (Bad input: `cli_migrate_input.rs`.)
//!
//! The kill test runs on the real backends each a source once and a target once (rocksmq →
//! RocketMQ → NSQ cluster → rocksmq); the library tests (`migrate.rs`) cover every pair.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use msgstream::mq::Client;
use msgstream_facade::{positions as positions_file, Config, Factory};

use crate::cli::{command, exit_within, lines, msgstream, spawn, stderr, stdout};
use crate::migrate_data::{
    assert_copied_exactly, channel_names, comparable, produce_rounds, read_packs, ROUNDS,
};

const SEED_ENV: &str = "MSGSTREAM_MIGRATE_SEED";
const KILLS: usize = 20;

/// A backend's store for child processes: its config file, and what keeps its server alive.
pub(crate) struct Store {
    pub(crate) config: PathBuf,
    pub(crate) _keep: Box<dyn std::any::Any + Send>,
}

impl Store {
    pub(crate) async fn factory(&self) -> Factory {
        Factory::new(&Config::load(Some(&self.config)).expect("config"))
            .await
            .expect("factory")
    }
}

pub(crate) fn write_config(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("config file");
    path
}

#[cfg(feature = "rocksmq")]
pub(crate) fn rocksmq_store(dir: &Path, name: &str) -> Store {
    let db = dir.join(format!("{name}-db")).display().to_string();
    Store {
        config: write_config(
            dir,
            &format!("{name}.toml"),
            &format!("backend = \"rocksmq\"\n[rocksmq]\npath = {db:?}\n"),
        ),
        _keep: Box::new(()),
    }
}

#[cfg(feature = "rocketmq")]
pub(crate) fn rocketmq_store(dir: &Path, name: &str) -> Store {
    let namesrv = msgstream_rocketmq::testserver::shared().namesrv.clone();
    Store {
        config: write_config(
            dir,
            &format!("{name}.toml"),
            &format!(
                "backend = \"rocketmq\"\n[rocketmq]\nname_servers = [{namesrv:?}]\npersist_interval_ms = 200\n"
            ),
        ),
        _keep: Box::new(()),
    }
}

#[cfg(feature = "nsq")]
pub(crate) async fn nsq_cluster_store(dir: &Path, name: &str) -> Store {
    let server = crate::harness::nsq_cluster_server().await;
    let (nsqd, nsqd_http, lookupd) = server.config_addresses();
    let spool = dir.join(format!("{name}-spool")).display().to_string();
    Store {
        config: write_config(
            dir,
            &format!("{name}.toml"),
            &format!(
                "backend = \"nsq\"\n[nsq]\nnsqd = {nsqd:?}\nnsqd_http = {nsqd_http:?}\nlookupd = {lookupd:?}\n\
                 extensions = \"partitions\"\ncluster = true\npartitions = 2\npartition = 1\n\
                 max_in_flight = 64\nspool_dir = {spool:?}\n"
            ),
        ),
        _keep: Box::new(server),
    }
}

fn random(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

fn seed() -> u64 {
    let seed = std::env::var(SEED_ENV)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        })
        | 1;
    eprintln!("migrate kill test seed: {seed} (replay with {SEED_ENV}={seed})");
    seed
}

pub(crate) fn migrate_args<'a>(
    source: &'a Store,
    target: &'a Store,
    channels: &'a str,
) -> Vec<&'a str> {
    vec![
        "migrate",
        "--from",
        source.config.to_str().expect("utf-8 path"),
        "--to",
        target.config.to_str().expect("utf-8 path"),
        "--channels",
        channels,
    ]
}

/// The test through the command line: positions saved after 10 packs on `source`,
/// 20 migrations SIGKILLed at random moments, one run to the end translating the positions;
/// then each message is once at the target and packs 11-20 resume there.
async fn killed_migrations_then_completed(source: Store, target: Store) {
    let dir = tempfile::tempdir().expect("tempdir");
    let channels = channel_names("migk");
    let list = channels.join(",");
    let (whole, saved) = {
        let factory = source.factory().await;
        let client = factory.client();
        // Enough messages that a run takes a good while at three a write.
        produce_rounds(&client, &channels, 1..=ROUNDS, 30).await;
        let whole = read_packs(&client, &channels, "whole", None, ROUNDS as usize).await;
        let stopped = read_packs(&client, &channels, "stopped", None, 10).await;
        factory.close().await;
        (whole, stopped[9].end_positions.clone())
    };
    let saved_file = dir.path().join("source-positions.json");
    positions_file::save(&saved_file, &saved).expect("save positions");
    let mut seed = seed();
    let mut args = migrate_args(&source, &target, &list);
    args.extend(["--batch", "3"]);
    let mut mid_copy = 0;
    for kill in 0..KILLS {
        let mut child = command(&args, &[])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn msgstream");
        let out = lines(child.stdout.take().expect("stdout"));
        // The moment of the kill is the point of the test: a random one, in one run of four
        // while the command starts and looks for where to resume, else while it copies (its
        // first line says it began).
        let while_copying = !random(&mut seed).is_multiple_of(4);
        let delay =
            Duration::from_millis(random(&mut seed) % if while_copying { 150 } else { 300 });
        if while_copying {
            let begun = tokio::task::block_in_place(|| {
                out.recv_timeout(Duration::from_secs(60))
                    .is_ok_and(|line| line.starts_with("migrate: "))
            });
            mid_copy += usize::from(begun);
        }
        tokio::time::sleep(delay).await;
        child.kill().expect("SIGKILL");
        let status = child.wait().expect("reap");
        // Killed, or finished just before the signal (a run may complete the copy): never an
        // error exit.
        assert!(
            status.success() || std::os::unix::process::ExitStatusExt::signal(&status) == Some(9),
            "kill {kill}: the migration ended with {status}"
        );
    }
    assert!(mid_copy > 0, "some kills landed while copying");
    let out_file = dir.path().join("target-positions.json");
    args.extend([
        "--positions",
        saved_file.to_str().expect("utf-8"),
        "--positions-out",
        out_file.to_str().expect("utf-8"),
    ]);
    let started = Instant::now();
    let out =
        tokio::task::block_in_place(|| msgstream(&args, &[("RUST_LOG", "msgstream_facade=debug")]));
    std::fs::write(dir.path().join("last.log"), stderr(&out)).expect("log");
    eprintln!("logs in {}", dir.path().display());
    std::mem::forget(dir);
    assert!(out.status.success(), "the last run: {}", stderr(&out));
    eprintln!(
        "the last run took {:?}: {}",
        started.elapsed(),
        stdout(&out)
    );
    let text = stdout(&out);
    assert!(
        text.lines()
            .any(|l| l.starts_with("migrated ") && l.contains(" msgs/s, ")),
        "throughput printed: {text}"
    );
    assert!(
        text.contains("positions: 4 translated"),
        "positions translated: {text}"
    );
    let translated = positions_file::load(&out_file).expect("translated positions");
    let (from, to) = (source.factory().await, target.factory().await);
    let (src, dst): (Arc<dyn Client>, Arc<dyn Client>) = (from.client(), to.client());
    assert_copied_exactly(&src, &dst, &channels).await;
    let resumed = read_packs(&dst, &channels, "resumed", Some(&translated), 10).await;
    assert_eq!(
        comparable(&resumed, true),
        comparable(&whole[10..], false),
        "packs 11-20 on the target are those of the source"
    );
    from.close().await;
    to.close().await;
}

#[cfg(all(feature = "rocksmq", feature = "rocketmq"))]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rocksmq_to_rocketmq_killed_20_times() {
    let dir = tempfile::tempdir().expect("tempdir");
    killed_migrations_then_completed(
        rocksmq_store(dir.path(), "source"),
        rocketmq_store(dir.path(), "target"),
    )
    .await;
}

#[cfg(all(feature = "rocketmq", feature = "nsq"))]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rocketmq_to_nsq_cluster_killed_20_times() {
    let dir = tempfile::tempdir().expect("tempdir");
    killed_migrations_then_completed(
        rocketmq_store(dir.path(), "source"),
        nsq_cluster_store(dir.path(), "target").await,
    )
    .await;
}

#[cfg(all(feature = "nsq", feature = "rocksmq"))]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nsq_cluster_to_rocksmq_killed_20_times() {
    let dir = tempfile::tempdir().expect("tempdir");
    killed_migrations_then_completed(
        nsq_cluster_store(dir.path(), "source").await,
        rocksmq_store(dir.path(), "target"),
    )
    .await;
}

/// `--follow` copies what the source gets while it runs, says when it caught up, and ends on
/// Ctrl-C with everything copied and the throughput printed.
#[cfg(all(feature = "nsq", feature = "rocksmq"))]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follow_until_ctrl_c() {
    let dir = tempfile::tempdir().expect("tempdir");
    let source = nsq_cluster_store(dir.path(), "source").await;
    let target = rocksmq_store(dir.path(), "target");
    let channels = channel_names("migc");
    let list = channels.join(",");
    let factory = source.factory().await;
    let client = factory.client();
    produce_rounds(&client, &channels, 1..=3, 2).await;
    let mut args = migrate_args(&source, &target, &list);
    args.push("--follow");
    let mut running = spawn(&mut command(&args, &[]));
    let out = lines(running.stdout.take().expect("stdout"));
    let wait_for = |line: &str| {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match out.recv_timeout(left) {
                Ok(l) if l == line => return,
                Ok(l) => seen.push(l),
                Err(e) => panic!("no line {line:?} ({e}); got {seen:?}"),
            }
        }
    };
    tokio::task::block_in_place(|| wait_for("caught up: 36 messages copied"));
    produce_rounds(&client, &channels, 4..=6, 2).await;
    tokio::task::block_in_place(|| wait_for("caught up: 72 messages copied"));
    let status = std::process::Command::new("kill")
        .args(["-INT", &running.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let status = tokio::task::block_in_place(|| exit_within(running));
    assert!(
        status.success(),
        "Ctrl-C ends a followed migration: {status}"
    );
    let rest: Vec<String> = out.iter().collect();
    assert!(
        rest.iter()
            .any(|l| l.starts_with("migrated 72 messages ") && l.contains(" msgs/s, ")),
        "throughput printed: {rest:?}"
    );
    let to = target.factory().await;
    assert_copied_exactly(&client, &to.client(), &channels).await;
    to.close().await;
    factory.close().await;
}
