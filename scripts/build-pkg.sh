#!/usr/bin/env bash
# Build the npm package in pkg/: the client crate's wasm (wasm-pack --target web, release)
# into pkg/wasm, then the TypeScript layer into pkg/dist. Run from anywhere.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
wasm-pack build crates/client --target web --release --no-pack --out-dir ../../pkg/wasm >&2
rm -f pkg/wasm/.gitignore
rm -rf pkg/dist
npx --no-install tsc -p pkg
