#!/usr/bin/env bash
# Every test: native (cargo), then wasm in headless Chromium (wasm-pack test).
set -euo pipefail
source "$(dirname "$0")/env.sh"
cd "$ROOT"
bash scripts/setup.sh
started=$(date +%s)

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

step "cargo test (native)"
cargo test --workspace --all-targets

# Each crate with browser tests has a webdriver.json giving Chromium its headless flags.
for crate in crates/noise crates/wire; do
  step "wasm-pack test --headless --chrome $crate"
  wasm-pack test --headless --chrome --chromedriver "$CHROMEDRIVER" "$crate"
done

echo
echo "all tests passed in $(( $(date +%s) - started )) s"
