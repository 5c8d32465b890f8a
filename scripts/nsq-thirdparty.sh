#!/usr/bin/env bash
# Proves the NSQ test server faithful to a client we did not write: installs pynsq from PyPI
# into a virtualenv (once, under the cargo target dir), starts msgstream-nsq-testd on free
# loopback ports, and runs scripts/nsq_thirdparty.py against it (PUB, MPUB, DPUB, consume,
# FIN, REQ, TOUCH, then /stats must show nothing left). Exits non-zero on any failure.
# `--venv-only` just makes the venv (the nsq bench uses it for pynsq's throughput figures).
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-target}"
venv="$target/pynsq-venv"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import nsq' 2>/dev/null; then
  rm -rf "$venv"
  python3 -m venv "$venv" || { echo "nsq-thirdparty: python3 -m venv failed (Debian: apt-get install python3-venv)" >&2; exit 1; }
  "$venv/bin/pip" install --quiet 'pynsq==0.9.1' 'tornado>=6,<7' \
    || { echo "nsq-thirdparty: pip could not install pynsq from PyPI" >&2; exit 1; }
fi
[ "${1:-}" = "--venv-only" ] && exit 0
cargo build --quiet -p msgstream-nsq-testd
out="$(mktemp)"
# The server runs until it is sent SIGTERM (stdin is not read).
"$target/debug/msgstream-nsq-testd" --tcp 127.0.0.1:0 --http 127.0.0.1:0 > "$out" &
server=$!
trap 'kill -TERM "$server" 2>/dev/null && wait "$server" 2>/dev/null; rm -f "$out"' EXIT
for _ in $(seq 100); do
  [ -s "$out" ] && break
  sleep 0.05
done
read -r tcp http < "$out" || { echo "nsq-thirdparty: the test server did not start" >&2; exit 1; }
"$venv/bin/python" scripts/nsq_thirdparty.py "${tcp#tcp=}" "${http#http=}"
