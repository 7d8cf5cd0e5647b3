#!/usr/bin/env bash
# The long session (tests/soak): a page in Chromium, Firefox and WebKit follows one gateway
# for 30 minutes while btcd mines a block a second, reorganizes 1-6 blocks every three
# minutes and the gateway restarts every ten; memory, IndexedDB usage and timers are
# sampled every minute. Arguments go to tests/soak/run.mjs (--minutes N, --engines ...).
set -euo pipefail
source "$(dirname "$0")/env.sh"
cd "$ROOT"
bash scripts/setup.sh
bash scripts/build-pkg.sh
cargo build --release -p lightwire-gateway -p lightwire-tests --bins
node tests/soak/run.mjs --no-build "$@"
