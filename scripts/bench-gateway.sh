#!/usr/bin/env bash
# Gateway benchmarks, native, release build: for fixed and for pooled frame
# buffers, the gateway's memory with 1, 1,000 and 10,000 idle connections that completed
# the handshake, and aggregate headers/s serving the 925,000-header chain to 1, 10 and 100
# concurrent clients. Prints Markdown rows for benches/README.md.
#   bash scripts/bench-gateway.sh [COUNT]      (COUNT: chain length, default 925000)
set -euo pipefail
source "$(dirname "$0")/env.sh"
cd "$ROOT"
count=${1:-925000}
step "cargo build --release -p lightwire-gateway -p lightwire-load"
cargo build --release -p lightwire-gateway -p lightwire-load
bin=$ROOT/target/release
dir=$(mktemp -d)
gw_pid=
load_pid=
cleanup() {
  [ -n "$load_pid" ] && kill "$load_pid" 2>/dev/null || true
  [ -n "$gw_pid" ] && kill "$gw_pid" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
# 10,000 connections need more descriptors than the usual soft limit (both processes).
ulimit -n "$(ulimit -Hn)"

wait_for() { # FILE PATTERN SECONDS
  for _ in $(seq 1 $(( $3 * 10 ))); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  echo "timed out waiting for '$2' in $1" >&2; cat "$1" >&2; return 1
}
metric() { curl -s "$metrics" | awk -v m="$1" '$1 == m {print $2}'; }
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$gw_pid/status"; }

memory_rows=()
throughput_rows=()
for mode in fixed pooled; do
  step "gateway --generate $count --buffers $mode"
  # Every load client connects from 127.0.0.1: lift the per-address cap (default 64) above
  # the 10,000 idle connections; the total cap (default 20,000) already allows them.
  "$bin/lightwire-gateway" --listen 127.0.0.1:0 --key-file "$dir/key" --generate "$count" \
    --metrics-listen 127.0.0.1:0 --buffers "$mode" --max-per-address 20000 --max-new-per-second 1000000 \
    >"$dir/gw.out" 2>"$dir/gw.err" &
  gw_pid=$!
  wait_for "$dir/gw.out" "connect ws://" 120
  connect=$(awk '{print $5}' "$dir/gw.out")
  metrics=$(grep -o 'http://[^ ]*/metrics' "$dir/gw.err")
  base_rss=$(rss_kb); base_heap=$(metric lightwire_allocated_bytes_live)
  for n in 1 1000 10000; do
    "$bin/lightwire-load" --connect "$connect" --network regtest --clients "$n" --idle 600 >"$dir/load.out" 2>&1 &
    load_pid=$!
    wait_for "$dir/load.out" "^idle" 300
    sleep 1
    open=$(metric lightwire_connections_open)
    rss=$(rss_kb); heap=$(metric lightwire_allocated_bytes_live)
    kill "$load_pid"; wait "$load_pid" 2>/dev/null || true; load_pid=
    memory_rows+=("| $mode | $n | $open | $(( (rss - base_rss) / 1024 )) | $(awk -v a="$rss" -v b="$base_rss" -v n="$n" 'BEGIN {printf "%.1f", (a - b) / n}') | $(( (heap - base_heap) / 1048576 )) | $(awk -v a="$heap" -v b="$base_heap" -v n="$n" 'BEGIN {printf "%.1f", (a - b) / n / 1024}') |")
    echo "${memory_rows[-1]}"
    for _ in $(seq 1 100); do [ "$(metric lightwire_connections_open)" = 0 ] && break; sleep 0.1; done
  done
  for n in 1 10 100; do
    line=$("$bin/lightwire-load" --connect "$connect" --network regtest --clients "$n" | tail -1)
    hps=$(echo "$line" | awk '{for (i = 1; i <= NF; i++) if ($i == "=") print $(i + 1)}')
    secs=$(echo "$line" | awk '{for (i = 1; i <= NF; i++) if ($i == "in") print $(i + 1)}')
    throughput_rows+=("| $mode | $n | $secs | $hps | $(metric lightwire_pool_in_use) |")
    echo "${throughput_rows[-1]}"
  done
  allocs_before=$(metric lightwire_allocations_total)
  "$bin/lightwire-load" --connect "$connect" --network regtest --clients 1 >/dev/null
  allocs_after=$(metric lightwire_allocations_total)
  echo "$mode: allocations while serving one more full sync (1,130 messages): $(( allocs_after - allocs_before ))"
  kill -TERM "$gw_pid"; wait "$gw_pid" 2>/dev/null || true; gw_pid=
done

echo
echo "| buffers | idle connections | open | RSS growth (MiB) | RSS per connection (KiB) | live heap growth (MiB) | live heap per connection (KiB) |"
echo "|---|---:|---:|---:|---:|---:|---:|"
printf '%s\n' "${memory_rows[@]}"
echo
echo "| buffers | clients | seconds | headers/s aggregate | pool buffers lent after |"
echo "|---|---:|---:|---:|---:|"
printf '%s\n' "${throughput_rows[@]}"
