//! One harness per backend: a fresh backend built through the facade's `Factory` from a
//! config, exactly as applications get it. Servers are started by the test process itself (the
//! RocketMQ name server and broker once per process, an NSQ test server per harness), or taken
//! from the environment (`MSGSTREAM_ROCKETMQ_NAMESRV`; for NSQ `MSGSTREAM_NSQ_NSQD`,
//! `MSGSTREAM_NSQ_NSQD_HTTP`, `MSGSTREAM_NSQ_LOOKUPD`, `MSGSTREAM_NSQ_EXTENSIONS` and
//! `MSGSTREAM_NSQ_CLUSTER`, see [`nsq_server`] and [`nsq_cluster_server`]).

use msgstream::testkit::Harness;
#[cfg(any(feature = "rocketmq", feature = "nsq"))]
use msgstream_facade::config::TimestampKind;
use msgstream_facade::{BackendKind, Config, Factory};

async fn from_config(config: Config, keep: impl std::any::Any + Send + Sync) -> Harness {
    let factory = Factory::new(&config).await.expect("factory");
    Harness::new(factory.client(), keep)
}

pub async fn memory() -> Harness {
    let config = Config {
        backend: BackendKind::Memory,
        ..Config::default()
    };
    from_config(config, ()).await
}

#[cfg(feature = "rocksmq")]
pub async fn rocksmq() -> Harness {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = Config::default();
    config.rocksmq.path = dir.path().join("db");
    from_config(config, dir).await
}

/// rocksmq with grouped acks, written within 5 ms of the first of a group.
#[cfg(feature = "rocksmq")]
pub async fn rocksmq_grouped_acks() -> Harness {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = Config::default();
    config.rocksmq.path = dir.path().join("db");
    config.rocksmq.ack_group_ms = 5;
    from_config(config, dir).await
}

#[cfg(feature = "rocketmq")]
pub async fn rocketmq() -> Harness {
    let cluster = msgstream_rocketmq::testserver::shared();
    let mut config = Config {
        backend: BackendKind::Rocketmq,
        ..Config::default()
    };
    config.rocketmq.name_servers = vec![cluster.namesrv.clone()];
    config.rocketmq.persist_interval_ms = 200;
    // The checks take hybrid timestamps from this machine's clock, the brokers' clock too: no
    // slack, so the broker's search by store time is what finds each answer.
    config.stream.timestamps = TimestampKind::Hybrid;
    config.stream.clock_slack_ms = 0;
    from_config(config, ()).await
}

/// The already running NSQ server named by `MSGSTREAM_NSQ_*`.
#[cfg(feature = "nsq")]
#[derive(Debug)]
pub struct ExternalNsq {
    /// `MSGSTREAM_NSQ_NSQD`: nsqd TCP addresses.
    nsqd: Vec<std::net::SocketAddr>,
    /// `MSGSTREAM_NSQ_NSQD_HTTP`: their HTTP addresses, same order.
    nsqd_http: Vec<std::net::SocketAddr>,
    /// `MSGSTREAM_NSQ_LOOKUPD`: nsqlookupd HTTP addresses (may be empty).
    lookupd: Vec<std::net::SocketAddr>,
    /// `MSGSTREAM_NSQ_EXTENSIONS` is `partitions`.
    partitions: bool,
    /// `MSGSTREAM_NSQ_CLUSTER` is `true`: a Youzan cluster, used by the cluster mode only.
    cluster: bool,
}

/// Reads `MSGSTREAM_NSQ_*`: `None` when none is set. The harnesses need nsqd's HTTP API (lag,
/// seek, latest id, deletes) to run the checks they run against the test server, so
/// `MSGSTREAM_NSQ_NSQD_HTTP` must come with `MSGSTREAM_NSQ_NSQD`.
#[cfg(feature = "nsq")]
fn read_external_nsq() -> Result<Option<ExternalNsq>, String> {
    let Some(server) = msgstream_nsq_testd::ExternalServer::from_env()? else {
        return Ok(None);
    };
    if server.nsqd_http.is_empty() {
        return Err(
            "MSGSTREAM_NSQ_NSQD is set but MSGSTREAM_NSQ_NSQD_HTTP is not: the conformance \
             harnesses use nsqd's HTTP API (lag, seek, latest id, deletes); name the HTTP \
             address of each nsqd, in the same order"
                .to_string(),
        );
    }
    Ok(Some(ExternalNsq {
        partitions: server.extensions == msgstream_nsq_testd::Extensions::Partitions,
        cluster: server.cluster,
        nsqd: server.nsqd,
        nsqd_http: server.nsqd_http,
        lookupd: server.lookupd,
    }))
}

