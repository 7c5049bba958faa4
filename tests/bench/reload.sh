#!/usr/bin/env bash
# reload.sh: what a configuration reload under load costs the clients of
# weir, nginx and HAProxy, measured the same way on this machine.
#
#   tests/bench/reload.sh [--duration S] [--reloads N] [--conns C] [--only LIST]
#
# For each proxy in turn (never two at once): start it in master-worker
# mode with 2 workers in front of one fast nginx origin (return 200), run
# wrk -t2 -c64 for S seconds (10) of keep-alive load, and meanwhile reload
# it N times (20), evenly spread, alternating two configurations that differ
# in one response-visible detail. Then print per proxy: requests, wrk's
# socket errors (connect/read/write/timeout), non-2xx/3xx responses and
# their sum, the failed total, and at the end one line
#
#   reload_failures weir=N nginx=N haproxy=N
#
# How each one reloads (as its operators do it):
#   weir     new config renamed into place, HUP to the master; the workers
#            of the new generation take over the very same listening
#            sockets, the old ones drain (idle keep-alive: closed after 1 s
#            idle; busy: "Connection: close" on the next answer).
#   nginx    new config renamed into place, HUP to the master (what
#            "nginx -s reload" sends); worker_processes 2.
#   haproxy  -W (master-worker) with "stats socket ... expose-fd listeners"
#            in the global section: on USR2 the master re-executes itself
#            and, since a stats socket exposes the listeners, adds
#            "-x <that socket>" so the new worker takes the old worker's
#            listening sockets instead of binding new ones (HAProxy's
#            documented seamless reload; 2.6 passes "-x sockpair@N", the
#            master's socketpair to the worker, and the script prints the
#            worker's command line to show it); a master CLI (-S) as well;
#            nbthread 2 (one worker process with two threads is HAProxy's
#            multi-core model).
# KEEP=1 keeps the temporary directory (configs, logs, wrk output).
# Everything listens on 127.0.0.1 only; every run is bounded (wrk -d, and
# "timeout" around every command that could hang).
set -euo pipefail

DUR=10 RELOADS=20 CONNS=64 ONLY="weir nginx haproxy"
while [ $# -gt 0 ]; do
  case "$1" in
    --duration) DUR=$2; shift 2;;
    --reloads) RELOADS=$2; shift 2;;
    --conns) CONNS=$2; shift 2;;
    --only) ONLY=$2; shift 2;;
    -h|--help) sed -n '2,33p' "$0"; exit 0;;
    *) echo "reload.sh: unknown option $1 (see --help)" >&2; exit 2;;
  esac
done

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
WEIR=${WEIR_BIN:-$REPO/build/weir}
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
HAPROXY=$(command -v haproxy || echo /usr/sbin/haproxy)
for b in "$WEIR" "$NGINX" "$HAPROXY" "$(command -v wrk || echo /nonexistent)"; do
  [ -x "$b" ] || { echo "reload.sh: $b is missing (make; apt-get install nginx-light haproxy wrk)" >&2; exit 2; }
done

