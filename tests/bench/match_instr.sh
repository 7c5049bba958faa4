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
. "$(dirname "$0")/instrlib.sh"
N=${REQUESTS:-5000} P=${PORT:-28580}
instr_origins $((P + 1)) a

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
  instr_measure "$v" "$T/$v.conf" "$N" "http://127.0.0.1:$P/api/v2/users?v=2" -H "X-V: 2"
done
