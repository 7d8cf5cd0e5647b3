#!/usr/bin/env bash
# A benchmark in headless Chromium, or in Firefox or WebKit with LIGHTWIRE_BENCH_ENGINE=firefox
# or webkit (release wasm), with its table printed:
#   bash scripts/bench-wasm.sh                 the transport (wasm_transport)
#   bash scripts/bench-wasm.sh wasm_validate   header validation of the 925,000-header chain
#   bash scripts/bench-wasm.sh wasm_store      validation + IndexedDB store, several layouts
# wasm-bindgen-test-runner only shows console output with --nocapture, which is why this
# runs the test binary through cargo with the runner set, rather than `wasm-pack test`.
set -euo pipefail
source "$(dirname "$0")/env.sh"
cd "$ROOT/benches"
export CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner
# The store benchmark runs for minutes; the runner's default limit is 20 s.
export WASM_BINDGEN_TEST_TIMEOUT=${WASM_BINDGEN_TEST_TIMEOUT:-1800}
engine=${LIGHTWIRE_BENCH_ENGINE:-chromium}
case "$engine" in
  chromium) ;;
  # The runner takes GECKODRIVER before CHROMEDRIVER.
  firefox) export GECKODRIVER="$GECKODRIVER_BIN" ;;
  webkit) export SAFARIDRIVER="$ROOT/scripts/webkit-driver.sh" ;;
  *) echo "LIGHTWIRE_BENCH_ENGINE: chromium, firefox or webkit" >&2; exit 2 ;;
esac
step "building the wasm benchmark and running it in headless $engine"
bench=${1:-wasm_transport}
# The package's profile (Cargo.toml, wasm-pkg): what is measured is what ships.
# LIGHTWIRE_BENCH_FEATURES: the benchmarks crate's features to add (`libsecp`: the silent
# payments benchmark beside libsecp256k1, whose C needs clang with the wasm32 target, as
# CC_wasm32_unknown_unknown=clang-14 AR_wasm32_unknown_unknown=llvm-ar).
features=()
if [ -n "${LIGHTWIRE_BENCH_FEATURES:-}" ]; then features=(--features "$LIGHTWIRE_BENCH_FEATURES"); fi
cargo test --profile wasm-pkg --target wasm32-unknown-unknown "${features[@]}" --test "$bench" -- --nocapture
