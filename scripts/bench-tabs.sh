#!/usr/bin/env bash
# One gateway serving new tabs, with and without a mirror, native, release build: the
# gateway's CPU time and bytes sent per tab. Each tab is a lightwire-load connection
# asking what a new browser tab asks (compact headers, 20,000 a request, then filter
# headers): without a mirror, everything from genesis; with one (an export of the same
# chain), the headers and filter headers above the mirror's files and a probe at each
# filter-headers file's end. Runs alternate between the modes; prints every run, then a
# Markdown table (min / median) for benches/README.md.
#   bash scripts/bench-tabs.sh [COUNT [CLIENTS [RUNS]]]   (defaults 925000 100 3)
# CPU seconds, not wall time, are the figure to read: the load tool runs on the same
# machine, and its CPU competes with the gateway's.
set -euo pipefail
source "$(dirname "$0")/env.sh"
cd "$ROOT"
count=${1:-925000}
clients=${2:-100}
runs=${3:-3}
step "cargo build --release -p lightwire-load -p lightwire-gateway"
cargo build --release -p lightwire-load -p lightwire-gateway
bin=$ROOT/target/release
dir=$(mktemp -d)
gw_pid=
load_pid=
cleanup() {
  [ -n "$load_pid" ] && kill "$load_pid" 2>/dev/null || true
  [ -n "$gw_pid" ] && kill "$gw_pid" 2>/dev/null || true
  [ -n "$gw_pid" ] && wait "$gw_pid" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT

wait_for() { # FILE PATTERN SECONDS
  for _ in $(seq 1 $(( $3 * 10 ))); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  echo "timed out waiting for '$2' in $1" >&2; cat "$1" >&2; return 1
}
metric() { curl -s "$metrics" | awk -v m="$1" '$1 == m {print $2}'; }
# The gateway's user + system CPU time in clock ticks (/proc/PID/stat fields 14 and 15,
# counted after the parenthesised name, which may hold spaces).
cpu_ticks() {
  local stat rest
  stat=$(cat "/proc/$gw_pid/stat")
  rest=${stat##*) }
  read -ra f <<<"$rest"
  echo $(( f[11] + f[12] ))
}
ticks_per_s=$(getconf CLK_TCK)
# min / median of the numbers given (one each), printed with FORMAT.
min_median() { # FORMAT N...
  local fmt=$1; shift
  printf '%s\n' "$@" | sort -g | awk -v f="$fmt" '{v[NR] = $1} END {printf f " / " f, v[1], v[int((NR + 1) / 2)]}'
}

step "lightwire-gateway export --generate $count (the mirror)"
"$bin/lightwire-gateway" export --out "$dir/mirror" --generate "$count"
manifest=$dir/mirror/regtest/manifest.json

step "lightwire-gateway --generate $count"
# Every load client connects from 127.0.0.1: lift the per-address cap (default 64) and the
# rate of new connections (default 20 a second) above what one run opens.
"$bin/lightwire-gateway" --listen 127.0.0.1:0 --key-file "$dir/key" --generate "$count" \
  --metrics-listen 127.0.0.1:0 --max-per-address 20000 --max-new-per-second 1000000 \
  >"$dir/gw.out" 2>"$dir/gw.err" &
gw_pid=$!
wait_for "$dir/gw.out" "connect ws://" 120
connect=$(awk '{print $5}' "$dir/gw.out")
wait_for "$dir/gw.err" "/metrics" 10
metrics=$(grep -o 'http://[^ ]*/metrics' "$dir/gw.err")

declare -A wall cpu bytes
run_rows=()
for run in $(seq 1 "$runs"); do
  for mode in none mirror; do
    args=(--connect "$connect" --network regtest --clients "$clients" --compact
      --per-request 20000 --filter-headers)
    [ "$mode" = mirror ] && args+=(--manifest "$manifest")
    load=$(uptime | sed 's/.*load average: //')
    step "run $run, mirror: $mode, load average $load"
    cpu0=$(cpu_ticks); out0=$(metric lightwire_bytes_out_total)
    /usr/bin/time -f '%U %S' -o "$dir/time" "$bin/lightwire-load" "${args[@]}" >"$dir/load.out" 2>&1 &
    load_pid=$!
    if ! wait "$load_pid"; then
      load_pid=
      echo "lightwire-load failed (run $run, mirror: $mode):" >&2
      cat "$dir/load.out" >&2
      exit 1
    fi
    load_pid=
    # The gateway's share of closing the connections is part of serving them.
    for _ in $(seq 1 100); do [ "$(metric lightwire_connections_open)" = 0 ] && break; sleep 0.1; done
    cpu1=$(cpu_ticks); out1=$(metric lightwire_bytes_out_total)
    cat "$dir/load.out"
    secs=$(awk '$1 == "received" {for (i = 1; i <= NF; i++) if ($i == "in") print $(i + 1)}' "$dir/load.out")
    received=$(awk '$1 == "received" {print $2}' "$dir/load.out")
    tool_cpu=$(awk '{printf "%.2f", $1 + $2}' "$dir/time")
    gw_cpu=$(awk -v t=$(( cpu1 - cpu0 )) -v hz="$ticks_per_s" 'BEGIN {printf "%.2f", t / hz}')
    sent=$(( out1 - out0 ))
    wall[$mode]+="$secs "; cpu[$mode]+="$gw_cpu "; bytes[$mode]+="$sent "
    run_rows+=("| $run | $mode | $load | $secs | $gw_cpu | $sent | $received | $tool_cpu |")
    echo "${run_rows[-1]}"
  done
done

echo
echo "| run | mirror | load average before | wall s | gateway CPU s | gateway bytes sent | bytes the tool received | tool CPU s |"
echo "|---:|---|---|---:|---:|---:|---:|---:|"
printf '%s\n' "${run_rows[@]}"
echo
echo "| mirror | clients | wall s | gateway CPU s | gateway CPU per tab (ms) | gateway bytes sent | bytes sent per tab |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for mode in none mirror; do
  read -ra w <<<"${wall[$mode]}"; read -ra c <<<"${cpu[$mode]}"; read -ra b <<<"${bytes[$mode]}"
  per_cpu=(); per_bytes=()
  for x in "${c[@]}"; do per_cpu+=("$(awk -v x="$x" -v n="$clients" 'BEGIN {print x * 1000 / n}')"); done
  for x in "${b[@]}"; do per_bytes+=("$(( x / clients ))"); done
  echo "| $mode | $clients | $(min_median %.2f "${w[@]}") | $(min_median %.2f "${c[@]}") | $(min_median %.1f "${per_cpu[@]}") | $(min_median %.0f "${b[@]}") | $(min_median %.0f "${per_bytes[@]}") |"
done
