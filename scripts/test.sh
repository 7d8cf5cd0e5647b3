#!/usr/bin/env bash
# Every test: native (cargo), then wasm in headless Chromium, Firefox and WebKit (wasm-pack test),
# then the browser tests of the built package against real gateways (tests/e2e in
# Chromium, Firefox and WebKit; tests/public behind nginx and TLS; tests/package), then
# the demo and its dashboard
# (tests/dashboard).
set -euo pipefail
source "$(dirname "$0")/env.sh"
cd "$ROOT"
bash scripts/setup.sh
started=$(date +%s)

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy -D warnings"
cargo clippy --workspace --all-targets -- -D warnings
# Code behind cfg(target_arch = "wasm32") (the IndexedDB store, the browser benchmarks) is
# only linted in a wasm build. The native benchmark binaries do not build for wasm.
cargo clippy --target wasm32-unknown-unknown -p lightwire-noise -p lightwire-wire -p lightwire-primitives \
  -p lightwire-chain -p lightwire-filter -p lightwire-wallet -p lightwire-proto -p lightwire-store -p lightwire-store-reload -p lightwire-benches -p lightwire \
  --lib --tests \
  -- -D warnings

step "cargo test (native)"
cargo test --workspace --all-targets

step "the event contract: the engine's events (crates/client/src/events.rs) against pkg/src/types.ts"
node tests/event-contract/run.mjs

# Each crate with browser tests has a webdriver.json giving Chromium its headless flags.
# wasm-bindgen-test skips a test binary that lacks wasm_bindgen_test_configure!(run_in_browser)
# with only a notice; treat that notice as a failure so no suite is silently left out.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# Each runs in Chromium, Firefox (webdriver.json names both binaries) and WebKit (WebKitGTK's
# WebDriver standing in for safaridriver: scripts/webkit-driver.sh).
for crate in crates/noise crates/wire crates/primitives crates/chain crates/filter crates/wallet crates/proto crates/store crates/client; do
  for engine in chrome firefox safari; do
    step "wasm-pack test --headless --$engine $crate"
    case "$engine" in
      chrome) driver=(--chromedriver "$CHROMEDRIVER") ;;
      firefox) driver=(--geckodriver "$GECKODRIVER_BIN") ;;
      safari) driver=(--safaridriver "$ROOT/scripts/webkit-driver.sh") ;;
    esac
    # WebKitGTK's runs of these suites fail now and then (about 1 in 10 for the client
    # crate) with a trap or a wrong value inside one test, a different test each time,
    # never in Chromium, Firefox or natively; the cause is not found yet (see the notes in
    # benches/README.md). A failing WebKit run is run once more, and said so; a test that
    # fails twice fails the suite.
    if ! wasm-pack test --headless "--$engine" "${driver[@]}" "$crate" 2>&1 | tee "$log"; then
      if [ "$engine" != safari ]; then
        exit 1
      fi
      echo "warning: $crate failed in WebKit; running it once more (a known WebKit flake)" >&2
      wasm-pack test --headless "--$engine" "${driver[@]}" "$crate" 2>&1 | tee "$log"
    fi
    if grep -q "only configured to run in node.js" "$log"; then
      echo "error: a test suite of $crate was skipped in the browser (missing run_in_browser)" >&2
      exit 1
    fi
  done
done

step "IndexedDB store: reload and browser crash in the middle of a sync (Chromium, CDP)"
node tests/store-reload/run.mjs

# build-pkg.sh type-checks the TypeScript layer (strict tsc) as it builds it.
step "the npm package (wasm-pack --target web + tsc) and the gateway binaries (release)"
bash scripts/build-pkg.sh
cargo build --release -p lightwire-gateway -p lightwire-chain -p lightwire-tests --bins

step "end to end: the package in Chromium, Firefox and WebKit against real gateways (tests/e2e)"
node tests/e2e/run.mjs --no-build

step "a public gateway: an https page in Chromium, Firefox and WebKit, wss:// through Debian's nginx to a fleet, and native TLS (tests/public)"
node tests/public/run.mjs --no-build

step "the package from its tarball in a fresh Vite + TypeScript app, in the three engines (tests/package)"
node tests/package/run.mjs

step "tsc --noEmit (the dashboard, against the built package's .d.ts)"
(cd web && npx --no-install tsc --noEmit -p .)

step "the dashboard as a user meets it: npm start and the page in Chromium, Firefox and WebKit (tests/dashboard)"
node tests/dashboard/run.mjs

echo
echo "all tests passed in $(( $(date +%s) - started )) s"
