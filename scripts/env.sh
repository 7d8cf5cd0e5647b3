# Sourced by the other scripts: the project root, tool paths and the shared test data.
# shellcheck shell=bash

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export ROOT
export PATH="$HOME/.cargo/bin:$(go env GOPATH 2>/dev/null || echo "$HOME/go")/bin:$PATH"
export CHROMEDRIVER=${CHROMEDRIVER:-/usr/bin/chromedriver}
# Not exported as GECKODRIVER: wasm-bindgen-test-runner takes that variable before
# CHROMEDRIVER, so every `--chrome` run would quietly run in Firefox.
GECKODRIVER_BIN=${GECKODRIVER_BIN:-$HOME/.cargo/bin/geckodriver}

# Tests read the BOLT 8 vectors and real headers from ../shared (read-only, never copied
# into the repository). A fresh clone made elsewhere finds them next to the repository
# it was cloned from.
find_shared() {
  if [ -n "${LIGHTWIRE_SHARED:-}" ]; then echo "$LIGHTWIRE_SHARED"; return; fi
  if [ -d "$ROOT/../shared/vectors" ]; then (cd "$ROOT/../shared" && pwd); return; fi
  local origin
  origin=$(git -C "$ROOT" remote get-url origin 2>/dev/null || true)
  if [ -n "$origin" ] && [ -d "$origin/../shared/vectors" ]; then (cd "$origin/../shared" && pwd); return; fi
  echo ""
}
LIGHTWIRE_SHARED=$(find_shared)
if [ -z "$LIGHTWIRE_SHARED" ]; then
  echo "error: shared test data not found: expected ../shared next to the project (or set LIGHTWIRE_SHARED)" >&2
  exit 1
fi
export LIGHTWIRE_SHARED

# Chromium flags for headless runs as root on a machine with a closed network.
CHROMIUM_FLAGS=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run
  --disable-background-networking --disable-component-update --disable-sync
  --disable-dev-shm-usage)

# Each step with the wall-clock time it starts at, so that a log shows where the time went.
step() { printf '\n==> %s  [%s]\n' "$*" "$(date -u +%T)"; }
