//! At-least-once through the subscription alone: a tt consumer is SIGKILLed at a random pack,
//! restarted from its subscription (no stored positions), and must get again every message of
//! every pack it had not finished, and nothing of the packs before.
//!
//! The consumer is this test binary re-executed with `MSGSTREAM_RESTART_CHILD` naming a config
//! file; it prints `PACK <end_ts> <rows>` for each pack it is handed, then, once the parent
//! writes a line to its stdin, asks for the next one (which commits the one before). The parent reads those lines, kills the child after a random
//! number of packs, and restarts it; the seed is printed so a failure can be replayed with
//! `MSGSTREAM_RESTART_SEED`.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

use msgstream::mq::InitialPosition;
use msgstream::msg::{MsgPack, TsMsg};
use msgstream::testkit::{insert, row_id};
use msgstream_facade::{Config, Factory};

const CHILD_ENV: &str = "MSGSTREAM_RESTART_CHILD";
const CHANNELS_ENV: &str = "MSGSTREAM_RESTART_CHANNELS";
const SEED_ENV: &str = "MSGSTREAM_RESTART_SEED";
const PACKS: u64 = 30;
const ROUNDS: usize = 3;

/// The packs every run must see, in order: pack `i` ends at `10 i` and holds three rows per
/// channel, channel a first.
fn expected() -> Vec<(u64, Vec<i64>)> {
    (1..=PACKS)
        .map(|i| {
            let rows = (0..2)
                .flat_map(|c| (0..3).map(move |r| (i * 100 + c * 10 + r) as i64))
                .collect();
            (i * 10, rows)
        })
        .collect()
}

async fn produce(config: &Config, channels: &[&str]) {
    let factory = Factory::new(config).await.expect("factory");
    let mut out = factory.tt_msg_stream();
    out.as_producer(channels).await.expect("producer");
    for (end, rows) in expected() {
        let mut msgs: Vec<TsMsg> = rows
            .iter()
            .enumerate()
            .map(|(n, row)| insert(*row, end - 5 + (n as u64 % 3), (n / 3) as u32))
            .collect();
        for channel in 0..2u32 {
            msgs.push(TsMsg::time_tick(end).with_hash_keys(vec![channel]));
        }
        out.produce(&MsgPack {
            msgs,
            ..MsgPack::default()
        })
        .await
        .expect("produce");
    }
    out.close().await;
    factory.close().await;
}

/// Not a test on its own: the consumer child, a no-op unless the parent started it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_child() {
    let Some(path) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let config = Config::load(Some(path.as_ref())).expect("child config");
    let names = std::env::var(CHANNELS_ENV).expect("channel names");
    let channels: Vec<&str> = names.split(',').collect();
    let factory = Factory::new(&config).await.expect("child factory");
    let mut stream = factory.tt_msg_stream();
    stream
        .as_consumer(&channels, "restart", InitialPosition::Earliest)
        .await
        .expect("as_consumer");
    let stdout = std::io::stdout();
    while let Some(pack) = stream.next_pack().await {
        let pack = pack.expect("pack");
        let rows: Vec<String> = pack.msgs.iter().map(|m| row_id(m).to_string()).collect();
        {
            let mut out = stdout.lock();
            writeln!(out, "PACK {} {}", pack.end_ts, rows.join(",")).expect("stdout");
            out.flush().expect("flush");
        }
        if pack.end_ts >= PACKS * 10 {
            break;
        }
        // The parent says when to ask for the next pack (which commits this one), so a kill
        // lands with this pack handed over and not committed, whatever the machine's pace.
        let mut go = String::new();
        tokio::task::block_in_place(|| std::io::stdin().read_line(&mut go)).expect("stdin");
    }
    stream.close().await;
    writeln!(stdout.lock(), "END").expect("stdout");
}

