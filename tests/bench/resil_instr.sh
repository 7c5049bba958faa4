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
. "$(dirname "$0")/instrlib.sh"
instr_origins "$O" "hello from origin"

conf() { # name extra-group-keys
  cat >"$T/$1.conf" <<CONF
workers = 1; master_process = false;
log = { error = "$T/$1.err"; access = "off"; level = "warn"; };
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
  instr_measure "$c" "$T/$c.conf" "$N" "http://127.0.0.1:$P/"
done
