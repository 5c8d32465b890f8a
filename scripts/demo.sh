#!/usr/bin/env bash
# The README's first command: installs what the build needs (libclang and a C++ compiler, from
# Debian's packages, only when missing), then builds and runs the demo on the embedded default
# backend. Extra arguments go to the demo (e.g. `scripts/demo.sh --channels 8`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
exec cargo run --release -- demo "$@"
