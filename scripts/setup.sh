#!/usr/bin/env bash
# Install what the build and the tests need, skipping whatever is already there.
# Safe to run any number of times; needs no input (CI runs it with CI=true, no stdin).
set -euo pipefail
source "$(dirname "$0")/env.sh"
cd "$ROOT"

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo -n "$@"; fi; }

# cargo install, preferring the crate's own lock file; the registry mirror here lacks
# some versions such lock files pin, so fall back to a fresh resolution.
cargo_install() {
  cargo install --locked "$@" 2>/dev/null || cargo install "$@"
}

if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  step "rustup target add wasm32-unknown-unknown"
  rustup target add wasm32-unknown-unknown
fi

if ! command -v wasm-pack >/dev/null; then
  step "cargo install wasm-pack"
  cargo_install wasm-pack
fi

# wasm-pack must never download wasm-bindgen: keep the CLI at exactly the version in
# Cargo.lock on PATH.
want=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock)
have=$(wasm-bindgen --version 2>/dev/null | awk '{print $2}' || true)
if [ -n "$want" ] && [ "$want" != "$have" ]; then
  step "cargo install wasm-bindgen-cli $want (found: ${have:-none})"
  cargo_install wasm-bindgen-cli --version "$want" --force
fi

# geckodriver drives Firefox for the wasm test suites (wasm-pack test --firefox); Debian
# does not package it.
if ! command -v geckodriver >/dev/null; then
  step "cargo install geckodriver"
  cargo_install geckodriver
fi

missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
[ -x /usr/bin/chromedriver ] || missing+=(chromium-driver)
# The other engines users have (tests/engines.mjs): Firefox ESR, and WebKitGTK's
# MiniBrowser with its WebDriver, under a virtual display.
[ -x /usr/bin/firefox-esr ] || missing+=(firefox-esr)
[ -x /usr/bin/WebKitWebDriver ] || missing+=(webkit2gtk-driver)
[ -x /usr/bin/Xvfb ] || missing+=(xvfb)
[ -f /usr/share/i18n/locales/en_US ] || missing+=(locales)
# A public gateway's front (deploy/): Debian's nginx, and openssl for the certificate
# authority tests/public makes.
[ -x /usr/sbin/nginx ] || missing+=(nginx)
[ -x /usr/bin/openssl ] || missing+=(openssl)
# certutil puts that authority in a Firefox profile's own certificate store.
[ -x /usr/bin/certutil ] || missing+=(libnss3-tools)
# systemd-analyze checks deploy/'s unit file (tests/public).
[ -x /usr/bin/systemd-analyze ] || missing+=(systemd)
if [ ${#missing[@]} -gt 0 ]; then
  step "apt-get install ${missing[*]}"
  as_root apt-get update -qq
  # No service is started by a package here (policy-rc.d's "101: not allowed"): the tests
  # start their own nginx on loopback, and nothing else may hold port 80.
  policy=/usr/sbin/policy-rc.d
  placed=
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | as_root tee "$policy" >/dev/null
    as_root chmod 755 "$policy"
    placed=1
  fi
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  [ -z "$placed" ] || as_root rm -f "$policy"
fi

# WebKitGTK takes navigator.language from the process locale: under C it reports "C",
# which no user has and Intl refuses; tests/engines.mjs runs it under en_US.UTF-8.
if ! locale -a 2>/dev/null | grep -qix 'en_US.utf8'; then
  step "localedef en_US.UTF-8"
  as_root localedef -i en_US -f UTF-8 en_US.UTF-8
fi

# btcd (a real Bitcoin node) for the gateway's upstream test, built with Go.
if ! command -v btcd >/dev/null || ! command -v btcctl >/dev/null; then
  step "go install btcd and btcctl v0.26.2"
  go install github.com/btcsuite/btcd@v0.26.2 github.com/btcsuite/btcd/cmd/btcctl@v0.26.2
fi

# npm writes node_modules/.package-lock.json on install; `-nt` is also true when it is
# missing, so this installs on a fresh clone and again only when the lock file changes.
# `npm install`, not `npm ci`: the registry this machine reaches serves only some of
# rollup's per-platform optional packages (Vite's bundler), so the lock file lists only
# those, and `npm ci` refuses a lock file without all of them. The versions still come
# from the lock file.
if [ -f package-lock.json ] && [ package-lock.json -nt node_modules/.package-lock.json ]; then
  step "npm install (from package-lock.json)"
  npm install --no-audit --no-fund
fi

# The dashboard (web/) has its own dependencies: the package from ../pkg (a link), uPlot,
# Vite and TypeScript. Same rules: installed from its lock file on a fresh clone, and again
# only when that lock file changes.
if [ web/package-lock.json -nt web/node_modules/.package-lock.json ]; then
  step "npm install (web/, from web/package-lock.json)"
  (cd web && npm install --no-audit --no-fund)
fi

# The neutrino comparison's Go modules, only when asked (`setup.sh neutrino`, from
# scripts/bench-neutrino.sh): no test needs them.
if [ "${1:-}" = neutrino ]; then
  step "go mod download (benches/neutrino)"
  (cd benches/neutrino && go mod download)
fi
