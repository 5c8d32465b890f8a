#!/usr/bin/env bash
# Runs every test of the workspace: unit tests, each backend's tests against its real server
# (started by the tests themselves on loopback ports with temporary data directories), the
# cross-backend conformance suite, doc tests, and every example (built and run).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
# RocketMQ name server and broker for the rocketmq tests: built once per machine into
# /var/cache/msgstream/rocketmq (debug: about 490 s of CPU, 8-16 min cold), reused after that.
scripts/install-rocketmq.sh >/dev/null
# The reference client (backends/rocketmq/reference, rocketmq-client-rust) that
# tests/reference_interop.rs exchanges compressed bodies with: built once per machine (and again
# when its sources change) into /var/cache/msgstream/rocketmq-reference.
MSGSTREAM_ROCKETMQ_REFERENCE=$(scripts/install-rocketmq-reference.sh)
export MSGSTREAM_ROCKETMQ_REFERENCE
cargo build --workspace --examples
for example in quickstart timetick seek_after_restart two_backends; do
  cargo run --quiet --example "$example" >/dev/null
done
# The metrics example must print what the streams recorded, not just run.
metrics=$(cargo run --quiet --example metrics_stdout)
grep -q '^msgstream.consumed.messages{.*channel=metrics-0' <<<"$metrics" \
  || { echo "test.sh: metrics_stdout printed no consumed-messages metric" >&2; exit 1; }
cargo test --workspace --doc
cargo test --workspace --lib --bins --tests
scripts/admin-browser-test.sh
scripts/nsq-thirdparty.sh
