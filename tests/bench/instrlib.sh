# instrlib.sh: what the callgrind scripts (balance_instr.sh, match_instr.sh,
# resil_instr.sh) share, sourced by them (". tests/bench/instrlib.sh"), so
# that each measures one weir worker the same way: a temporary directory
# $T removed on exit with every process in $BG, an nginx origin, and one
# measurement per configuration.

T=$(mktemp -d)
BG=()
WEIR=${WEIR_BIN:-build/weir}
instr_finish() { for p in "${BG[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$T"; }
trap instr_finish EXIT

# instr_origins PORT BODY...: one nginx, one worker, no access log, with a
# server on PORT, PORT+1, ... for each BODY, answering it at every path.
instr_origins() {
  local port=$1 servers=""
  shift
  for body in "$@"; do
    servers+="  server { listen 127.0.0.1:$port; keepalive_requests 1000000; location / { return 200 \"$body\\n\"; } }
"
    port=$((port + 1))
  done
  printf 'daemon off; worker_processes 1; error_log %s/o.err; pid %s/o.pid;
events { worker_connections 1024; }
http { access_log off;
%s}\n' "$T" "$T" "$servers" >"$T/o.conf"
  nginx -c "$T/o.conf" & BG+=($!)
}

# instr_measure NAME CONF N URL [ARG...]: weir on CONF under callgrind,
# counting from the first request on; N requests of h2load --h1 (16
# connections, one thread) to URL, with ARGs (such as -H "X: y") given to
# the warm-up curl and to h2load alike. Prints
#   NAME requests_ok=K instr_per_req=I
# K the 2xx answers, I the instructions of the measured span over K.
instr_measure() {
  local name=$1 conf=$2 n=$3 url=$4 vp ok total
  shift 4
  setsid valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$T/cg.$name.%p" \
    "$WEIR" -c "$conf" >"$T/$name.out" 2>&1 & vp=$!
  BG+=($vp)
  for _ in $(seq 1 200); do curl -fs -o /dev/null "$@" "$url" && break; sleep 0.1; done
  callgrind_control -i on "$vp" >/dev/null 2>&1 || callgrind_control -i on >/dev/null
  ok=$(h2load --h1 -n "$n" -c 16 -t 1 "$@" "$url" 2>&1 | awk '/^status codes:/ {print $3}')
  callgrind_control -d "$vp" >/dev/null 2>&1 || callgrind_control -d >/dev/null
  total=$(for f in "$T"/cg."$name".*; do callgrind_annotate "$f" 2>/dev/null |
          awk '/PROGRAM TOTALS/ {gsub(",","",$1); print $1}'; done | awk '{s+=$1} END {print s+0}')
  echo "$name requests_ok=${ok:-0} instr_per_req=$(awk -v t="$total" -v n="${ok:-0}" 'BEGIN { printf "%.0f\n", n ? t/n : 0 }')"
  kill "$vp" 2>/dev/null || true
  wait "$vp" 2>/dev/null || true
  sleep 0.5
}
