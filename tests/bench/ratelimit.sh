#!/usr/bin/env bash
# ratelimit.sh: what rate limits cost weir, and how exact weir, nginx and
# HAProxy are with the same per-IP limit.
#
#   tests/bench/ratelimit.sh [--mode instr|peers|all] [--requests N] [--seconds S]
#
#   instr   user-space instructions per proxied request (callgrind, one
#           worker, master_process = false) with 0, 1 and 3 limits on the
#           route (client_ip, header:X-K, route), every request admitted
#           (the limits are generous): the cost of deciding, not of
#           refusing. Prints each and the increase per limit.
#   peers   weir (2 workers), nginx (2 workers, limit_req burst nodelay,
#           zone in shared memory) and HAProxy (nbthread 2, a stick table
#           http_req_rate(1s)) with 50 requests/s per client address, burst
#           20, under full load from 8 addresses of 127.0.0.0/8 for S
#           seconds (tests/bench/ratelimit_load.py); prints, per proxy, the
#           admitted count and how far it is from the exact bound
#           (burst + rate x t per address).
#
# Everything listens on 127.0.0.1 on free ports; every load is bounded.
set -euo pipefail

MODE=all NREQ=20000 SECS=5
while [ $# -gt 0 ]; do
  case "$1" in
    --mode) MODE=$2; shift 2;;
    --requests) NREQ=$2; shift 2;;
    --seconds) SECS=$2; shift 2;;
    -h|--help) sed -n '2,22p' "$0"; exit 0;;
    *) echo "ratelimit.sh: unknown option $1" >&2; exit 2;;
  esac
done

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
WEIR=${WEIR_BIN:-$REPO/build/weir}
W=$(mktemp -d /tmp/ratelimit-bench.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  sleep 0.3
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 1 200); do (echo > "/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.05; done; echo "nothing on port $1" >&2; return 1; }

ORIGIN=$(port)
cat > "$W/origin.conf" <<EOF
worker_processes 1; daemon off; master_process off;
error_log $W/origin.err; pid $W/origin.pid;
events { worker_connections 8192; }
http { access_log off; keepalive_requests 100000000;
  server { listen 127.0.0.1:$ORIGIN; location / { return 200 "hello from origin\n"; } } }
EOF
nginx -p "$W" -c "$W/origin.conf" & PIDS+=($!)
wait_port "$ORIGIN"

# weir_conf PORT WORKERS MASTER LIMITS(0|1|3|peer)
weir_conf() {
  local lim routes
  case $4 in
    0) lim=""; routes="";;
    1) lim='rate_limits = ( { name = "ip"; key = "client_ip"; rate = "1000000/s"; burst = 1000000; } );'
       routes='rate_limits = [ "ip" ];';;
    3) lim='rate_limits = ( { name = "ip"; key = "client_ip"; rate = "1000000/s"; burst = 1000000; },
         { name = "key"; key = "header:X-K"; rate = "1000000/s"; burst = 1000000; },
         { name = "route"; key = "route"; rate = "1000000/s"; burst = 1000000; } );'
       routes='rate_limits = [ "ip", "key", "route" ];';;
    peer) lim='rate_limits = ( { name = "ip"; key = "client_ip"; rate = "50/s"; burst = 20; } );'
       routes='rate_limits = [ "ip" ];';;
  esac
  cat <<EOF
workers = $2; master_process = $3; worker_cpu_affinity = false;
log = { error = "$W/weir.err"; access = "off"; level = "warn"; };
listeners = ( { address = "127.0.0.1:$1"; backlog = 4096; } );
upstreams = ( { name = "o"; keepalive = 64; servers = ( { address = "127.0.0.1:$ORIGIN"; } ); } );
$lim
routes = ( { path = "/"; upstream = "o"; $routes } );
EOF
}