/// The external NSQ server, if `MSGSTREAM_NSQ_*` names one; a malformed variable fails the
/// test.
#[cfg(feature = "nsq")]
fn external_nsq() -> Option<&'static ExternalNsq> {
    static EXTERNAL: std::sync::OnceLock<Result<Option<ExternalNsq>, String>> =
        std::sync::OnceLock::new();
    match EXTERNAL.get_or_init(read_external_nsq) {
        Ok(external) => external.as_ref(),
        Err(message) => panic!("{message}"),
    }
}

/// The server of one NSQ mode: the external one, or an in-process test server.
#[cfg(feature = "nsq")]
pub enum NsqServer {
    /// The already running server of `MSGSTREAM_NSQ_*`.
    External(&'static ExternalNsq),
    /// A test server of this harness's own.
    Test(msgstream_nsq_testd::TestServer),
    /// A test cluster of this harness's own (a lookupd over two coordinator-mode nsqds).
    Cluster(msgstream_nsq_testd::TestCluster),
}

#[cfg(feature = "nsq")]
impl NsqServer {
    /// The (first) nsqd's TCP address.
    pub fn tcp_addr(&self) -> std::net::SocketAddr {
        match self {
            NsqServer::External(e) => e.nsqd[0],
            NsqServer::Test(server) => server.tcp_addr(),
            NsqServer::Cluster(cluster) => cluster.nsqds()[0].tcp_addr(),
        }
    }

    /// The (first) nsqd's HTTP address.
    pub fn http_addr(&self) -> std::net::SocketAddr {
        match self {
            NsqServer::External(e) => e.nsqd_http[0],
            NsqServer::Test(server) => server.http_addr(),
            NsqServer::Cluster(cluster) => cluster.nsqds()[0].http_addr(),
        }
    }

