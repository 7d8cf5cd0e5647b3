#!/usr/bin/env bash
# npm start: the demo. Installs and builds whatever is missing, starts a local
# lightwire-gateway serving a generated 925,000-header regtest chain (its key kept in .demo/
# between runs), exports the same chain as bulk files (.demo/bulk) and serves them as a
# mirror beside the dashboard (web/) on 127.0.0.1:8080, and prints the page's URL, which
# connects to that gateway and reads the chain's history from the mirror. Ctrl-C (or
# SIGTERM) stops everything it started.
#
#   npm start -- [options]          (or: bash scripts/start.sh [options])
#
# Options (each also as an environment variable):
#   --port N          the gateway's WebSocket port            LIGHTWIRE_GATEWAY_PORT  (8335)
#   --metrics-port N  the gateway's /metrics port             LIGHTWIRE_METRICS_PORT  (8336)
#   --web-port N      the page's port                         LIGHTWIRE_WEB_PORT      (8080)
#   --generate N      a generated regtest chain of N headers  LIGHTWIRE_DEMO_GENERATE (925000)
#   --headers-file F --network NET [--from-height H]
#                     serve 80-byte headers from a file instead
#   --upstream HOST:PORT --network NET
#                     follow your own Bitcoin node over P2P instead
#   --gateway CONNECT point the page at this gateway (repeat for more) and start none here;
#                     add --network NET if it does not serve regtest
#   --demo-dir DIR    where the gateway's key is kept         LIGHTWIRE_DEMO_DIR      (.demo)
set -euo pipefail
# Relative paths in the options are the caller's: npm runs scripts from the root and says
# where it was started in INIT_CWD.
here=${INIT_CWD:-$PWD}
source "$(dirname "$0")/env.sh"
cd "$ROOT"

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }

gw_port=${LIGHTWIRE_GATEWAY_PORT:-8335}
metrics_port=${LIGHTWIRE_METRICS_PORT:-8336}
web_port=${LIGHTWIRE_WEB_PORT:-8080}
generate=${LIGHTWIRE_DEMO_GENERATE:-925000}
demo_dir=${LIGHTWIRE_DEMO_DIR:-$ROOT/.demo}
network=""
source_args=()
gateways=()

