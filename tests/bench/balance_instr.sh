#!/usr/bin/env bash
# balance_instr.sh: user-space instructions per proxied request (callgrind)
# of one weir worker over a group of two servers, for each `balance`
# algorithm: what random, least_request, ring_hash and maglev (by the
# client address, then by a header, then with bounded_load) cost over rr.
#
#   [REQUESTS=N] [PORT=P] [ALGOS="rr maglev ..."] tests/bench/balance_instr.sh
#
# Ports P (weir), P+1 and P+2 (two nginx origins), default 28480; loopback.
set -euo pipefail
N=${REQUESTS:-5000} P=${PORT:-28480}
WEIR=${WEIR_BIN:-build/weir}
T=$(mktemp -d)
BG=()
finish() { for p in "${BG[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$T"; }
trap finish EXIT

printf 'daemon off; worker_processes 1; error_log %s/o.err; pid %s/o.pid;
events { worker_connections 1024; }
http { access_log off;
  server { listen 127.0.0.1:%d; keepalive_requests 1000000; location / { return 200 "a\\n"; } }
  server { listen 127.0.0.1:%d; keepalive_requests 1000000; location / { return 200 "b\\n"; } } }\n' \
  "$T" "$T" $((P + 1)) $((P + 2)) >"$T/o.conf"
nginx -c "$T/o.conf" & BG+=($!)

# NAME, or NAME+header (hash_key = "header:X-User", sent by every
# request), or NAME+bounded (bounded_load = 1.25)
for algo in ${ALGOS:-rr random least_request ring_hash maglev ring_hash+header maglev+header ring_hash+bounded maglev+bounded}; do
  balance=${algo%%+*} extra=""
  case $algo in
  *+header) extra='hash_key = "header:X-User";' ;;
  *+bounded) extra='bounded_load = 1.25;' ;;
  esac
  printf 'workers = 1; master_process = false;
log = { error = "%s/%s.err"; access = "off"; level = "warn"; };
listeners = ( { address = "127.0.0.1:%d"; } );
upstreams = ( { name = "g"; balance = "%s"; %s
  servers = ( { address = "127.0.0.1:%d"; }, { address = "127.0.0.1:%d"; } ); } );
routes = ( { upstream = "g"; } );\n' "$T" "$algo" "$P" "$balance" "$extra" $((P + 1)) $((P + 2)) >"$T/$algo.conf"
  setsid valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$T/cg.$algo.%p" \
    "$WEIR" -c "$T/$algo.conf" >"$T/$algo.out" 2>&1 & vg=$!
  BG+=($vg)
  for _ in $(seq 1 200); do curl -fs -o /dev/null "http://127.0.0.1:$P/" && break; sleep 0.1; done
  callgrind_control -i on "$vg" >/dev/null 2>&1
  done_n=$(h2load --h1 -n "$N" -c 16 -t 1 -H "X-User: user-1" "http://127.0.0.1:$P/" 2>&1 | awk '/^requests:/ {print $8}')
  callgrind_control -d "$vg" >/dev/null 2>&1
  instr=$(cat "$T"/cg."$algo".* | callgrind_annotate /dev/stdin 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",","",$1); print $1}')
  echo "$algo requests_ok=$done_n instr_per_req=$(awk -v t="${instr:-0}" -v n="${done_n:-0}" 'BEGIN { printf "%.0f\n", n ? t/n : 0 }')"
  kill "$vg" 2>/dev/null || true; wait "$vg" 2>/dev/null || true
  sleep 0.5
done
