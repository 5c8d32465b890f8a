//! Test servers (feature `testserver`): a real rocketmq-rust name server and brokers on free
//! loopback ports with a temporary store, or an already running cluster named by
//! `MSGSTREAM_ROCKETMQ_NAMESRV`. For this crate's tests and benchmark and the facade's
//! conformance suite; a harness, so failures panic with a message saying what to do.
//!
//! Servers run under a small `sh` guard that kills them when our end of its stdin closes, so
//! they die with the test process even when it never runs destructors (shared clusters live in
//! statics). The binaries come from `scripts/install-rocketmq.sh`; without them every caller
//! fails and says so (RocketMQ tests never skip silently).

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::{Admin, RocketMqConfig};

const INSTALL_HINT: &str = "run scripts/install-rocketmq.sh (installs rocketmq-namesrv-rust and rocketmq-broker-rust \
     into /var/cache/msgstream/rocketmq/bin), set MSGSTREAM_ROCKETMQ_BIN to their directory, or point \
     MSGSTREAM_ROCKETMQ_NAMESRV at a running cluster";

struct Server {
    guard: Child,
    stdin: Option<ChildStdin>,
}

impl Server {
    fn spawn(bin: &Path, args: &[String], run: &Path, log: &str) -> Server {
        let out = std::fs::File::create(run.join(log)).expect("log file");
        let err = out.try_clone().expect("log file");
        let mut guard = Command::new("sh")
            .arg("-c")
            .arg("\"$0\" \"$@\" & child=$!; read _; kill -9 $child 2>/dev/null; wait $child")
            .arg(bin)
            .args(args)
            .env("HOME", run.join("home"))
            .env("ROCKETMQ_HOME", run.join("home"))
            .env("RUST_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}; {INSTALL_HINT}", bin.display()));
        let stdin = guard.stdin.take();
        Server { guard, stdin }
    }

    /// Kills the server (SIGKILL) and waits until it is gone.
    fn kill(&mut self) {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = stdin.write_all(b"\n");
        }
        let _ = self.guard.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Name servers plus brokers `broker-a`, `broker-b`, … (all masters of one cluster, each
/// registered with every name server).
pub struct Cluster {
    /// The first name server's address.
    pub namesrv: String,
    /// Every name server's address.
    pub name_servers: Vec<String>,
    /// Broker addresses as the name servers route them, in name order.
    pub brokers: Vec<String>,
    /// Where each broker listens (its routed address unless started with
    /// [`Cluster::start_advertised`]).
    pub broker_listen: Vec<String>,
    run: Option<PathBuf>,
    bin: PathBuf,
    namesrv_procs: Vec<Option<Server>>,
    broker_procs: Vec<Option<Server>>,
    /// Deletes the run directory once every process using it is gone (statics are never
    /// dropped, so this cannot be a destructor).
    _cleanup: Option<(Child, ChildStdin)>,
}

/// Starts the guard that removes `run` after our end of its stdin closes and no process
/// names the directory in its command line any more.
fn cleanup_guard(run: &Path) -> (Child, ChildStdin) {
    let mut guard = Command::new("sh")
        .arg("-c")
        .arg("read _; while pgrep -f -- \"$0/\" >/dev/null; do sleep 0.05; done; rm -rf -- \"$0\"")
        .arg(run)
        .stdin(Stdio::piped())
        .spawn()
        .expect("cleanup guard");
    let stdin = guard.stdin.take().expect("piped stdin");
    (guard, stdin)
}

fn bin_dir() -> PathBuf {
    let dir = std::env::var_os("MSGSTREAM_ROCKETMQ_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/msgstream/rocketmq/bin"));
    for name in ["rocketmq-namesrv-rust", "rocketmq-broker-rust"] {
        assert!(
            dir.join(name).is_file(),
            "the RocketMQ tests need {} but it is missing; {INSTALL_HINT}",
            dir.join(name).display()
        );
    }
    dir
}

