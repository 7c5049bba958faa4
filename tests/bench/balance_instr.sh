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
. "$(dirname "$0")/instrlib.sh"
N=${REQUESTS:-5000} P=${PORT:-28480}
instr_origins $((P + 1)) a b

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
  instr_measure "$algo" "$T/$algo.conf" "$N" "http://127.0.0.1:$P/" -H "X-User: user-1"
done
