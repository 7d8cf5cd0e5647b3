#!/usr/bin/env bash
# Install what the build and the tests need, skipping whatever is already there.
# Safe to run any number of times; needs no input (CI runs it with CI=true, no stdin).
#
# On a brand-new machine this took 14.5 minutes, 12.4 of them three `cargo install`s one
# after the other, each building its dependencies alone at full release optimisation
# (codegen-units 1, LTO where the crate asks for it) while the two cores sat idle during
# every link and every download. Now: the packages that are only downloaded and unpacked
# (Debian's, npm's) and btcd's Go build run in the background beside the Rust builds, and the
# three Rust tools build at opt-level 1 into one shared target directory (the dependencies
# they have in common are built once, and a later run that needs one again finds them).
# None of the three does heavy work: wasm-pack and geckodriver only start other programs,
# and wasm-bindgen's own work is a second or two per module at opt-level 1.
# (benches/README.md, "The suite's time", has the figures before and after.)
set -euo pipefail
source "$(dirname "$0")/env.sh"
cd "$ROOT"

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo -n "$@"; fi; }

# Background jobs: each writes its own log; `finish` waits for all of them, prints each
# log with the time it took, and fails if any failed.
bg_names=() bg_pids=() bg_logs=() bg_starts=()
bg_dir=$(mktemp -d)
trap 'rm -rf "$bg_dir"' EXIT
background() {
  local name=$1; shift
  local log="$bg_dir/${#bg_names[@]}.log"
  step "$name (in the background)"
  # The job notes when it ended: the log then tells each one's own time, not when
  # `finish` came to wait for it.
  ( rc=0; "$@" >"$log" 2>&1 || rc=$?; date +%s >"$log.end"; exit "$rc" ) &
  bg_names+=("$name") bg_pids+=($!) bg_logs+=("$log") bg_starts+=("$(date +%s)")
}
finish() {
  local failed=0 i
  for i in "${!bg_pids[@]}"; do
    if wait "${bg_pids[$i]}"; then
      printf '\n==> done: %s, in %d s  [%s]\n' "${bg_names[$i]}" \
        "$(( $(cat "${bg_logs[$i]}.end") - bg_starts[i] ))" "$(date -u +%T)"
      tail -n 5 "${bg_logs[$i]}"
    else
      printf '\n==> FAILED: %s\n' "${bg_names[$i]}" >&2
      cat "${bg_logs[$i]}" >&2
      failed=1
    fi
  done
  bg_pids=()
  return "$failed"
}

# cargo install, preferring the crate's own lock file; the registry mirror here lacks
# some versions such lock files pin, so fall back to a fresh resolution. The tools are
# built quickly (opt-level 1, several codegen units, no LTO: the environment's profile
# settings take precedence over a crate's own) into a target directory they share.
cargo_install() {
  env CARGO_TARGET_DIR="$ROOT/target/tools" \
    CARGO_PROFILE_RELEASE_OPT_LEVEL=1 CARGO_PROFILE_RELEASE_LTO=false \
    CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 CARGO_PROFILE_RELEASE_DEBUG=false \
    CARGO_PROFILE_RELEASE_INCREMENTAL=false \
    bash -c 'cargo install --locked "$@" 2>/dev/null || cargo install "$@"' cargo_install "$@"
}

apt_install() {
  as_root apt-get update -qq
  # No service is started by a package here (policy-rc.d's "101: not allowed"): the tests
  # start their own nginx on loopback, and nothing else may hold port 80.
  local policy=/usr/sbin/policy-rc.d placed=
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | as_root tee "$policy" >/dev/null
    as_root chmod 755 "$policy"
    placed=1
  fi
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
  [ -z "$placed" ] || as_root rm -f "$policy"
  # WebKitGTK takes navigator.language from the process locale: under C it reports "C",
  # which no user has and Intl refuses; tests/engines.mjs runs it under en_US.UTF-8.
  if ! locale -a 2>/dev/null | grep -qix 'en_US.utf8'; then
    as_root localedef -i en_US -f UTF-8 en_US.UTF-8
  fi
}

# First what only downloads and unpacks, and btcd's Go build, in the background.
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
if [ ${#missing[@]} -gt 0 ] || ! locale -a 2>/dev/null | grep -qix 'en_US.utf8'; then
  background "apt-get install ${missing[*]} (and the en_US.UTF-8 locale)" apt_install "${missing[@]}"
fi

# npm writes node_modules/.package-lock.json on install; `-nt` is also true when it is
# missing, so this installs on a fresh clone and again only when the lock file changes.
# `npm install`, not `npm ci`: the registry this machine reaches serves only some of
# rollup's per-platform optional packages (Vite's bundler), so the lock file lists only
# those, and `npm ci` refuses a lock file without all of them. The versions still come
# from the lock file.
# The dashboard (web/) has its own dependencies: the package from ../pkg (a link), uPlot,
# Vite and TypeScript. Same rules: installed from its lock file on a fresh clone, and again
# only when that lock file changes. One after the other: npm's cache is one directory.
npm_installs=()
[ ! -f package-lock.json ] || [ ! package-lock.json -nt node_modules/.package-lock.json ] || npm_installs+=(.)
[ ! web/package-lock.json -nt web/node_modules/.package-lock.json ] || npm_installs+=(web)
npm_install_all() {
  local d
  for d in "$@"; do (cd "$d" && npm install --no-audit --no-fund); done
}
if [ ${#npm_installs[@]} -gt 0 ]; then
  background "npm install in ${npm_installs[*]} (from package-lock.json)" npm_install_all "${npm_installs[@]}"
fi

# btcd (a real Bitcoin node) for the gateway's upstream test, built with Go.
if ! command -v btcd >/dev/null || ! command -v btcctl >/dev/null; then
  background "go install btcd and btcctl v0.26.2" \
    go install github.com/btcsuite/btcd@v0.26.2 github.com/btcsuite/btcd/cmd/btcctl@v0.26.2
fi

# The neutrino comparison's Go modules, only when asked (`setup.sh neutrino`, from
# scripts/bench-neutrino.sh): no test needs them.
if [ "${1:-}" = neutrino ]; then
  step "go mod download (benches/neutrino)"
  (cd benches/neutrino && go mod download)
fi

# Then the Rust tools, in the foreground.
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

finish
