//! The name-server client against a real name server: failover past a dead address, unknown
//! topics, and a server-side request answered by the connection.

mod support;

use std::time::Duration;

use msgstream_rocketmq::{Admin, Error};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_and_unknown_topics() {
    let cluster = support::shared();
    let dead = format!("127.0.0.1:{}", support::closed_port());
    let admin =
        Admin::connect(vec![dead, cluster.namesrv.clone()], Duration::from_secs(3)).expect("admin");
    let missing = support::unique("nowhere");
    assert!(matches!(
        admin.name_servers().route(&missing).await,
        Err(Error::TopicNotFound(_))
    ));
    let masters = admin.name_servers().masters().await.expect("masters");
    assert!(!masters.is_empty(), "the broker is registered");
    let route = admin.name_servers().route("TBW102").await.expect("TBW102");
    assert!(!route.write_queues.is_empty());
    let none = Admin::connect(vec![], Duration::from_secs(1));
    assert!(matches!(none, Err(Error::InvalidArgument(_))));
}
