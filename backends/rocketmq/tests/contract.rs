//! The core's backend-independent contract suite, run against a real name server and broker.

mod support;

async fn harness() -> msgstream::testkit::Harness {
    let client = msgstream_rocketmq::RocketMqClient::connect(support::shared().config())
        .await
        .expect("connect");
    msgstream::testkit::Harness::new(std::sync::Arc::new(client), ())
}

msgstream::contract_tests!(harness);
