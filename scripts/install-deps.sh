#!/usr/bin/env bash
# Installs what building and testing msgstream needs beyond the Rust toolchain, from Debian's
# packages: libclang (bindgen, for the RocksDB bindings) and a C++ compiler (RocksDB itself).
# Idempotent and quiet when everything is there already; fails loudly when it cannot install.
set -euo pipefail

need=()
if ! ldconfig -p 2>/dev/null | grep -q 'libclang\(-[0-9.]*\)\?\.so'; then need+=(libclang-dev); fi
if ! command -v c++ >/dev/null 2>&1; then need+=(g++); fi
if [ "${#need[@]}" -eq 0 ]; then exit 0; fi

echo "install-deps: installing ${need[*]}" >&2
if [ "$(id -u)" -eq 0 ]; then sudo=""; elif command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
  echo "install-deps: need root (or sudo) to apt-get install ${need[*]}" >&2; exit 1
fi
$sudo apt-get update -qq || { echo "install-deps: apt-get update failed" >&2; exit 1; }
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null \
  || { echo "install-deps: apt-get install ${need[*]} failed" >&2; exit 1; }
