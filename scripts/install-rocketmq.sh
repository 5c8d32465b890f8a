#!/usr/bin/env bash
# Installs the RocketMQ test servers (rocketmq-namesrv-rust and rocketmq-broker-rust, crates
# rocketmq-namesrv / rocketmq-broker 1.0.0) into a cache directory outside the clone, so that
# later runs on the same machine reuse them. Idempotent: does nothing when both binaries exist.
#
# Both crates share one target directory: they have ~290 dependencies in common, which
# `cargo install a b` would otherwise build twice. A debug build (without debug info) is the
# default because a test server needs no optimisation and it compiles much faster; set
# ROCKETMQ_INSTALL_RELEASE=1 for an optimised build.
#
# Prints the bin directory on success. The msgstream-rocketmq tests find the binaries through
# MSGSTREAM_ROCKETMQ_BIN (default: the same cache directory).
set -euo pipefail

version=1.0.0
prefix="${MSGSTREAM_ROCKETMQ_PREFIX:-/var/cache/msgstream/rocketmq}"
bin="$prefix/bin"

if [ -x "$bin/rocketmq-namesrv-rust" ] && [ -x "$bin/rocketmq-broker-rust" ]; then
  echo "$bin"
  exit 0
fi

mkdir -p "$prefix"
profile=(--debug)
if [ "${ROCKETMQ_INSTALL_RELEASE:-0}" = 1 ]; then profile=(); fi
export CARGO_TARGET_DIR="$prefix/build"
export CARGO_PROFILE_DEV_DEBUG=0

start=$(date +%s)
echo "install-rocketmq: building rocketmq-namesrv and rocketmq-broker $version into $prefix (takes long)" >&2
if ! cargo install --locked "${profile[@]}" --root "$prefix" \
    "rocketmq-namesrv@$version" "rocketmq-broker@$version"; then
  echo "install-rocketmq: --locked install failed, retrying without --locked" >&2
  cargo install "${profile[@]}" --root "$prefix" \
    "rocketmq-namesrv@$version" "rocketmq-broker@$version"
fi
echo "install-rocketmq: done in $(( $(date +%s) - start )) s" >&2
# The shared build directory is only needed while compiling.
rm -rf "$CARGO_TARGET_DIR"
echo "$bin"