absolute() { case "$1" in /*) echo "$1" ;; *) echo "$here/$1" ;; esac; }
die() {
  echo "npm start: $*" >&2
  exit 2
}
while [ $# -gt 0 ]; do
  opt=$1
  case "$opt" in
    -h | --help) usage; exit 0 ;;
    --port | --metrics-port | --web-port | --generate | --headers-file | --upstream | \
      --from-height | --network | --gateway | --demo-dir) ;;
    *) die "unknown option $opt (see --help)" ;;
  esac
  [ $# -ge 2 ] || die "$opt needs a value (see --help)"
  case "$opt" in
    --port) gw_port=$2 ;;
    --metrics-port) metrics_port=$2 ;;
    --web-port) web_port=$2 ;;
    --generate) generate=$2 ;;
    --headers-file) source_args+=("$opt" "$(absolute "$2")") ;;
    --upstream | --from-height) source_args+=("$opt" "$2") ;;
    --network) network=$2 ;;
    --gateway) gateways+=("$2") ;;
    --demo-dir) demo_dir=$(absolute "$2") ;;
  esac
  shift 2
done

if [ ${#source_args[@]} -gt 0 ]; then
  [ -n "$network" ] || die "--headers-file and --upstream need --network NET"
  source_args+=(--network "$network")
else
  [ -z "$network" ] || [ "$network" = regtest ] || [ ${#gateways[@]} -gt 0 ] ||
    die "--generate makes a regtest chain; --network $network needs --headers-file, --upstream or --gateway"
  network=${network:-regtest}
  source_args=(--generate "$generate")
fi

bash scripts/setup.sh

# Build what is missing (npm test rebuilds everything; this only fills gaps).
if [ ! -f pkg/dist/index.js ] || [ ! -f pkg/wasm/lightwire_bg.wasm ] || [ ! -f pkg/wasm-sp/lightwire_bg.wasm ]; then
  step "building the npm package (pkg/)"
  bash scripts/build-pkg.sh
fi
if [ ${#gateways[@]} -eq 0 ] && [ ! -x target/release/lightwire-gateway ]; then
  step "cargo build --release -p lightwire-gateway"
  cargo build --release -p lightwire-gateway --bins
fi
if [ ! -x web/node_modules/.bin/vite ]; then
  step "npm install (web/)"
  (cd web && npm install --no-audit --no-fund)
fi
# The page: built again when it or the package changed since the last build.
if [ ! -f web/dist/index.html ] ||
  [ -n "$(find web/index.html web/src web/vite.config.ts web/package.json pkg/dist pkg/wasm pkg/wasm-sp \
    -newer web/dist/index.html -print -quit)" ]; then
  step "vite build (web/)"
  (cd web && node_modules/.bin/vite build --logLevel warn)
fi

# ---------------------------------------------------------------- run

pids=()
stopping=0
cleanup() {
  [ "$stopping" = 0 ] || return 0
  stopping=1
  [ ${#pids[@]} -gt 0 ] || return 0
  kill -TERM "${pids[@]}" 2>/dev/null || true
  for _ in $(seq 1 50); do
    alive=0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ "$alive" = 1 ] || break
    sleep 0.1
  done
  kill -KILL "${pids[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
  echo "npm start: stopped the gateway and the page server"
}
trap 'cleanup; exit 130' INT
trap 'cleanup; exit 143' TERM
trap cleanup EXIT

mkdir -p "$demo_dir"
web_out="$demo_dir/web.out"
gw_out="$demo_dir/gateway.out"

# Wait for `pattern` in `file`, written by process `pid`; fail with `what` if it exits first.
await_line() {
  local file=$1 pattern=$2 pid=$3 what=$4
  until grep -q "$pattern" "$file" 2>/dev/null; do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "npm start: $what" >&2
      exit 1
    fi
    sleep 0.2
  done
}

# The mirror: the chain the gateway serves, exported as bulk files (docs/PROTOCOL.md,
# "Bulk files"), once (a later run appends what is new, or starts over for another chain).
# None for --upstream (not exported yet) or --gateway (not ours).
bulk_args=()
if [ ${#gateways[@]} -eq 0 ] && [[ " ${source_args[*]} " != *" --upstream "* ]]; then
  step "lightwire-gateway export (the demo's mirror, $demo_dir/bulk)"
  if ! target/release/lightwire-gateway export --out "$demo_dir/bulk" "${source_args[@]}"; then
    echo "npm start: the old export is of another chain: exporting again"
    rm -rf "$demo_dir/bulk"
    target/release/lightwire-gateway export --out "$demo_dir/bulk" "${source_args[@]}"
  fi
  bulk_args=(--bulk "$demo_dir/bulk")
fi

node scripts/serve.mjs web/dist --host 127.0.0.1 --port "$web_port" "${bulk_args[@]}" >"$web_out" &
pids+=($!)
web_pid=$!

gw_pid=""
if [ ${#gateways[@]} -eq 0 ]; then
  step "lightwire-gateway on 127.0.0.1:$gw_port (${source_args[*]})"
  : >"$gw_out"
  # Its log goes to this terminal; its connect line to gw_out.
  target/release/lightwire-gateway --listen "127.0.0.1:$gw_port" --key-file "$demo_dir/gateway.key" \
    --metrics-listen "127.0.0.1:$metrics_port" "${source_args[@]}" >"$gw_out" &
  gw_pid=$!
  pids+=("$gw_pid")
  await_line "$gw_out" 'connect ws://' "$gw_pid" \
    "the gateway did not start (see its message above; another port: --port N --metrics-port N)"
  gateways=("$(grep -o 'connect ws://[^ ]*' "$gw_out" | head -n 1 | cut -d' ' -f2)")
fi
await_line "$web_out" '^serving ' "$web_pid" \
  "the page server did not start (see its message above; another port: --web-port N)"

# The query: only what would break it is escaped, so the connect string stays readable.
query=""
for g in "${gateways[@]}"; do
  e=${g//%/%25}
  e=${e//#/%23}
  e=${e//&/%26}
  e=${e//+/%2B}
  e=${e// /%20}
  query+="gw=$e&"
done
[ ${#bulk_args[@]} -eq 0 ] || query+="bulk=/bulk/$network/&"
url="http://127.0.0.1:$web_port/?${query}network=$network"

echo
echo "lightwire demo"
for g in "${gateways[@]}"; do echo "  gateway  $g"; done
[ ${#bulk_args[@]} -eq 0 ] || echo "  mirror   http://127.0.0.1:$web_port/bulk/$network/"
[ -z "$gw_pid" ] || echo "  metrics  http://127.0.0.1:$metrics_port/metrics"
echo "  network  $network"
echo
echo "Open $url"
echo
echo "Ctrl-C stops it."

# Until Ctrl-C, or until the gateway or the page server exits.
wait -n "${pids[@]}" || true
if ! kill -0 "$web_pid" 2>/dev/null; then
  echo "npm start: the page server stopped" >&2
elif [ -n "$gw_pid" ] && ! kill -0 "$gw_pid" 2>/dev/null; then
  echo "npm start: the gateway stopped" >&2
fi
exit 1
