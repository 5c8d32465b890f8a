//! The test server in upstream mode (`Extensions::None`) against the transcripts recorded
//! from nsqd 1.3.0 and nsqlookupd 1.3.0 (`testd/golden/upstream-*.jsonl`): each replay sends
//! what the recorder sent and requires what the real servers answered (see `golden/mod.rs`).
//! The recording's runs: A = default options (U1, U2, U3, U5, U7, one after the other on one
//! nsqd and lookupd), B = `-max-msg-size 1024` (U4), C = `-msg-timeout 2s` (U6).

mod golden;
