#!/usr/bin/env bash
# resil_instr.sh: user-space instructions per proxied request (callgrind)
# of one weir worker with plain round robin, and with outlier, limits,
# breaker and retry configured on the group, then adaptive_concurrency and
# max_requests_per_server alone: what the traffic controls cost when
# nothing fails.
#
#   tests/bench/resil_instr.sh [--requests N] [--port P]
#
# Ports P (weir) and P+1 (an nginx origin), default 28380; loopback only.
set -euo pipefail
N=5000 P=28380
while [ $# -gt 0 ]; do
  case "$1" in
    --requests) N=$2; shift 2;;
    --port) P=$2; shift 2;;
    *) echo "resil_instr.sh: unknown option $1" >&2; exit 2;;
  esac
done
O=$((P + 1))
WEIR=${WEIR_BIN:-build/weir}
W=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$W"; }
trap cleanup EXIT

cat >"$W/origin.conf" <<NGX
daemon off; worker_processes 1; error_log $W/origin.err; pid $W/origin.pid;
events { worker_connections 1024; }
http { access_log off; server { listen 127.0.0.1:$O; keepalive_requests 1000000;
  location / { return 200 "hello from origin\n"; } } }
NGX
nginx -c "$W/origin.conf" & PIDS+=($!)

conf() { # name extra-group-keys
  cat >"$W/$1.conf" <<CONF
workers = 1; master_process = false;
log = { error = "$W/$1.err"; access = "off"; level = "warn"; };
listeners = ( { address = "127.0.0.1:$P"; } );
upstreams = ( { name = "g"; servers = ( { address = "127.0.0.1:$O"; } ); $2 } );
routes = ( { upstream = "g"; } );
CONF
}
conf plain ""
conf controls 'outlier = { consecutive_5xx = 5; failure_percentage = 50; };
  limits = { max_requests = 10000; max_connections = 10000; };
  breaker = { error_percent = 5; pool_percent = 80; latency_p99 = "1s"; };
  retry = { on = [ "connect-failure", "reset", "timeout", "503" ]; attempts = 3; };'

# the caps alone: the adaptive one (the master's 250 ms tick runs in the
# measured process with master_process = false: its share falls with the
# rate) and the per-server one
conf adaptive 'adaptive_concurrency = { initial_limit = 1000; max_limit = 10000; };'
conf perserver 'limits = { max_requests_per_server = 10000; };'

for c in plain controls adaptive perserver; do
  setsid valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$W/cg.$c.%p" \
    "$WEIR" -c "$W/$c.conf" >"$W/$c.out" 2>&1 & vp=$!
  PIDS+=($vp)
  for _ in $(seq 1 200); do curl -fs -o /dev/null "http://127.0.0.1:$P/" && break; sleep 0.1; done
  callgrind_control -i on "$vp" >/dev/null 2>&1 || callgrind_control -i on >/dev/null
  ok=$(h2load --h1 -n "$N" -c 16 -t 1 "http://127.0.0.1:$P/" 2>&1 | awk '/^requests:/ {print $8}')
  callgrind_control -d "$vp" >/dev/null 2>&1 || callgrind_control -d >/dev/null
  total=$(for f in "$W"/cg.$c.*; do callgrind_annotate "$f" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",","",$1); print $1}'; done | awk '{s+=$1} END {print s+0}')
  echo "$c requests_ok=$ok instr_per_req=$(awk -v t="$total" -v n="${ok:-0}" 'BEGIN { printf "%.0f\n", n ? t/n : 0 }')"
  kill "$vp" 2>/dev/null || true; wait "$vp" 2>/dev/null || true
  sleep 0.5
done