    /// The `[nsq]` addresses of a config for this server: nsqd, nsqd_http, lookupd.
    pub fn config_addresses(&self) -> (Vec<String>, Vec<String>, Vec<String>) {
        let strings =
            |addrs: &[std::net::SocketAddr]| addrs.iter().map(|a| a.to_string()).collect();
        match self {
            NsqServer::External(e) => {
                (strings(&e.nsqd), strings(&e.nsqd_http), strings(&e.lookupd))
            }
            NsqServer::Test(server) => (
                vec![server.tcp_addr().to_string()],
                vec![server.http_addr().to_string()],
                Vec::new(),
            ),
            NsqServer::Cluster(cluster) => (
                cluster
                    .nsqds()
                    .iter()
                    .map(|n| n.tcp_addr().to_string())
                    .collect(),
                cluster
                    .nsqds()
                    .iter()
                    .map(|n| n.http_addr().to_string())
                    .collect(),
                vec![cluster.lookupd_http_addr().to_string()],
            ),
        }
    }
}

/// The NSQ server of a mode (with the partition/offset extensions or as upstream nsqd): the
/// already running one of `MSGSTREAM_NSQ_NSQD` if `MSGSTREAM_NSQ_EXTENSIONS` (default `none`)
/// says it speaks that mode, else a fresh in-process test server. Topics and channels the
/// checks create have unique names (`msgstream::testkit::unique`), so they share it. The first
/// call per mode says on stderr which one the mode uses.
#[cfg(feature = "nsq")]
pub async fn nsq_server(partitions: bool) -> NsqServer {
    use msgstream_nsq_testd::{Extensions, Options, TestServer};
    use std::io::Write;
    static ANNOUNCED: [std::sync::Once; 2] = [std::sync::Once::new(), std::sync::Once::new()];
    let external = external_nsq().filter(|e| e.partitions == partitions && !e.cluster);
    ANNOUNCED[usize::from(partitions)].call_once(|| {
        let mode = if partitions { "partitions" } else { "none" };
        let server = match external {
            Some(e) => format!(
                "the running nsqd {} (HTTP {}) of MSGSTREAM_NSQ_NSQD",
                e.nsqd[0], e.nsqd_http[0]
            ),
            None => "an in-process test server per harness".to_string(),
        };
        // Straight to stderr, past the test harness's capture: said once, whatever passes.
        let _ = writeln!(
            std::io::stderr(),
            "conformance: nsq extensions={mode} uses {server}"
        );
    });
    match external {
        Some(e) => NsqServer::External(e),
        None => NsqServer::Test(
            TestServer::start(Options {
                extensions: if partitions {
                    Extensions::Partitions
                } else {
                    Extensions::None
                },
                ..Options::default()
            })
            .await
            .expect("nsq test server"),
        ),
    }
}

#[cfg(feature = "nsq")]
async fn nsq(partitions: bool) -> Harness {
    use msgstream_facade::config::NsqExtensions;
    let server = nsq_server(partitions).await;
    let mut config = Config {
        backend: BackendKind::Nsq,
        ..Config::default()
    };
    (config.nsq.nsqd, config.nsq.nsqd_http, config.nsq.lookupd) = server.config_addresses();
    config.nsq.max_in_flight = 64;
    config.nsq.extensions = if partitions {
        NsqExtensions::Partitions
    } else {
        NsqExtensions::None
    };
    let spool = tempfile::tempdir().expect("tempdir");
    config.nsq.spool_dir = spool.path().to_path_buf();
    from_config(config, (server, spool)).await
}

/// The Youzan cluster of `MSGSTREAM_NSQ_CLUSTER=true` (with `MSGSTREAM_NSQ_EXTENSIONS=
/// partitions`, `MSGSTREAM_NSQ_LOOKUPD` and at least two nsqds), else an in-process test
/// cluster per harness. Channels live in partition 1 of topics of two partitions the client
/// creates through the lookupd, so partition 1's leader is not the first nsqd configured.
#[cfg(feature = "nsq")]
pub async fn nsq_cluster_server() -> NsqServer {
    use std::io::Write;
    static ANNOUNCED: std::sync::Once = std::sync::Once::new();
    let external = external_nsq().filter(|e| e.cluster);
    ANNOUNCED.call_once(|| {
        let server = match external {
            Some(e) => format!("the running cluster of lookupd {:?}", e.lookupd),
            None => "an in-process test cluster per harness".to_string(),
        };
        let _ = writeln!(std::io::stderr(), "conformance: nsq cluster uses {server}");
    });
    match external {
        Some(e) => NsqServer::External(e),
        None => NsqServer::Cluster(
            msgstream_nsq_testd::TestCluster::start(msgstream_nsq_testd::ClusterOptions::default())
                .await
                .expect("nsq test cluster"),
        ),
    }
}

#[cfg(feature = "nsq")]
pub async fn nsq_cluster() -> Harness {
    use msgstream_facade::config::NsqExtensions;
    let server = nsq_cluster_server().await;
    let mut config = Config {
        backend: BackendKind::Nsq,
        ..Config::default()
    };
    (config.nsq.nsqd, config.nsq.nsqd_http, config.nsq.lookupd) = server.config_addresses();
    config.nsq.max_in_flight = 64;
    config.nsq.extensions = NsqExtensions::Partitions;
    config.nsq.cluster = true;
    config.nsq.partitions = 2;
    config.nsq.partition = 1;
    // Hybrid timestamps from this machine's clock, which the test cluster's nsqds share: the
    // seek-by-time checks run through the cluster's `timestamp:` offsets.
    config.stream.timestamps = TimestampKind::Hybrid;
    config.stream.clock_slack_ms = 0;
    let spool = tempfile::tempdir().expect("tempdir");
    config.nsq.spool_dir = spool.path().to_path_buf();
    from_config(config, (server, spool)).await
}

#[cfg(feature = "nsq")]
pub async fn nsq_upstream() -> Harness {
    nsq(false).await
}

#[cfg(feature = "nsq")]
pub async fn nsq_partitions() -> Harness {
    nsq(true).await
}

/// Every backend compiled into this build, by its column name in the README's table.
pub async fn all() -> Vec<(&'static str, Harness)> {
    #[allow(unused_mut)]
    let mut all = vec![("memory", memory().await)];
    #[cfg(feature = "rocksmq")]
    all.push(("rocksmq", rocksmq().await));
    #[cfg(feature = "rocketmq")]
    all.push(("rocketmq", rocketmq().await));
    #[cfg(feature = "nsq")]
    all.push(("nsq", nsq_upstream().await));
    // The README's "nsq partitions" column is the Youzan mode with consume offsets: a cluster
    // (a standalone Youzan nsqd has none: its capabilities are upstream's, see
    // backends/nsq/README.md).
    #[cfg(feature = "nsq")]
    all.push(("nsq partitions", nsq_cluster().await));
    all
}
