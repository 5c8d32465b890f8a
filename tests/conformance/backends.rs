//! The contract checks of `msgstream::testkit`, once per backend.

mod memory {
    msgstream::contract_tests!(crate::harness::memory);
}

#[cfg(feature = "rocksmq")]
mod rocksmq {
    msgstream::contract_tests!(crate::harness::rocksmq);
}