/// A port the servers can bind later: taken below the kernel's ephemeral range (32768 and up
/// on Linux), so no client socket of this or another process is handed it in between, which
/// port 0 allows. Checked free at pick time; the start is spread by process id and clock.
fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    const LOW: u32 = 20_000;
    const SPAN: u32 = 12_000;
    let seed = std::process::id().wrapping_mul(7919)
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
    loop {
        let step = NEXT.fetch_add(1, Ordering::Relaxed).wrapping_mul(7);
        let port = LOW + seed.wrapping_add(step) % SPAN;
        let Ok(port) = u16::try_from(port) else {
            continue;
        };
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// A broker port P with P-2 (fast channel) and P+1 (HA) free too.
fn broker_port() -> u16 {
    loop {
        let p = free_port();
        if !(1030..=65000).contains(&p) {
            continue;
        }
        let all: Vec<_> = [p - 2, p, p + 1]
            .iter()
            .map(|q| TcpListener::bind(("127.0.0.1", *q)))
            .collect();
        if all.iter().all(Result::is_ok) {
            return p;
        }
    }
}

fn wait_tcp(addr: &str, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while TcpStream::connect(addr).is_err() {
        assert!(
            Instant::now() < deadline,
            "{what} at {addr} did not start listening"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// rocketmq-rust 1.0.0's store stops writing when its disk is this full, counting blocks
/// reserved for root as used (`(total - available) / total`, not `df`'s percentage), and a broker
/// that cannot write fails its startup; its own setting (`diskSpaceWarningLevelRatio`) is capped
/// at 90 %.
const DISK_FULL_RATIO: f64 = 0.90;

/// Fails at once, saying why, when the brokers' store would be too full for them to start
/// (instead of a broker that never listens or dies after registering). Needs `stat -f`;
/// without it the brokers are left to find out.
fn check_disk(run: &Path) {
    let Ok(out) = Command::new("stat")
        .args(["-f", "-c", "%b %a"])
        .arg(run)
        .output()
    else {
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let mut blocks = text.split_whitespace().map(str::parse::<f64>);
    let (Some(Ok(total)), Some(Ok(available))) = (blocks.next(), blocks.next()) else {
        return;
    };
    let ratio = (total - available) / total;
    assert!(
        !(total > 0.0 && ratio >= DISK_FULL_RATIO),
        "the RocketMQ test brokers cannot start: the filesystem of {} is {:.1} % full counting \
         reserved blocks, and rocketmq-rust's store refuses to write from {:.0} %; free space there \
         or set TMPDIR to a directory on a roomier filesystem (a tmpfs will do)",
        run.display(),
        ratio * 100.0,
        DISK_FULL_RATIO * 100.0
    );
}

/// A broker's config. It re-registers with the name server every 10 s, the shortest period
/// the broker accepts (its default is 30 s after a first delay of 10): a registration that did
/// not take at startup (one CI run waited 60 s for it in vain) is retried five times within
/// [`wait_registered`]'s minute instead of twice.
fn broker_toml(run: &Path, name: &str, port: u16, namesrv: &str, advertise: &str) -> String {
    let store = run.join(name);
    format!(
        "[broker]\nlistenPort = {port}\nbrokerIp1 = \"{advertise}\"\nbrokerIp2 = \"127.0.0.1\"\n\
         storePathRootDir = \"{0}\"\nnamesrvAddr = \"{namesrv}\"\nautoCreateTopicEnable = true\n\
         autoCreateSubscriptionGroup = true\nregisterNameServerPeriod = 10000\n\n[broker.brokerIdentity]\nbrokerName = \"{name}\"\n\
         brokerClusterName = \"DefaultCluster\"\nbrokerId = 0\n\n[broker.brokerServerConfig]\n\
         bindAddress = \"127.0.0.1\"\n\n[store]\nstorePathRootDir = \"{0}\"\n\
         haListenAddress = \"127.0.0.1\"\nhaListenPort = {1}\nmappedFileSizeCommitLog = 67108864\n\
         mappedFileSizeConsumeQueue = 6000\nmappedFileSizeConsumeQueueExt = 65536\n\
         maxHashSlotNum = 1000\nmaxIndexNum = 4000\n",
        store.display(),
        port + 1
    )
}

fn unique_stamp() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("test server setup")
        .as_nanos()
}

/// The name of broker `i`: `broker-a`, `broker-b`, …
pub fn broker_name(i: usize) -> String {
    format!("broker-{}", char::from(b'a' + i as u8))
}

impl Cluster {
    /// Starts a fresh name server and one broker.
    pub fn start() -> Cluster {
        Cluster::start_with(1)
    }

    /// Starts a fresh name server and `brokers` brokers.
    pub fn start_with(brokers: usize) -> Cluster {
        Cluster::start_many(1, brokers)
    }

    /// Starts `name_servers` fresh name servers and `brokers` brokers registered with all.
    pub fn start_many(name_servers: usize, brokers: usize) -> Cluster {
        Cluster::start_advertised(name_servers, brokers, "127.0.0.1")
    }

    /// Like [`Cluster::start_many`], with brokers listening on 127.0.0.1 but registered (so
    /// routed to clients) as `host` with the same port: a test can put a proxy at that address
    /// (Linux routes all of 127.0.0.0/8 to the loopback interface).
    pub fn start_advertised(name_servers: usize, brokers: usize, host: &str) -> Cluster {
        let bin = bin_dir();
        let run = tempfile::Builder::new()
            .prefix("rocketmq-test")
            .tempdir()
            .expect("tempdir")
            .keep();
        let cleanup = cleanup_guard(&run);
        let r = run.as_path();
        check_disk(r);
        std::fs::create_dir_all(r.join("home")).expect("test server setup");
        let name_servers: Vec<String> = (0..name_servers.max(1))
            .map(|_| format!("127.0.0.1:{}", free_port()))
            .collect();
        for i in 0..name_servers.len() {
            let dir = r.join(format!("namesrv-{i}"));
            std::fs::create_dir_all(&dir).expect("test server setup");
            std::fs::write(
                r.join(format!("namesrv-{i}.toml")),
                format!(
                    "rocketmqHome = \"{0}/home\"\nkvConfigPath = \"{1}/kvConfig.json\"\n\
                     configStorePath = \"{1}/namesrv.properties\"\n\n[runtime]\nworkerThreads = 2\n",
                    r.display(),
                    dir.display()
                ),
            )
            .expect("test server setup");
        }
        let namesrv = name_servers.join(";");
        let mut addrs = Vec::new();
        for i in 0..brokers {
            let port = broker_port();
            let name = broker_name(i);
            std::fs::create_dir_all(r.join(&name)).expect("test server setup");
            std::fs::write(
                r.join(format!("{name}.toml")),
                broker_toml(r, &name, port, &namesrv, host),
            )
            .expect("test server setup");
            addrs.push(port);
        }
        let mut cluster = Cluster {
            namesrv: name_servers[0].clone(),
            namesrv_procs: name_servers.iter().map(|_| None).collect(),
            name_servers,
            broker_procs: addrs.iter().map(|_| None).collect(),
            brokers: addrs.iter().map(|p| format!("{host}:{p}")).collect(),
            broker_listen: addrs.iter().map(|p| format!("127.0.0.1:{p}")).collect(),
            run: Some(run),
            bin,
            _cleanup: Some(cleanup),
        };
        for i in 0..cluster.name_servers.len() {
            cluster.start_name_server(i);
        }
        for i in 0..brokers {
            cluster.start_broker(i);
        }
        cluster
    }

    /// Starts (or restarts) name server `i`; brokers register with it at their next period.
    pub fn start_name_server(&mut self, i: usize) {
        let run = self.run.clone().expect("own cluster");
        let addr = self.name_servers[i].clone();
        let port = addr.rsplit(':').next().expect("host:port").to_owned();
        let args = vec![
            "-c".to_owned(),
            run.join(format!("namesrv-{i}.toml")).display().to_string(),
            "--bindAddress".to_owned(),
            "127.0.0.1".to_owned(),
            "--listenPort".to_owned(),
            port,
        ];
        let log = format!("namesrv-{i}-{}.log", unique_stamp());
        self.namesrv_procs[i] = Some(Server::spawn(
            &self.bin.join("rocketmq-namesrv-rust"),
            &args,
            &run,
            &log,
        ));
        wait_tcp(&addr, "the name server");
    }

    /// Kills name server `i` (SIGKILL) and waits until it is gone.
    pub fn kill_name_server(&mut self, i: usize) {
        if let Some(mut server) = self.namesrv_procs[i].take() {
            server.kill();
        }
    }

    /// Starts (or restarts, on the same store) broker `i` and waits until it is registered.
    pub fn start_broker(&mut self, i: usize) {
        let run = self.run.clone().expect("own cluster");
        let name = broker_name(i);
        let args = vec![
            "-c".to_owned(),
            run.join(format!("{name}.toml")).display().to_string(),
        ];
        let log = format!("{name}-{}.log", unique_stamp());
        self.broker_procs[i] = Some(Server::spawn(
            &self.bin.join("rocketmq-broker-rust"),
            &args,
            &run,
            &log,
        ));
        wait_tcp(&self.broker_listen[i], "the broker");
        let live = self.name_servers.iter().zip(&self.namesrv_procs);
        for (namesrv, _) in live.filter(|(_, process)| process.is_some()) {
            wait_registered(namesrv, &name, &self.brokers[i]);
        }
    }

    /// Kills broker `i` (SIGKILL) and waits until it is gone.
    pub fn kill_broker(&mut self, i: usize) {
        if let Some(mut broker) = self.broker_procs[i].take() {
            broker.kill();
        }
    }

    /// The store directory of broker `i` (its `commitlog/` holds the stored records); `None`
    /// for a cluster this process did not start.
    pub fn store_dir(&self, i: usize) -> Option<PathBuf> {
        self.run.as_ref().map(|run| run.join(broker_name(i)))
    }

    /// Client settings for this cluster (offsets persisted every 200 ms).
    pub fn config(&self) -> RocketMqConfig {
        RocketMqConfig {
            name_servers: self.name_servers.clone(),
            persist_interval_ms: 200,
            ..RocketMqConfig::default()
        }
    }
}

/// Waits until the name server lists broker `name` at `addr` and routes TBW102 (it
/// registered itself). Brokers are other processes: there is no event to await.
fn wait_registered(namesrv: &str, name: &str, addr: &str) {
    let (namesrv, name, addr) = (namesrv.to_owned(), name.to_owned(), addr.to_owned());
    // A thread of its own: callers may be inside a runtime already.
    std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(60);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("test server setup");
        rt.block_on(async {
            let admin = admin_for(&namesrv);
            loop {
                let listed = admin.name_servers().masters().await.ok();
                if listed.is_some_and(|m| m.get(&name) == Some(&addr))
                    && admin.name_servers().refresh("TBW102").await.is_ok()
                {
                    return;
                }
                assert!(
                    Instant::now() < deadline,
                    "{name} did not register with {namesrv}"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        });
    })
    .join()
    .expect("waiting for the broker");
}

/// An admin client of the name server at `namesrv`.
pub fn admin_for(namesrv: &str) -> Admin {
    Admin::connect(vec![namesrv.to_owned()], Duration::from_secs(3)).expect("test server setup")
}

/// The cluster every test of this process shares: `MSGSTREAM_ROCKETMQ_NAMESRV`, or one started
/// on first use.
pub fn shared() -> &'static Cluster {
    static SHARED: OnceLock<Cluster> = OnceLock::new();
    SHARED.get_or_init(|| match std::env::var("MSGSTREAM_ROCKETMQ_NAMESRV") {
        Ok(namesrv) => Cluster {
            name_servers: namesrv.split(';').map(str::to_owned).collect(),
            namesrv,
            brokers: Vec::new(),
            broker_listen: Vec::new(),
            run: None,
            bin: PathBuf::new(),
            namesrv_procs: Vec::new(),
            broker_procs: Vec::new(),
            _cleanup: None,
        },
        Err(_) => Cluster::start(),
    })
}

/// A loopback port nothing listens on (for failover tests).
pub fn closed_port() -> u16 {
    free_port()
}
