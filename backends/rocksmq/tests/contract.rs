//! The core's backend-independent contract suite, run against rocksmq in a temporary directory.

async fn harness() -> msgstream::testkit::Harness {
    let dir = tempfile::tempdir().expect("tempdir");
    let client =
        msgstream_rocksmq::RocksmqClient::open(msgstream_rocksmq::RocksmqOptions::new(dir.path()))
            .expect("open");
    msgstream::testkit::Harness::new(std::sync::Arc::new(client), dir)
}

msgstream::contract_tests!(harness);