W=$(mktemp -d /tmp/reload-bench.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  sleep 0.3
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null || true; done
  # workers of the proxies (children of the masters we started)
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && pkill -9 -P "$p" 2>/dev/null || true; done
  if [ -n "${KEEP:-}" ]; then echo "reload.sh: logs kept in $W" >&2; else rm -rf "$W"; fi
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
wait_port() { # port: up to 10 s for a listener
  local i
  for i in $(seq 1 200); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.05
  done
  echo "reload.sh: nothing listens on 127.0.0.1:$1" >&2; return 1
}
swap() { # file new-content: atomic replace, as a deploy tool does
  printf '%s\n' "$2" > "$1.tmp" && mv -f "$1.tmp" "$1"
}

# ---- the origin: nginx, one process, keep-alive forever ---------------------
OPORT=$(free_port)
mkdir -p "$W/origin"
cat > "$W/origin/nginx.conf" <<EOF
daemon off; master_process off; worker_processes 1;
error_log $W/origin/error.log; pid $W/origin/nginx.pid;
events { worker_connections 8192; }
http {
  access_log off;
  client_body_temp_path $W/origin/body; proxy_temp_path $W/origin/proxy;
  keepalive_requests 100000000; keepalive_timeout 300s;
  server { listen 127.0.0.1:$OPORT; location / { default_type text/plain; return 200 "hello\n"; } }
}
EOF
"$NGINX" -p "$W/origin" -e "$W/origin/error.log" -c "$W/origin/nginx.conf" </dev/null >/dev/null 2>"$W/origin/stderr" &
PIDS+=($!)
wait_port "$OPORT"

# ---- one experiment ---------------------------------------------------------
# run NAME PORT RELOAD-FUNCTION: wrk for $DUR s, $RELOADS reloads spread over it.
declare -A FAILED
run() {
  local name=$1 port=$2 reload=$3 out i gap
  out="$W/$name.wrk"
  timeout $((DUR + 30)) wrk -t2 -c"$CONNS" -d"${DUR}s" --timeout 3s "http://127.0.0.1:$port/" >"$out" 2>&1 &
  local wrk_pid=$!
  gap=$(awk -v d="$DUR" -v n="$RELOADS" 'BEGIN { printf "%.3f", d / n }')
  sleep "$(awk -v g="$gap" 'BEGIN { printf "%.3f", g / 2 }')"
  for i in $(seq 1 "$RELOADS"); do
    "$reload" "$i"
    sleep "$gap"
  done
  wait "$wrk_pid" || true
  local req conn rd wr to non2xx total
  req=$(sed -n 's/^ *\([0-9]*\) requests in.*/\1/p' "$out")
  read -r conn rd wr to < <(sed -n 's/.*Socket errors: connect \([0-9]*\), read \([0-9]*\), write \([0-9]*\), timeout \([0-9]*\).*/\1 \2 \3 \4/p' "$out"; echo "0 0 0 0")
  non2xx=$(sed -n 's/.*Non-2xx or 3xx responses: \([0-9]*\).*/\1/p' "$out")
  req=${req:-0} non2xx=${non2xx:-0}
  total=$((conn + rd + wr + to + non2xx))
  FAILED[$name]=$total
  printf '%-8s requests=%-8s socket_errors: connect=%s read=%s write=%s timeout=%s  non2xx=%s  failed=%s  (%s)\n' \
    "$name" "$req" "$conn" "$rd" "$wr" "$to" "$non2xx" "$total" "$(grep -o 'Requests/sec: *[0-9.]*' "$out" | tr -s ' ')"
  if [ "$req" = 0 ]; then sed 's/^/    wrk: /' "$out"; fi
}

# ---- weir -------------------------------------------------------------------
weir_conf() { # A|B
  local which=$1
  cat <<EOF
workers = 2;
log = { error = "$W/weir/error.log"; access = "off"; level = "notice"; };
stats = { listen = "127.0.0.1:$WSTATS"; };
listeners = ( { address = "127.0.0.1:$WPORT"; backlog = 4096; } );
upstreams = ( { name = "o"; keepalive = 256; servers = ( { address = "127.0.0.1:$OPORT"; } ); },
              { name = "o2"; keepalive = 256; servers = ( { address = "127.0.0.1:$OPORT"; } ); } );
routes = ( { path = "/which"; upstream = "$([ "$which" = A ] && echo o || echo o2)"; },
           { path = "/"; upstream = "o"; } );
timeouts = { drain = "10s"; };
EOF
}
bench_weir() {
  WPORT=$(free_port) WSTATS=$(free_port)
  mkdir -p "$W/weir"
  weir_conf A > "$W/weir/weir.conf"
  "$WEIR" -c "$W/weir/weir.conf" </dev/null >"$W/weir/stdout" 2>"$W/weir/stderr" &
  WPID=$!
  PIDS+=("$WPID")
  wait_port "$WPORT"; wait_port "$WSTATS"
  weir_reload() {
    swap "$W/weir/weir.conf" "$(weir_conf "$([ $(($1 % 2)) = 1 ] && echo B || echo A)")"
    kill -HUP "$WPID"
  }
  run weir "$WPORT" weir_reload
  sleep 0.5
  local ok failed
  ok=$(timeout 5 curl -s "http://127.0.0.1:$WSTATS/metrics" | sed -n 's/^weir_reloads_total{result="ok"} //p')
  failed=$(timeout 5 curl -s "http://127.0.0.1:$WSTATS/metrics" | sed -n 's/^weir_reloads_total{result="failed"} //p')
  echo "         reloads done: ok=${ok:-?} failed=${failed:-?}"
  kill -TERM "$WPID"; timeout 10 tail --pid="$WPID" -f /dev/null || true
}

# ---- nginx ------------------------------------------------------------------
nginx_conf() { # A|B
  cat <<EOF
daemon off; master_process on; worker_processes 2;
error_log $W/nginx/error.log notice; pid $W/nginx/nginx.pid;
events { worker_connections 8192; }
http {
  access_log off;
  client_body_temp_path $W/nginx/body; proxy_temp_path $W/nginx/proxy;
  upstream o { server 127.0.0.1:$OPORT; keepalive 256; }
  server {
    listen 127.0.0.1:$NPORT reuseport backlog=4096;
    location / { proxy_pass http://o; proxy_http_version 1.1; proxy_set_header Connection ""; }
    location /which { add_header X-Config $1; proxy_pass http://o; proxy_http_version 1.1;
                      proxy_set_header Connection ""; }
  }
}
EOF
}
bench_nginx() {
  NPORT=$(free_port)
  mkdir -p "$W/nginx"
  nginx_conf A > "$W/nginx/nginx.conf"
  "$NGINX" -p "$W/nginx" -e "$W/nginx/error.log" -c "$W/nginx/nginx.conf" </dev/null >/dev/null 2>"$W/nginx/stderr" &
  NPID=$!
  PIDS+=("$NPID")
  wait_port "$NPORT"
  nginx_reload() {
    swap "$W/nginx/nginx.conf" "$(nginx_conf "$([ $(($1 % 2)) = 1 ] && echo B || echo A)")"
    kill -HUP "$NPID"
  }
  run nginx "$NPORT" nginx_reload
  echo "         reloads done: $(grep -c 'signal 1 (SIGHUP) received' "$W/nginx/error.log" || true) (SIGHUPs in its error log)"
  kill -TERM "$NPID"; timeout 10 tail --pid="$NPID" -f /dev/null || true
}

# ---- HAProxy ----------------------------------------------------------------
haproxy_conf() { # A|B
  cat <<EOF
global
  master-worker
  nbthread 2
  maxconn 8000
  stats socket $W/haproxy/admin.sock mode 600 level admin expose-fd listeners
  pidfile $W/haproxy/haproxy.pid
defaults
  mode http
  timeout connect 5s
  timeout client 30s
  timeout server 30s
  timeout http-keep-alive 30s
  option http-keep-alive
frontend fe
  bind 127.0.0.1:$HPORT
  http-response set-header X-Config $1
  default_backend be
backend be
  http-reuse always
  server o 127.0.0.1:$OPORT
EOF
}
bench_haproxy() {
  HPORT=$(free_port)
  mkdir -p "$W/haproxy"
  haproxy_conf A > "$W/haproxy/haproxy.cfg"
  # -W master-worker in the foreground; -S a master CLI (for "show proc")
  "$HAPROXY" -W -S "$W/haproxy/master.sock" -f "$W/haproxy/haproxy.cfg" </dev/null >"$W/haproxy/stdout" 2>"$W/haproxy/stderr" &
  HPID=$!
  PIDS+=("$HPID")
  wait_port "$HPORT"
  haproxy_reload() {
    swap "$W/haproxy/haproxy.cfg" "$(haproxy_conf "$([ $(($1 % 2)) = 1 ] && echo B || echo A)")"
    kill -USR2 "$HPID"
  }
  run haproxy "$HPORT" haproxy_reload
  echo "         reloads done: $(grep -c 'Reloading HAProxy' "$W/haproxy/stderr" || true) (\"Reloading HAProxy\" on its stderr)"
  # the worker's command line shows how it got its listeners ("-x sockpair@N":
  # fetched from the previous worker through the master, not bound anew)
  local wp
  for wp in $(pgrep -P "$HPID"); do
    echo "         current worker runs as: $(tr '\0' ' ' < "/proc/$wp/cmdline")"
  done
  kill -TERM "$HPID"; timeout 10 tail --pid="$HPID" -f /dev/null || true
}

echo "reload under load: wrk -t2 -c$CONNS -d${DUR}s keep-alive, $RELOADS reloads spread over it, 2 workers each, origin nginx on 127.0.0.1:$OPORT"
for p in $ONLY; do
  "bench_$p"
  sleep 1
done
line="reload_failures"
for p in weir nginx haproxy; do line="$line $p=${FAILED[$p]:--}"; done
echo "$line"
