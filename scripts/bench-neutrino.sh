#!/usr/bin/env bash
# The comparison for the header sync figures (benches/README.md): neutrino v0.17.1
# (benches/neutrino) importing the same 925,000-header generated regtest chain and its
# filter headers that `node tests/e2e/run.mjs --bench` syncs into a tab, with full checks
# and with fast-add, alternated, RUNS times each (default 3). Run it in the same hour as
# the tab's figures, on an idle machine.
set -euo pipefail
source "$(dirname "$0")/env.sh"
cd "$ROOT"
bash scripts/setup.sh neutrino
cargo build --release -p lightwire-chain -p lightwire-tests --bins
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
step "the chain and its filter headers"
target/release/lightwire-chain generate --network regtest --count 925001 "$work/headers"
target/release/lightwire-hostile --listen 127.0.0.1:0 --key-file "$work/key" --generate 925000 \
  --write-filter-headers "$work/filter-headers"
(cd benches/neutrino && go build -o "$work/neutrino-import" .)
step "neutrino's import, ${RUNS:-3} runs each, alternated"
for run in $(seq "${RUNS:-3}"); do
  "$work/neutrino-import" -headers "$work/headers" -filter-headers "$work/filter-headers"
  "$work/neutrino-import" -headers "$work/headers" -filter-headers "$work/filter-headers" -fast-add
done
