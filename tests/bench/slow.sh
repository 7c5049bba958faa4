#!/usr/bin/env bash
# slow.sh: honest traffic while slow clients attack, through weir (and,
# with --peers, nginx and HAProxy as the client-facing proxy).
#
#   tests/bench/slow.sh [--conns N] [--duration S] [--peers] [--modes "H B X"]
#
# One nginx origin on 127.0.0.1:19300 ("/" answers a line, "/big" 1 MiB).
# For each proxy and each slowhttptest mode (-H slowloris: a head that never
# ends; -B slow body: a POST body dripped; -X slow read: a big response
# read a few bytes at a time), it measures wrk -t1 -c32 for S seconds
# alone, then again while slowhttptest holds N slow connections (ramped at
# 200/s, 5 s before wrk starts), and prints
#
#   PROXY MODE base_rps=R attack_rps=A (P%) slow_open=C origin_conns=B/D proxy_cpu=X%/Y%
#
# slow_open: connections slowhttptest reports open when wrk ends; origin_conns:
# established connections to the origin during the base run (B) and during
# the attack (D, sampled at its middle): the attack holds upstream
# connections when D is well above B; proxy_cpu: the proxy's CPU during
# each wrk run, in % of one core (near 100%: the proxy is the bottleneck;
# well below: the cores went to the attacker, wrk and the origin). Ports
# 18380..18390 and 19300; everything on 127.0.0.1, each run bounded.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/bench/peerconf.sh

CONNS=1000 DUR=10 PEERS=0 MODES="H B X"
while [ $# -gt 0 ]; do
	case $1 in
	--conns) CONNS=$2; shift ;;
	--duration) DUR=$2; shift ;;
	--peers) PEERS=1 ;;
	--modes) MODES=$2; shift ;;
	*) echo "usage: $0 [--conns N] [--duration S] [--peers] [--modes \"H B X\"]" >&2; exit 2 ;;
	esac
	shift
done
for t in nginx haproxy wrk slowhttptest ss; do
	command -v $t >/dev/null || { echo "slow.sh: needs $t" >&2; exit 1; }
done
[ -x build/weir ] || make build/weir >/dev/null

W=$(mktemp -d /tmp/slow.XXXXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
head -c 1048576 /dev/zero | tr '\0' x >"$W/big"

bench_nginx_origin "$W/origin.conf" "$W" 19300 "location = /big { root $W; }" "client_body_timeout 300s;"
# weir: defaults for buffering and rates, the limits an operator would set
cat >"$W/weir.conf" <<EOF
workers = 1;
master_process = false;
stats = { listen = "127.0.0.1:18390"; };
log = { error = "$W/weir.err"; access = "off"; level = "notice"; };
listeners = ( { address = "127.0.0.1:18380"; backlog = 4096; } );
upstreams = ( { name = "origin"; keepalive = 256; servers = ( { address = "127.0.0.1:19300"; } ); } );
routes = ( { path = "/"; upstream = "origin"; } );
EOF
bench_nginx_proxy "$W/nginx.conf" "$W" 127.0.0.1:18381 19300
bench_haproxy "$W/haproxy.cfg" 8000 127.0.0.1:18382 127.0.0.1:19300 "  timeout http-request 10s
  option http-keep-alive
  option http-buffer-request" "  http-reuse always"

origin_conns() { ss -Htn state established "( dport = :19300 )" | wc -l; }
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

setsid nginx -c "$W/origin.conf" & PIDS+=($!)
sleep 0.3
PROXIES="weir"
[ "$PEERS" = 1 ] && PROXIES="weir nginx haproxy"
for p in $PROXIES; do
	case $p in
	weir) setsid build/weir -c "$W/weir.conf" >"$W/weir.out" 2>&1 & PP=$!; PORT=18380 ;;
	nginx) setsid nginx -c "$W/nginx.conf" & PP=$!; PORT=18381 ;;
	haproxy) setsid haproxy -db -f "$W/haproxy.cfg" >"$W/haproxy.out" 2>&1 & PP=$!; PORT=18382 ;;
	esac
	PIDS+=($PP)
	for _ in $(seq 1 50); do curl -sf -o /dev/null "http://127.0.0.1:$PORT/" && break; sleep 0.1; done
	for m in $MODES; do
		URL="http://127.0.0.1:$PORT/"
		EXTRA=()
		case $m in
		B) EXTRA=(-s 8192 -i 5) ;;      # 8 KiB declared (buffered by weir), a bit every 5 s
		X) URL="http://127.0.0.1:$PORT/big"; EXTRA=(-k 3 -n 1 -w 10 -y 20 -z 32) ;;
		H) EXTRA=(-i 5) ;;
		esac
		c0=$(ticks $PP)
		wrk -t1 -c32 -d"$DUR" "http://127.0.0.1:$PORT/" >"$W/wrk.base" 2>&1 &
		WP=$!
		sleep $((DUR / 2)); b_conns=$(origin_conns); wait $WP
		c1=$(ticks $PP)
		base=$(awk '/Requests\/sec/ {print $2}' "$W/wrk.base")
		slowhttptest -"$m" -c "$CONNS" -r 200 -l $((DUR + 7)) -u "$URL" "${EXTRA[@]}" -p 3 \
			-g -o "$W/slow.$p.$m" >"$W/slow.$p.$m.out" 2>&1 &
		SP=$!
		sleep 5
		c2=$(ticks $PP)
		wrk -t1 -c32 -d"$DUR" "http://127.0.0.1:$PORT/" >"$W/wrk.attack" 2>&1 &
		WP=$!
		sleep $((DUR / 2)); a_conns=$(origin_conns); wait $WP
		c3=$(ticks $PP)
		attack=$(awk '/Requests\/sec/ {print $2}' "$W/wrk.attack")
		wait "$SP" 2>/dev/null || true
		# the CSV: seconds,closed,pending,connected,service available; the
		# row of the second wrk ended in
		open=$(awk -F, -v t=$((5 + DUR)) 'NR > 1 && $1 <= t { c = $4 } END { print c }' "$W/slow.$p.$m.csv" 2>/dev/null || true)
		awk -v p=$p -v m=$m -v b="$base" -v a="$attack" -v o="${open:-?}" -v bc="$b_conns" -v ac="$a_conns" \
			-v pb=$((c1 - c0)) -v pa=$((c3 - c2)) -v hz="$(getconf CLK_TCK)" -v d="$DUR" \
			'BEGIN { printf "%-8s %s base_rps=%.0f attack_rps=%.0f (%.0f%%) slow_open=%s origin_conns=%d/%d proxy_cpu=%.0f%%/%.0f%%\n",
				p, m, b, a, (b > 0 ? 100 * a / b : 0), o, bc, ac, 100 * pb / hz / d, 100 * pa / hz / d }'
		sleep 2
	done
	kill $PP; wait $PP 2>/dev/null || true
done
echo "work files in $W"
