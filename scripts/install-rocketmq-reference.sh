#!/usr/bin/env bash
# Builds the reference client `backends/rocketmq/reference` (rocketmq-client-rust 1.0.0, ~360
# packages, its own workspace) into a cache directory outside the clone, so that later runs on
# the same machine reuse it. The reference_interop test of msgstream-rocketmq runs this binary
# (found through MSGSTREAM_ROCKETMQ_REFERENCE) to check that both clients read each other's
# compressed bodies.
#
# Idempotent, keyed by content: the cached binary is named after a hash of the reference's
# Cargo.toml, Cargo.lock and src/, so a changed reference is rebuilt and an unchanged one is not.
# The target directory stays in the cache, so a rebuild after a source change recompiles only
# the reference itself. Debug build without debug info (a test client needs no optimisation).
#
# Prints the binary's path on success.
set -euo pipefail
cd "$(dirname "$0")/.."

reference=backends/rocketmq/reference
prefix="${MSGSTREAM_ROCKETMQ_REFERENCE_PREFIX:-/var/cache/msgstream/rocketmq-reference}"
key=$( (cat "$reference/Cargo.toml" "$reference/Cargo.lock"; find "$reference/src" -type f | LC_ALL=C sort | xargs cat) \
  | sha256sum | cut -c1-16)
bin="$prefix/bin/reference-$key"

if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi

mkdir -p "$prefix/bin"
export CARGO_TARGET_DIR="$prefix/build"
export CARGO_PROFILE_DEV_DEBUG=0
start=$(date +%s)
echo "install-rocketmq-reference: building $reference into $prefix (long the first time)" >&2
cargo build --locked --manifest-path "$reference/Cargo.toml" --bin reference
cp "$CARGO_TARGET_DIR/debug/reference" "$bin.tmp"
mv "$bin.tmp" "$bin"
# Binaries of older reference sources are no longer wanted.
find "$prefix/bin" -name 'reference-*' ! -name "reference-$key" -delete
echo "install-rocketmq-reference: done in $(( $(date +%s) - start )) s" >&2
echo "$bin"
