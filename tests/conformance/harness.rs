//! One harness per backend: a fresh, empty backend built through the facade's `Factory` from a
//! config, exactly as applications get it.

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

/// Every backend compiled into this build, by config name.
pub async fn all() -> Vec<(&'static str, Harness)> {
    let all = vec![("memory", memory().await)];
    #[cfg(feature = "rocksmq")]
    let all = {
        let mut all = all;
        all.push(("rocksmq", rocksmq().await));
        all
    };
    all
}