if [ "$MODE" = instr ] || [ "$MODE" = all ]; then
  declare -A INS
  for n in 0 1 3; do
    P=$(port)
    weir_conf "$P" 1 false "$n" > "$W/weir.$n.conf"
    valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$W/cg.$n.%p" \
      "$WEIR" -c "$W/weir.$n.conf" 2> "$W/vg.$n.err" & VP=$!; PIDS+=($VP)
    wait_port "$P"
    # warm: pools and slabs filled, the key in the table
    h2load --h1 -n 200 -c 16 -t 1 -H "X-K: abc" "http://127.0.0.1:$P/" > /dev/null 2>&1
    callgrind_control -i on "$VP" > /dev/null
    ok=$(h2load --h1 -n "$NREQ" -c 16 -t 1 -H "X-K: abc" "http://127.0.0.1:$P/" 2>&1 | awk '/^status codes:/ {print $3}')
    callgrind_control -d "$VP" > /dev/null
    callgrind_control -i off "$VP" > /dev/null
    kill "$VP"; wait "$VP" 2>/dev/null || true
    total=$(for f in "$W"/cg.$n.*.[0-9]*; do callgrind_annotate "$f" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",","",$1); print $1}'; done | awk '{s+=$1} END {print s+0}')
    INS[$n]=$(awk -v t="$total" -v k="${ok:-0}" 'BEGIN { if (k == 0) print "nan"; else printf "%.0f\n", t/k }')
    [ "${ok:-0}" = "$NREQ" ] || echo "# $n limits: only ${ok:-0} of $NREQ requests got 2xx" >&2
  done
  echo "instr_per_req limits0=${INS[0]} limits1=${INS[1]} limits3=${INS[3]}"
  awk -v a="${INS[0]}" -v b="${INS[1]}" -v c="${INS[3]}" 'BEGIN {
    printf "per_limit one=+%.0f (%.2f%%) three=+%.0f each (%.2f%% each)\n", b-a, 100*(b-a)/a, (c-a)/3, 100*(c-a)/3/a }'
fi

if [ "$MODE" = peers ] || [ "$MODE" = all ]; then
  WP=$(port) NP=$(port) HP=$(port)
  weir_conf "$WP" 2 true peer > "$W/weir.peer.conf"
  "$WEIR" -c "$W/weir.peer.conf" & PIDS+=($!)
  cat > "$W/nginx.conf" <<EOF
worker_processes 2; daemon off;
error_log $W/nginx.err; pid $W/nginx.pid;
events { worker_connections 8192; }
http { access_log off; keepalive_requests 100000000;
  limit_req_zone \$binary_remote_addr zone=ip:10m rate=50r/s;
  limit_req_status 429;
  upstream o { server 127.0.0.1:$ORIGIN; keepalive 64; }
  server { listen 127.0.0.1:$NP;
    location / { limit_req zone=ip burst=20 nodelay;
      proxy_pass http://o; proxy_http_version 1.1; proxy_set_header Connection ""; } } }
EOF
  nginx -p "$W" -c "$W/nginx.conf" & PIDS+=($!)
  cat > "$W/haproxy.cfg" <<EOF
global
  nbthread 2
defaults
  mode http
  timeout connect 5s
  timeout client 30s
  timeout server 30s
frontend f
  bind 127.0.0.1:$HP
  stick-table type ip size 1m expire 30s store http_req_rate(1s)
  http-request track-sc0 src
  http-request deny deny_status 429 if { sc_http_req_rate(0) gt 50 }
  default_backend o
backend o
  http-reuse always
  server o 127.0.0.1:$ORIGIN
EOF
  haproxy -db -f "$W/haproxy.cfg" > "$W/haproxy.out" 2>&1 & PIDS+=($!)
  wait_port "$WP"; wait_port "$NP"; wait_port "$HP"
  for t in "weir $WP 20" "nginx $NP 20" "haproxy $HP 0"; do
    set -- $t
    # HAProxy's limit has no burst: its exact bound is rate x t
    /usr/bin/python3 "$HERE/ratelimit_load.py" --name "$1" --port "$2" --rate 50 --burst "$3" --seconds "$SECS" --addrs 8
  done
fi
