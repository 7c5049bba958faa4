#!/usr/bin/env bash
# policy.sh: what access log formats, trusted_proxies, request ids and a
# direct response cost per request.
#
#   tests/bench/policy.sh [--duration S] [--conns C] [--bin PATH]
#
# One worker in front of nginx (a fast origin: `return 200`), wrk -t1 -cC
# (16) for S seconds (5) per case, every request with a three-hop
# X-Forwarded-For. Per case it prints requests/s and the worker's CPU
# microseconds per request (utime+stime from /proc: hardware counters are
# not there in every VM):
#   weir      log.format = "weir" (the default) to a file
#   combined  log.format = "combined"
#   json      log.format = "json"
#   realip    json, trusted_proxies over 127/8 and 10/8, real_ip_depth 3,
#             request_id = true
#   return    a route's return (200 "ok\n"): no upstream at all
# KEEP=1 keeps the temporary directory. Everything listens on 127.0.0.1;
# every run is bounded (wrk -d).
set -euo pipefail

DUR=5 CONNS=16 BIN=
while [ $# -gt 0 ]; do
	case "$1" in
	--duration) DUR=$2; shift 2 ;;
	--conns) CONNS=$2; shift 2 ;;
	--bin) BIN=$2; shift 2 ;;
	*) echo "usage: $0 [--duration S] [--conns C] [--bin PATH]" >&2; exit 2 ;;
	esac
done
cd "$(dirname "$0")/../.."
BIN=${BIN:-$PWD/build/weir}
[ -x "$BIN" ] || { echo "no $BIN: run make" >&2; exit 1; }
command -v wrk >/dev/null || { echo "wrk is missing (Debian package wrk)" >&2; exit 1; }
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$NGINX" ] || { echo "nginx is missing" >&2; exit 1; }

TMP=$(mktemp -d /tmp/weir-policy.XXXXXX)
WEIR_PID= NGINX_PID=
cleanup() {
	[ -n "$WEIR_PID" ] && kill "$WEIR_PID" 2>/dev/null || true
	[ -n "$NGINX_PID" ] && kill "$NGINX_PID" 2>/dev/null || true
	wait 2>/dev/null || true
	[ -n "${KEEP:-}" ] && echo "kept $TMP" || rm -rf "$TMP"
}
trap cleanup EXIT

free_port() {
	/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
PORT=$(free_port) OPORT=$(free_port)

mkdir -p "$TMP/nginx"
cat >"$TMP/nginx/nginx.conf" <<EOF
daemon off; master_process off; worker_processes 1;
error_log $TMP/nginx/error.log; pid $TMP/nginx/nginx.pid;
events { worker_connections 1024; }
http { access_log off; keepalive_requests 100000000;
  server { listen 127.0.0.1:$OPORT; location / { return 200 "hello\n"; } } }
EOF
"$NGINX" -p "$TMP/nginx" -c "$TMP/nginx/nginx.conf" -e "$TMP/nginx/error.log" </dev/null >/dev/null 2>&1 &
NGINX_PID=$!

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

run_case() { # name, top-level text, log format, route text
	local name=$1 top=$2 fmt=$3 route=$4
	cat >"$TMP/weir.conf" <<EOF
workers = 1;
log = { error = "$TMP/error.log"; access = "$TMP/access.log"; format = "$fmt"; };
$top
listeners = ( { address = "127.0.0.1:$PORT"; } );
upstreams = ( { name = "o"; servers = ( { address = "127.0.0.1:$OPORT"; } ); } );
routes = ( $route );
EOF
	rm -f "$TMP/access.log"
	"$BIN" -c "$TMP/weir.conf" </dev/null >"$TMP/weir.out" 2>&1 &
	WEIR_PID=$!
	local w= i
	for i in $(seq 100); do
		w=$(pgrep -P "$WEIR_PID" | head -1 || true)
		[ -n "$w" ] && curl -s -o /dev/null "http://127.0.0.1:$PORT/" && break
		sleep 0.05
	done
	[ -n "$w" ] || { echo "$name: weir did not start" >&2; cat "$TMP/weir.out" >&2; exit 1; }
	local t0 t1 hz out req
	hz=$(getconf CLK_TCK)
	t0=$(cpu_ticks "$w")
	out=$(wrk -t1 -c"$CONNS" -d"${DUR}s" -H "X-Forwarded-For: 6.6.6.6, 203.0.113.5, 10.0.0.2" \
		-H "User-Agent: bench/1 \"quoted\"" "http://127.0.0.1:$PORT/a/b?c=1")
	t1=$(cpu_ticks "$w")
	req=$(echo "$out" | awk '/requests in/ {print $1}')
	kill "$WEIR_PID"; wait "$WEIR_PID" 2>/dev/null || true; WEIR_PID=
	awk -v n="$name" -v r="$req" -v d="$DUR" -v c=$((t1 - t0)) -v hz="$hz" 'BEGIN {
		printf "%-9s %8.0f req/s  %6.2f us CPU/req\n", n, r / d, c * 1e6 / hz / r }'
}

PROXY='{ path = "/"; upstream = "o"; }'
run_case weir "" weir "$PROXY"
run_case combined "" combined "$PROXY"
run_case json "" json "$PROXY"
run_case realip 'trusted_proxies = [ "127.0.0.0/8", "10.0.0.0/8" ]; real_ip_depth = 3; request_id = true;' json "$PROXY"
run_case return "" weir '{ path = "/"; return = { status = 200; body = "ok\n"; }; }'