fn random(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// Runs the child on `config_file`; kills it once it printed `kill_after` packs (if given),
/// after `before_kill` returned. Returns the packs it printed completely.
fn run_child(
    config_file: &std::path::Path,
    channels: &[&str],
    kill_after: Option<usize>,
    before_kill: &dyn Fn(&[&str]),
) -> Vec<(u64, Vec<i64>)> {
    let exe = std::env::current_exe().expect("test binary");
    let mut child = Command::new(exe)
        .args([
            "--exact",
            "restart::restart_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, config_file)
        .env(CHANNELS_ENV, channels.join(","))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn child");
    let stdout = child.stdout.take().expect("child stdout");
    let mut stdin = child.stdin.take().expect("child stdin");
    // A child that hands over no pack for a minute is stuck (a message lost, a pack that cannot
    // complete): killed, so the test fails instead of hanging.
    let (alive, watched) = std::sync::mpsc::channel::<()>();
    let stuck = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watchdog = {
        let (pid, stuck) = (child.id().to_string(), stuck.clone());
        std::thread::spawn(move || loop {
            match watched.recv_timeout(std::time::Duration::from_secs(60)) {
                Ok(()) => {}
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    stuck.store(true, std::sync::atomic::Ordering::Release);
                    let _ = Command::new("kill").args(["-9", &pid]).status();
                    return;
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return,
            }
        })
    };
    let mut packs = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let Ok(line) = line else { break };
        let Some((_, pack)) = line.split_once("PACK ") else {
            continue;
        };
        let Some((end, rows)) = pack.split_once(' ') else {
            continue;
        };
        let (Ok(end), Ok(rows)) = (
            end.parse::<u64>(),
            rows.split(',')
                .map(str::parse::<i64>)
                .collect::<Result<Vec<_>, _>>(),
        ) else {
            continue;
        };
        packs.push((end, rows));
        let _ = alive.send(());
        if Some(packs.len()) == kill_after {
            before_kill(channels);
            child.kill().expect("SIGKILL");
        } else {
            // Next pack, please (the child may have ended: then nothing reads this).
            let _ = writeln!(stdin, "go").and_then(|()| stdin.flush());
        }
    }
    let status = child.wait().expect("reap child");
    drop(alive);
    let _ = watchdog.join();
    assert!(
        !stuck.load(std::sync::atomic::Ordering::Acquire),
        "the child handed over no pack for 60 s after {} packs",
        packs.len()
    );
    if kill_after.is_none() {
        assert!(status.success(), "the last run ends by itself: {status}");
    }
    packs
}

/// The property, on one backend whose state outlives a process (given by its config file).
/// `before_kill` runs before each SIGKILL, with the channel names.
async fn restart_from_subscription(config_text: &str, before_kill: &dyn Fn(&[&str])) {
    let dir = tempfile::tempdir().expect("tempdir");
    let config_file = dir.path().join("msgstream.toml");
    std::fs::write(&config_file, config_text).expect("config file");
    let config = Config::load(Some(&config_file)).expect("config");
    let tag = msgstream::testkit::unique("restart");
    let names = [format!("{tag}-a"), format!("{tag}-b")];
    let channels = [names[0].as_str(), names[1].as_str()];
    produce(&config, &channels).await;
    let expected = expected();
    let mut seed = std::env::var(SEED_ENV)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        })
        | 1;
    eprintln!("restart test seed: {seed} (replay with {SEED_ENV}={seed})");
    // Per channel, the rows of every pack in order (channel a's rows come first in a pack).
    let rows_of = |channel: usize, rows: &[i64]| -> Vec<i64> {
        rows.iter()
            .copied()
            .filter(|r| (r / 10) % 10 == channel as i64)
            .collect()
    };
    let all_rows: Vec<Vec<i64>> = (0..2)
        .map(|c| {
            expected
                .iter()
                .flat_map(|(_, rows)| rows_of(c, rows))
                .collect()
        })
        .collect();
    // Packs handed over so far: a restart must resume each channel at the last one or the one
    // after it (channels commit one after the other, so a kill between two commits leaves them
    // one pack apart), never later, never earlier where acks are durable, and lose nothing
    // from there on.
    let mut handed = 0usize;
    for round in 0..=ROUNDS {
        // A child can reach the last pack before its kill number; once every pack was handed
        // over (and the last commit may or may not have happened) there is nothing left that a
        // restart must deliver, so stop there.
        if handed == expected.len() {
            break;
        }
        let kill_after = (round < ROUNDS).then(|| 1 + (random(&mut seed) % 6) as usize);
        let packs = run_child(&config_file, &channels, kill_after, before_kill);
        assert!(
            !packs.is_empty(),
            "round {round}: the child printed no pack"
        );
        for (channel, expected_rows) in all_rows.iter().enumerate() {
            let rows: Vec<i64> = packs
                .iter()
                .flat_map(|(_, r)| rows_of(channel, r))
                .collect();
            let Some(first) = rows.first() else { continue };
            let start = expected_rows
                .iter()
                .position(|r| r == first)
                .unwrap_or_else(|| panic!("round {round}: unexpected row {first}"));
            let per_pack = expected_rows.len() / expected.len();
            let allowed = [handed.saturating_sub(1) * per_pack, handed * per_pack];
            // An ack that returned survives the kill: the restart resumes at the last pack
            // handed over or the one after it.
            assert!(
                allowed.contains(&start),
                "round {round}, channel {channel}: resumed at row {start}, after {handed} packs were handed over"
            );
            assert_eq!(
                rows[..],
                expected_rows[start..start + rows.len()],
                "round {round}, channel {channel}: rows in order, nothing lost"
            );
        }
        let last = packs.last().map_or(0, |(end, _)| *end);
        handed = (last / 10) as usize;
    }
    assert_eq!(
        handed,
        expected.len(),
        "the runs together reached the last pack"
    );
}

