#!/usr/bin/env bash
# match_instr.sh: user-space instructions per proxied request (callgrind)
# of one weir worker for a route with each kind of condition or rewrite
# (docs/config.md, "Matching and rewrites"), against the plain prefix
# route: what path_exact, path_regex, methods, match_headers, match_query,
# strip_prefix and rewrite cost.
#
#   [REQUESTS=N] [PORT=P] tests/bench/match_instr.sh
#
# Every request is GET /api/v2/users?v=2 with X-V: 2, taken by the route
# measured (a plain "/" route behind it takes nothing). Ports P (weir) and
# P+1 (an nginx origin), default 28580; loopback.
set -euo pipefail
N=${REQUESTS:-5000} P=${PORT:-28580}
WEIR=${WEIR_BIN:-build/weir}
T=$(mktemp -d)
BG=()
finish() { for p in "${BG[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$T"; }
trap finish EXIT

printf 'daemon off; worker_processes 1; error_log %s/o.err; pid %s/o.pid;
events { worker_connections 1024; }
http { access_log off;
  server { listen 127.0.0.1:%d; keepalive_requests 1000000; location / { return 200 "a\\n"; } } }\n' \
  "$T" "$T" $((P + 1)) >"$T/o.conf"
nginx -c "$T/o.conf" & BG+=($!)

declare -A V=(
  [plain]='path = "/api/";'
  [exact]='path_exact = "/api/v2/users";'
  [regex]='path = "/api/"; path_regex = "^/api/v[0-9]+/";'
  [methods]='path = "/api/"; methods = [ "GET", "HEAD" ];'
  [header]='path = "/api/"; match_headers = ( { name = "X-V"; exact = "2"; } );'
  [query]='path = "/api/"; match_query = ( { name = "v"; exact = "2"; } );'
  [strip]='path = "/api/"; strip_prefix = true;'
  [rewrite]='path = "/api/"; rewrite = { regex = "^/api/(.*)"; replace = "/v/$1"; };'
  [all]='path = "/api/"; path_regex = "^/api/v[0-9]+/"; methods = [ "GET" ]; match_headers = ( { name = "X-V"; exact = "2"; } ); match_query = ( { name = "v"; exact = "2"; } ); rewrite = { regex = "^/api/(.*)"; replace = "/v/$1"; };'
)
for v in plain exact regex methods header query strip rewrite all; do
  printf 'workers = 1; master_process = false;
log = { error = "%s/%s.err"; access = "off"; level = "warn"; };
listeners = ( { address = "127.0.0.1:%d"; } );
upstreams = ( { name = "g"; servers = ( { address = "127.0.0.1:%d"; } ); } );
routes = ( { %s upstream = "g"; }, { path = "/"; return = { status = 404; }; } );\n' \
    "$T" "$v" "$P" $((P + 1)) "${V[$v]}" >"$T/$v.conf"
  setsid valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$T/cg.$v.%p" \
    "$WEIR" -c "$T/$v.conf" >"$T/$v.out" 2>&1 & vg=$!
  BG+=($vg)
  for _ in $(seq 1 200); do curl -fs -o /dev/null -H "X-V: 2" "http://127.0.0.1:$P/api/v2/users?v=2" && break; sleep 0.1; done
  callgrind_control -i on "$vg" >/dev/null 2>&1
  done_n=$(h2load --h1 -n "$N" -c 16 -t 1 -H "X-V: 2" "http://127.0.0.1:$P/api/v2/users?v=2" 2>&1 |
           awk '/^status codes:/ {print $3}')
  callgrind_control -d "$vg" >/dev/null 2>&1
  instr=$(cat "$T"/cg."$v".* | callgrind_annotate /dev/stdin 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",","",$1); print $1}')
  echo "$v ok_2xx=$done_n instr_per_req=$(awk -v t="${instr:-0}" -v n="${done_n:-0}" 'BEGIN { printf "%.0f\n", n ? t/n : 0 }')"
  kill "$vg" 2>/dev/null || true; wait "$vg" 2>/dev/null || true
  sleep 0.5
done
