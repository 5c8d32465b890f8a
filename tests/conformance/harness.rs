//! One harness per backend: a fresh backend built through the facade's `Factory` from a
//! config, exactly as applications get it. Servers are started by the test process itself (the
//! RocketMQ name server and broker once per process, an NSQ test server per harness), or taken
//! from the environment (`MSGSTREAM_ROCKETMQ_NAMESRV`).

use msgstream::testkit::Harness;
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

#[cfg(feature = "rocketmq")]
pub async fn rocketmq() -> Harness {
    let cluster = msgstream_rocketmq::testserver::shared();
    let mut config = Config {
        backend: BackendKind::Rocketmq,
        ..Config::default()
    };
    config.rocketmq.name_servers = vec![cluster.namesrv.clone()];
    config.rocketmq.persist_interval_ms = 200;
    from_config(config, ()).await
}

/// An NSQ test server, with the partition/offset extensions or as upstream nsqd.
#[cfg(feature = "nsq")]
pub async fn nsq_server(partitions: bool) -> msgstream_nsq_testd::TestServer {
    use msgstream_nsq_testd::{Extensions, Options, TestServer};
    TestServer::start(Options {
        extensions: if partitions {
            Extensions::Partitions
        } else {
            Extensions::None
        },
        ..Options::default()
    })
    .await
    .expect("nsq test server")
}

#[cfg(feature = "nsq")]
async fn nsq(partitions: bool) -> Harness {
    use msgstream_facade::config::NsqExtensions;
    let server = nsq_server(partitions).await;
    let mut config = Config {
        backend: BackendKind::Nsq,
        ..Config::default()
    };
    config.nsq.nsqd = vec![server.tcp_addr().to_string()];
    config.nsq.nsqd_http = vec![server.http_addr().to_string()];
    config.nsq.max_in_flight = 64;
    config.nsq.extensions = if partitions {
        NsqExtensions::Partitions
    } else {
        NsqExtensions::None
    };
    from_config(config, server).await
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
    #[cfg(feature = "nsq")]
    all.push(("nsq partitions", nsq_partitions().await));
    all
}
