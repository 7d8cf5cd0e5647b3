#!/usr/bin/env bash
# A stand-in for safaridriver, for wasm-bindgen-test-runner (SAFARIDRIVER, or wasm-pack
# test --safari --safaridriver): WebKitGTK's WebDriver, whose default browser is its
# MiniBrowser (Safari's engine), on a virtual display of its own and a real locale
# (WebKitGTK reports navigator.language "C" under LANG=C, which Intl refuses). Arguments
# (the runner's --port=N) go to WebKitWebDriver.
set -euo pipefail
display=":$((100 + RANDOM % 400))"
Xvfb "$display" -screen 0 1280x800x24 -nolisten tcp &
xvfb=$!
for _ in $(seq 50); do [ -e "/tmp/.X11-unix/X${display#:}" ] && break; sleep 0.1; done
DISPLAY=$display LANG=en_US.UTF-8 LC_ALL=en_US.UTF-8 \
  PATH="/usr/lib/x86_64-linux-gnu/webkit2gtk-4.1:$PATH" WebKitWebDriver "$@" &
driver=$!
trap 'kill "$driver" "$xvfb" 2>/dev/null || true' EXIT INT TERM
# The runner ends its driver with SIGKILL, which no trap sees: a watcher takes the display
# and the driver (and its browser) down once this script is gone.
self=$$
(while kill -0 "$self" 2>/dev/null; do sleep 0.5; done
  pkill -P "$driver" 2>/dev/null || true
  kill "$driver" "$xvfb" 2>/dev/null || true) &
wait "$driver"
