#!/usr/bin/env bash
# The transport benchmark in headless Chromium (release wasm), with its table printed.
# wasm-bindgen-test-runner only shows console output with --nocapture, which is why this
# runs the test binary through cargo with the runner set, rather than `wasm-pack test`.
set -euo pipefail
source "$(dirname "$0")/env.sh"
cd "$ROOT/benches"
export CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner
step "building the wasm benchmark and running it in headless Chromium"
cargo test --release --target wasm32-unknown-unknown --test wasm_transport -- --nocapture "$@"
