#!/bin/bash
# ws.sh: WebSocket echo through weir, nginx and HAProxy side by side.
#
#   tests/bench/ws.sh [SECONDS] [CONNS...]     (default 8 s, 64 and 1000 sockets)
#
# One worker (thread) each, one C origin (tests/bench/wsbench.c: 101, then
# unmask and echo each frame) and one C client (one 64-byte binary message
# in flight per socket, pre-framed and masked, epoll). Prints messages per
# second, latency percentiles and the proxy's CPU time per message. Every run is bounded by
# SECONDS; all traffic stays on 127.0.0.1.
set -eu
cd "$(dirname "$0")/../.."
. tests/bench/peerconf.sh
SECS=${1:-8}; shift || true
CONNS=("$@"); [ ${#CONNS[@]} -gt 0 ] || CONNS=(64 1000)
W=$(mktemp -d /tmp/wsbench.XXXXXX)
ORIGIN=19400 WEIR=19401 NGX=19402 HAP=19403
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$W"; }
trap cleanup EXIT
cc -O2 -o "$W/wsbench" tests/bench/wsbench.c
[ -x build/weir ] || { echo "ws.sh: build weir first (make)" >&2; exit 1; }

cat > "$W/weir.conf" <<C
workers = 1; master_process = false;
log = { error = "stderr"; access = "off"; level = "notice"; };
listeners = ( { address = "127.0.0.1:$WEIR"; backlog = 4096; } );
upstreams = ( { name = "ws"; servers = ( { address = "127.0.0.1:$ORIGIN"; } ); } );
routes = ( { path = "/"; upstream = "ws"; } );
C
bench_nginx "$W/nginx.conf" "$W" nginx "  server {
    listen 127.0.0.1:$NGX backlog=4096;
    location / { proxy_pass http://127.0.0.1:$ORIGIN; proxy_http_version 1.1;
                 proxy_set_header Upgrade \$http_upgrade; proxy_set_header Connection \"upgrade\";
                 proxy_read_timeout 1h; }
  }"
bench_haproxy "$W/haproxy.cfg" 8000 127.0.0.1:$HAP 127.0.0.1:$ORIGIN "  timeout tunnel 1h"

start() { setsid "$@" >"$W/$(basename "$1").out" 2>&1 & PIDS+=($!); }
start "$W/wsbench" origin $ORIGIN
start build/weir -c "$W/weir.conf"
start nginx -c "$W/nginx.conf"
start haproxy -db -f "$W/haproxy.cfg"
sleep 1
declare -A PID=([weir]=${PIDS[1]} [nginx]=${PIDS[2]} [haproxy]=${PIDS[3]})
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; } # utime + stime, in ticks
HZ=$(getconf CLK_TCK)
for c in "${CONNS[@]}"; do
  for p in weir:$WEIR nginx:$NGX haproxy:$HAP; do
    name=${p%%:*}
    before=$(cpu "${PID[$name]}")
    out=$(timeout $((SECS + 20)) "$W/wsbench" client "127.0.0.1:${p#*:}" "$c" "$SECS")
    after=$(cpu "${PID[$name]}")
    msgs=$(echo "$out" | awk '{print $5}')
    # the proxy's CPU per message (both directions), connection set-up included
    printf '%-8s %s, proxy CPU %.1f us/msg\n' "$name" "$out" \
      "$(echo "($after - $before) / $HZ * 1000000 / $msgs" | bc -l)"
  done
done