#[cfg(feature = "rocksmq")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rocksmq_restart_from_subscription_after_sigkill() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db").display().to_string();
    restart_from_subscription(
        &format!("backend = \"rocksmq\"\n[rocksmq]\npath = {db:?}\n"),
        &|_| {},
    )
    .await;
}

#[cfg(feature = "rocketmq")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rocketmq_restart_from_subscription_after_sigkill() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let namesrv = msgstream_rocketmq::testserver::shared().namesrv.clone();
    restart_from_subscription(
        &format!(
            "backend = \"rocketmq\"\n[rocketmq]\nname_servers = [{namesrv:?}]\npersist_interval_ms = 200\n"
        ),
        &|_| {},
    )
    .await;
}

/// In a Youzan cluster (consume offsets) the tt stream reads through ordered channels and its
/// acks move the subscription's channel over HTTP, answered by nsqd: durable as on the other
/// backends. (Upstream nsqd redelivers a killed consumer's messages only after they time out,
/// in no order: that mode promises at-least-once of messages, not of packs.)
#[cfg(feature = "nsq")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nsq_cluster_restart_from_subscription_after_sigkill() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let server = crate::harness::nsq_cluster_server().await;
    let (nsqd, nsqd_http, lookupd) = server.config_addresses();
    let config = format!(
        "backend = \"nsq\"\n[nsq]\nnsqd = {nsqd:?}\nnsqd_http = {nsqd_http:?}\nlookupd = {lookupd:?}\n\
         extensions = \"partitions\"\ncluster = true\npartitions = 2\npartition = 1\nmax_in_flight = 64\n",
    );
    restart_from_subscription(&config, &|_| {}).await;
    drop(server);
}

/// A standalone Youzan nsqd (no consume offsets): the tt stream reads through the spool, as
/// upstream (below); the kills land once everything is spooled.
#[cfg(feature = "nsq")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nsq_partitions_restart_from_subscription_after_sigkill() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let server = crate::harness::nsq_server(true).await;
    let spool = tempfile::tempdir().expect("tempdir");
    let config = format!(
        "backend = \"nsq\"\n[nsq]\nnsqd = [{:?}]\nnsqd_http = [{:?}]\nextensions = \"partitions\"\nspool_dir = {:?}\n",
        server.tcp_addr().to_string(),
        server.http_addr().to_string(),
        spool.path().display().to_string(),
    );
    let http = server.http_addr();
    restart_from_subscription(&config, &|channels| {
        for channel in channels {
            wait_until_spooled(http, channel);
        }
    })
    .await;
    drop(server);
}

/// Upstream nsqd: the tt stream reads each channel one message in flight and FINs each once it
/// is in the subscription's spool, which keeps it until the ack; a restart hands over the
/// spool's unacked messages first. Each kill lands once the child's pumps spooled everything
/// (nothing in flight on nsqd): the one message a kill may catch in flight comes back only
/// after its timeout, behind newer ones (README, *Delivery guarantees*), which no client of
/// upstream nsqd can prevent.
#[cfg(feature = "nsq")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nsq_upstream_restart_from_subscription_after_sigkill() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let server = crate::harness::nsq_server(false).await;
    let spool = tempfile::tempdir().expect("tempdir");
    let config = format!(
        "backend = \"nsq\"\n[nsq]\nnsqd = [{:?}]\nnsqd_http = [{:?}]\nspool_dir = {:?}\n",
        server.tcp_addr().to_string(),
        server.http_addr().to_string(),
        spool.path().display().to_string(),
    );
    let http = server.http_addr();
    restart_from_subscription(&config, &|channels| {
        for channel in channels {
            wait_until_spooled(http, channel);
        }
    })
    .await;
    drop(server);
}

/// Polls nsqd's `/stats` until the subscription's channel of `topic` holds nothing queued or
/// in flight.
#[cfg(feature = "nsq")]
fn wait_until_spooled(http: std::net::SocketAddr, topic: &str) {
    use std::io::Read;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let mut stream = std::net::TcpStream::connect(http).expect("nsqd http");
        write!(
            stream,
            "GET /stats?format=json&topic={topic}&channel=restart HTTP/1.1\r\nHost: nsqd\r\nConnection: close\r\n\r\n"
        )
        .expect("request");
        let mut response = String::new();
        stream.read_to_string(&mut response).expect("response");
        let body = response.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        let stats: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
        let stats = stats.get("data").unwrap_or(&stats);
        let channel = stats["topics"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|t| t["topic_name"] == topic)
            .flat_map(|t| t["channels"].as_array().cloned().unwrap_or_default())
            .find(|c| c["channel_name"] == "restart");
        if channel.is_some_and(|c| c["depth"] == 0 && c["in_flight_count"] == 0) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{topic}/restart still holds messages on nsqd: {body}"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}
