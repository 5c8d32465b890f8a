#!/usr/bin/env bash
# Runs every test of the workspace: unit tests, each backend's tests against its real server
# (started by the tests themselves on loopback ports with temporary data directories), the
# cross-backend conformance suite, doc tests, and a build of every example.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cargo build --workspace --examples
cargo test --workspace --doc
cargo test --workspace --lib --bins --tests
