#!/usr/bin/env bash
# The admin page in a real browser: installs Debian's chromium and playwright-core (from npm,
# into a cache outside the clone) when missing, starts `msgstream admin` on a free loopback
# port over a temporary rocksmq database, and checks what a person sees: the channels listed,
# a subscription's lag that changes after consuming, the channel holding the timetick
# watermark back, and the message browser paging through a channel without moving anything. Saves a screenshot in a temporary directory, or at $ADMIN_SCREENSHOT
# (`ADMIN_SCREENSHOT=docs/admin-page.png` refreshes the README's picture).
# Fails loudly when something cannot be installed; it never skips.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
cache=${MSGSTREAM_CACHE:-/var/cache/msgstream}/playwright
screenshot=${ADMIN_SCREENSHOT:-$(mktemp -d)/admin-page.png}

fail() { echo "admin-browser-test: $*" >&2; exit 1; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null 2>&1; then sudo "$@"; else
    fail "need root (or sudo) to run: $*"
  fi
}

need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v node >/dev/null 2>&1 || need+=(nodejs)
command -v npm >/dev/null 2>&1 || need+=(npm)
if [ "${#need[@]}" -gt 0 ]; then
  echo "admin-browser-test: installing ${need[*]}" >&2
  as_root apt-get update -qq || fail "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "${need[@]}" >/dev/null \
    || fail "apt-get install ${need[*]} failed"
fi
[ -x /usr/bin/chromium ] || fail "/usr/bin/chromium is missing after installing chromium"
if [ ! -d "$cache/node_modules/playwright-core" ]; then
  echo "admin-browser-test: installing playwright-core into $cache" >&2
  mkdir -p "$cache"
  npm install --prefix "$cache" --no-audit --no-fund --silent playwright-core@1 >/dev/null \
    || fail "npm install playwright-core failed"
fi

# $ADMIN_TEST_BIN tests a given binary (a release build, or one outside a shared target dir).
if [ -z "${ADMIN_TEST_BIN:-}" ]; then cargo build --quiet --bin msgstream; fi
bin=${ADMIN_TEST_BIN:-${CARGO_TARGET_DIR:-$root/target}/debug/msgstream}
"$bin" admin --help >/dev/null || fail "$bin has no admin command"
tmp=$(mktemp -d)
admin_pid=""
cleanup() {
  if [ -n "$admin_pid" ]; then kill "$admin_pid" 2>/dev/null || true; wait "$admin_pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
export MSGSTREAM_ROCKSMQ__PATH=$tmp/db
ms() { env -u MSGSTREAM_CONFIG -u MSGSTREAM_BACKEND "$bin" "$@"; }

# Two channels ticking together to 45, then tt-a alone further: tt-b holds the watermark back.
ms produce --channels tt-a,tt-b --count 40 --tick-every 10 >/dev/null
ms produce --channels tt-a --count 20 --tick-every 10 --start-ts 100 >/dev/null
# More than a page (50) of messages and ticks, for the message browser; it ticks past tt-b.
ms produce --channels browsed --count 60 --tick-every 10 >/dev/null
# A group that has read some of tt-a: its lag is what is left.
ms consume --channels tt-a --subscription readers --max-packs 5 >/dev/null 2>&1

start_admin() {
  # rocksmq is one process at a time: the page runs between the commands that write.
  "$bin" admin --listen 127.0.0.1:0 --refresh-ms 200 >"$tmp/admin.out" 2>"$tmp/admin.err" &
  admin_pid=$!
  for _ in $(seq 100); do
    url=$(sed -n 's/^admin page on \(http[^ ]*\) .*/\1/p' "$tmp/admin.out")
    [ -n "$url" ] && return 0
    kill -0 "$admin_pid" 2>/dev/null || fail "msgstream admin exited: $(cat "$tmp/admin.err")"
    sleep 0.1
  done
  fail "msgstream admin printed no address"
}
stop_admin() { kill "$admin_pid"; wait "$admin_pid" || true; admin_pid=""; }

# On failure, says whether `msgstream admin` was still running and what it wrote to stderr.
check() {
  NODE_PATH="$cache/node_modules" node scripts/admin-browser-test.mjs "$@" && return 0
  local state="had exited"
  kill -0 "$admin_pid" 2>/dev/null && state="was still running"
  echo "admin-browser-test: the page check failed; msgstream admin $state; its stderr:" >&2
  cat "$tmp/admin.err" >&2
  return 1
}

start_admin
first=$(check "$url" --expect-holder tt-b --browse browsed --screenshot "$screenshot")
stop_admin
ms consume --channels tt-a --subscription readers --max-packs 10 >/dev/null 2>&1
start_admin
check "$url" --expect-holder tt-b --lag-below "$first" >/dev/null
stop_admin
echo "admin-browser-test: ok (lag of readers on tt-a went below $first; screenshot $screenshot)"
