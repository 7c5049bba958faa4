#!/usr/bin/env bash
# routes.sh: the cost of route lookup at scale, weir beside nginx and
# HAProxy: user-space instructions per proxied request (callgrind), with
# one route and with 10,000 routes over 5,000 hosts, for a request to an
# exact host and one to a wildcard host.
#
#   tests/bench/routes.sh [--requests N] [--only weir|nginx|haproxy]
#
# The routes (the same three ways):
#   - hosts 1..4000: exact "h<i>.bench.test", paths "/" and "/api/<i>/"
#   - hosts 4001..5000: wildcard "*.w<i>.bench.test", the same two paths
#   weir: one route per (host, path) (routes = ( ... ));
#   nginx: one server block per host (server_name), a location per path;
#   HAProxy: a map_beg over "base" (Host + path: an ebtree, longest
#   prefix) for the exact hosts, a map_end over the Host for the wildcard
#   ones, setting the backend; every route goes to the one origin.
# With one route, everything goes to the origin ("*" and "/", a default
# server, a default backend).
#
# Every proxy runs one worker in the process that is measured (weir with
# master_process = false, nginx with master_process off, HAProxy -db), on
# 127.0.0.1:28180 ($ROUTES_PORT); the origin is an nginx answering 200 on
# 127.0.0.1:29100 ($ORIGIN_PORT).
# Figures: instr_per_req for each (proxy, routes, query); weir's
# 10,000-route figure over its 1-route figure must stay within 1.10.
set -euo pipefail

NREQ=10000 ONLY=""
while [ $# -gt 0 ]; do
  case "$1" in
    --requests) NREQ=$2; shift 2;;
    --only) ONLY=$2; shift 2;;
    -h|--help) sed -n '2,26p' "$0"; exit 0;;
    *) echo "routes.sh: unknown option $1 (see --help)" >&2; exit 2;;
  esac
done

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WEIR=${WEIR_BIN:-$ROOT/build/weir}
[ -x "$WEIR" ] || { echo "routes.sh: $WEIR missing: run make" >&2; exit 1; }
for c in nginx haproxy valgrind callgrind_control callgrind_annotate h2load curl; do
  command -v "$c" >/dev/null || { echo "routes.sh: needs $c" >&2; exit 1; }
done

