//! The contract suite on the in-memory backend: the executable definition of the mq contract.

use std::sync::Arc;

use msgstream::mem::MemoryClient;
use msgstream::testkit::Harness;

async fn harness() -> Harness {
    Harness::new(Arc::new(MemoryClient::new()), ())
}

msgstream::contract_tests!(harness);
