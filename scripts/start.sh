#!/usr/bin/env bash
# For now (issue 2), the main job is the transport benchmark inside headless Chromium:
# build the wasm and print its table. Issue 6 turns this into the demo (gateway + page).
set -euo pipefail
source "$(dirname "$0")/env.sh"
cd "$ROOT"
bash scripts/setup.sh
bash scripts/bench-wasm.sh
