#!/usr/bin/env bash
# Build the npm package in pkg/: the client crate's wasm (wasm-pack --target web, release)
# into pkg/wasm, optimised with wasm-opt, then the TypeScript layer into pkg/dist. Run from
# anywhere.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
# The wasm-pkg profile: release, with the wallet and the curve built for size (Cargo.toml).
wasm-pack build crates/client --target web --profile wasm-pkg --no-opt --no-pack --out-dir ../../pkg/wasm >&2
rm -f pkg/wasm/.gitignore
# The second module, with silent payments (`silentPayments: true`): the same engine with
# the receiver's scan, fetched only by a client that asks for it.
wasm-pack build crates/client --target web --profile wasm-pkg --no-opt --no-pack --out-dir ../../pkg/wasm-sp -- --features silent-payments >&2
rm -f pkg/wasm-sp/.gitignore

# wasm-opt from the npm package `binaryen`, pinned in package.json (binaryen 132; wasm-pack's
# own run stays off, --no-opt, as it would take Debian's older binaryen or download one). The features are the ones rustc lists in the module's target_features
# section, no more: wasm-opt may then use only what the module already needs (SIMD128 is
# the newest, Safari 16.4), where --all-features would let it emit instructions some
# browsers lack. Binaryen drops the name section (function names, 83 KB) unless given -g:
# LIGHTWIRE_WASM_NAMES=1 keeps it, for a CPU profile that names functions (not for the
# size check, which counts the section).
names=()
if [ -n "${LIGHTWIRE_WASM_NAMES:-}" ]; then names=(-g); fi
for wasm in pkg/wasm/lightwire_bg.wasm pkg/wasm-sp/lightwire_bg.wasm; do
  node_modules/.bin/wasm-opt -O3 "${names[@]}" \
    --enable-simd --enable-bulk-memory --enable-bulk-memory-opt --enable-sign-ext \
    --enable-mutable-globals --enable-nontrapping-float-to-int --enable-reference-types \
    --enable-multivalue --enable-call-indirect-overlong \
    "$wasm" -o "$wasm" >&2
done

rm -rf pkg/dist
npx --no-install tsc -p pkg
# The licence texts and the changelog live at the repository's root; the package ships copies.
cp LICENSE-MIT LICENSE-APACHE CHANGELOG.md pkg/