# ports of its own (peers.sh's 18080 and 19000 may be in use by another run)
ORIGIN_PORT=${ORIGIN_PORT:-29100} PORT=${ROUTES_PORT:-28180}
# ROUTES_HOSTS=500 measures 1,000 routes (what weir allowed before)
NHOSTS=${ROUTES_HOSTS:-5000} NEXACT=$(( ${ROUTES_HOSTS:-5000} * 4 / 5 ))
W=$(mktemp -d /tmp/routes.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  sleep 0.3
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

# ---- the configurations ----------------------------------------------------

host_of() { # i -> the host as each proxy writes it
  if [ "$1" -le "$NEXACT" ]; then echo "h$1.bench.test"; else echo "*.w$1.bench.test"; fi
}

gen_weir() { # nroutes(1|many) file
  {
    echo 'workers = 1; master_process = false;'
    echo 'log = { error = "stderr"; access = "off"; level = "notice"; };'
    echo "listeners = ( { address = \"127.0.0.1:$PORT\"; backlog = 4096; } );"
    echo "upstreams = ( { name = \"origin\"; keepalive = 256; servers = ( { address = \"127.0.0.1:$ORIGIN_PORT\"; } ); } );"
    echo 'routes = ('
    if [ "$1" = 1 ]; then
      echo '  { path = "/"; upstream = "origin"; }'
    else
      for i in $(seq 1 $NHOSTS); do
        h=$(host_of "$i")
        echo "  { host = \"$h\"; path = \"/\"; upstream = \"origin\"; },"
        echo "  { host = \"$h\"; path = \"/api/$i/\"; upstream = \"origin\"; }$([ "$i" -lt $NHOSTS ] && echo ,)"
      done
    fi
    echo ');'
  } > "$2"
}

gen_nginx() { # nroutes file
  {
    echo "worker_processes 1; daemon off; master_process off;"
    echo "error_log $W/nginx.err; pid $W/nginx.pid;"
    echo "events { worker_connections 8192; }"
    echo "http {"
    echo "  access_log off; keepalive_requests 100000000;"
    echo "  server_names_hash_max_size 16384; server_names_hash_bucket_size 128;"
    echo "  upstream origin { server 127.0.0.1:$ORIGIN_PORT; keepalive 256; keepalive_requests 100000000; }"
    local loc='proxy_pass http://origin; proxy_http_version 1.1; proxy_set_header Connection "";'
    if [ "$1" = 1 ]; then
      echo "  server { listen 127.0.0.1:$PORT default_server; location / { $loc } }"
    else
      for i in $(seq 1 $NHOSTS); do
        echo "  server { listen 127.0.0.1:$PORT; server_name $(host_of "$i");"
        echo "    location / { $loc } location /api/$i/ { $loc } }"
      done
    fi
    echo "}"
  } > "$2"
}

gen_haproxy() { # nroutes file
  {
    printf 'global\n  nbthread 1\n  maxconn 4000\n'
    printf 'defaults\n  mode http\n  timeout connect 5s\n  timeout client 30s\n  timeout server 30s\n'
    printf '  option http-keep-alive\n'
    printf 'frontend fe\n  bind 127.0.0.1:%s\n' "$PORT"
    if [ "$1" = 1 ]; then
      printf '  default_backend be\n'
    else
      # exact hosts: Host + path, the longest configured prefix; then a
      # wildcard host by its suffix; no match is a 404, as in weir
      printf '  http-request set-var(txn.be) base,map_beg(%s/exact.map)\n' "$W"
      printf '  http-request set-var(txn.be) req.hdr(host),map_end(%s/wild.map) if !{ var(txn.be) -m found }\n' "$W"
      printf '  http-request deny deny_status 404 if !{ var(txn.be) -m found }\n'
      printf '  use_backend %%[var(txn.be)]\n'
    fi
    printf 'backend be\n  http-reuse always\n  server s1 127.0.0.1:%s\n' "$ORIGIN_PORT"
  } > "$2"
  if [ "$1" != 1 ]; then
    : > "$W/exact.map"; : > "$W/wild.map"
    for i in $(seq 1 $NEXACT); do
      printf 'h%s.bench.test/ be\nh%s.bench.test/api/%s/ be\n' "$i" "$i" "$i" >> "$W/exact.map"
    done
    for i in $(seq $((NEXACT + 1)) $NHOSTS); do
      printf '.w%s.bench.test be\n' "$i" >> "$W/wild.map"
    done
  fi
}

cat > "$W/origin.conf" <<EOF
worker_processes 1; daemon off; master_process off;
error_log $W/origin.err; pid $W/origin.pid;
events { worker_connections 8192; }
http {
  access_log off; keepalive_requests 100000000;
  server { listen 127.0.0.1:$ORIGIN_PORT reuseport; location / { return 200 "hello from origin\n"; } }
}
EOF

# ---- running them ------------------------------------------------------------

QE=$((NEXACT * 5 / 8)) QW=$((NEXACT + (NHOSTS - NEXACT) / 2))
QUERIES=("h$QE.bench.test /api/$QE/item" "x.w$QW.bench.test /api/$QW/item")

wait_up() { # host path name
  for _ in $(seq 1 300); do
    curl -fs -o /dev/null -H "Host: $1" "http://127.0.0.1:$PORT$2" && return 0
    sleep 0.1
  done
  echo "routes.sh: $3 does not answer $1$2 on 127.0.0.1:$PORT" >&2; cat "$W/$3.out" >&2; exit 1
}

setsid nginx -c "$W/origin.conf" >"$W/origin.out" 2>&1 &
PIDS+=("$!")
for _ in $(seq 1 50); do curl -fs -o /dev/null "http://127.0.0.1:$ORIGIN_PORT/" && break; sleep 0.1; done

# measure NAME NROUTES CMD...: instructions per request for each query
measure() {
  local name=$1 n=$2; shift 2
  local out="$W/$name-$n" q host path total ok pid
  for q in "${QUERIES[@]}"; do
    host=${q% *} path=${q#* }
    rm -f "$out".cg.*
    if curl -s -o /dev/null "http://127.0.0.1:$PORT/"; then
      echo "routes.sh: 127.0.0.1:$PORT is in use by something else" >&2; exit 1
    fi
    setsid valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out.cg.%p" "$@" >"$W/$name.out" 2>&1 &
    pid=$!
    PIDS+=("$pid")
    wait_up "$host" "$path" "$name"
    callgrind_control -i on "$pid" >/dev/null 2>&1
    ok=$(h2load --h1 -n "$NREQ" -c 16 -t 1 -H ":authority: $host" "http://127.0.0.1:$PORT$path" 2>&1 |
         awk '/^status codes:/ {print $3}')
    callgrind_control -d "$pid" >/dev/null 2>&1
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    total=$(for f in "$out".cg.*; do callgrind_annotate "$f" 2>/dev/null |
            awk '/PROGRAM TOTALS/ {gsub(",","",$1); print $1}'; done | awk '{s+=$1} END {print s+0}')
    [ "${ok:-0}" = "$NREQ" ] || echo "# $name $n $host: only ${ok:-0} of $NREQ answered 2xx" >&2
    printf 'instr_per_req proxy=%s routes=%s host=%s %s\n' "$name" "$n" "$host" \
      "$(awk -v t="$total" -v n="${ok:-0}" 'BEGIN { if (n == 0) print "nan"; else printf "%.0f", t/n }')"
  done
}

for n in 1 $((2 * NHOSTS)); do
  gen_weir "$n" "$W/weir-$n.conf"
  gen_nginx "$n" "$W/nginx-$n.conf"
  gen_haproxy "$n" "$W/haproxy-$n.cfg"
  if [ -z "$ONLY" ] || [ "$ONLY" = weir ]; then measure weir "$n" "$WEIR" -c "$W/weir-$n.conf"; fi
  if [ -z "$ONLY" ] || [ "$ONLY" = nginx ]; then measure nginx "$n" nginx -c "$W/nginx-$n.conf"; fi
  if [ -z "$ONLY" ] || [ "$ONLY" = haproxy ]; then measure haproxy "$n" haproxy -db -f "$W/haproxy-$n.cfg"; fi
done
