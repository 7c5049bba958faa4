#!/usr/bin/env bash
# tail.sh: tail latency at a fixed rate, weir against nginx and HAProxy.
#
#   tests/bench/tail.sh [--rate R] [--conns C] [--duration S] [--path P] [--rounds N]
#
# Requests/s at saturation hides queueing: there every request waits
# behind the others and p99 mostly measures the queue. This runs the set-up
# of peers.sh and cpusplit.sh (one nginx origin on 127.0.0.1:19000, each
# proxy with one worker, no access log) and loads each proxy in turn with
# tests/bench/rate.c (built into build/bench/rate): R requests a second
# (default 10000, well under what any of the three saturates at on this
# machine) over C keep-alive connections (default 64) for S seconds
# (default 5) after a second of warm-up, latency counted from when each
# request was due, not when it went out. For each proxy and round it
# prints rate.c's line; then, per proxy, the median over the rounds of
# p99 and p99.9 in microseconds, and weir's p99 as a ratio to the better
# peer's. "direct" is the same load straight to the origin: what a proxy
# adds is its p99 less direct's, and the last line gives that as a ratio
# too.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/bench/peerconf.sh

RATE=10000 CONNS=64 DUR=5 PATH_=/ ROUNDS=3
while [ $# -gt 0 ]; do
	case $1 in
	--rate) RATE=$2; shift ;;
	--conns) CONNS=$2; shift ;;
	--duration) DUR=$2; shift ;;
	--path) PATH_=$2; shift ;;
	--rounds) ROUNDS=$2; shift ;;
	*) echo "usage: $0 [--rate R] [--conns C] [--duration S] [--path P] [--rounds N]" >&2; exit 2 ;;
	esac
	shift
done
for t in nginx haproxy; do
	command -v $t >/dev/null || { echo "tail.sh: needs $t" >&2; exit 1; }
done
[ -x build/weir ] || make build/weir >/dev/null
mkdir -p build/bench
[ build/bench/rate -nt tests/bench/rate.c ] || cc -O2 -Wall -Wextra -Werror -o build/bench/rate tests/bench/rate.c

W=$(mktemp -d /tmp/tail.XXXXXX)
head -c 65536 /dev/zero | tr '\0' 'x' >"$W/64k"
PIDS=()
cleanup() { for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

bench_nginx_origin "$W/origin.conf" "$W" 19000 "location = /64k { alias $W/64k; }"
bench_nginx_proxy "$W/nginx.conf" "$W" "127.0.0.1:18081" 19000
bench_haproxy "$W/haproxy.cfg" 4000 "127.0.0.1:18082" 127.0.0.1:19000 "  option http-keep-alive" \
	"  http-reuse always"

setsid nginx -c "$W/origin.conf" & PIDS+=($!)
sleep 0.3
declare -A P99 P999
for p in direct weir nginx haproxy; do
	case $p in
	direct) PP=; PORT=19000 ;;
	weir) setsid build/weir -c tests/bench/peers.conf >"$W/weir.out" 2>&1 & PP=$!; PORT=18080 ;;
	nginx) setsid nginx -c "$W/nginx.conf" & PP=$!; PORT=18081 ;;
	haproxy) setsid haproxy -db -f "$W/haproxy.cfg" >"$W/haproxy.out" 2>&1 & PP=$!; PORT=18082 ;;
	esac
	[ -n "$PP" ] && PIDS+=($PP)
	for _ in $(seq 1 50); do curl -sf -o /dev/null "http://127.0.0.1:$PORT$PATH_" && break; sleep 0.1; done
	for r in $(seq 1 "$ROUNDS"); do
		line=$(build/bench/rate -p "$PORT" -r "$RATE" -c "$CONNS" -d "$DUR" -u "$PATH_")
		echo "$p round $r: $line"
		P99[$p]="${P99[$p]:-} $(echo "$line" | sed 's/.*p99_us=\([0-9]*\).*/\1/')"
		P999[$p]="${P999[$p]:-} $(echo "$line" | sed 's/.*p999_us=\([0-9]*\).*/\1/')"
	done
	[ -n "$PP" ] && { kill "$PP" 2>/dev/null || true; sleep 0.5; }
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
declare -A M
for p in direct weir nginx haproxy; do
	M[$p]=$(echo ${P99[$p]} | median)
	echo "$p p99_us=${M[$p]} p999_us=$(echo ${P999[$p]} | median) (median of $ROUNDS at $RATE/s, $CONNS conns, $PATH_)"
done
best=$(( M[nginx] < M[haproxy] ? M[nginx] : M[haproxy] ))
awk -v w="${M[weir]}" -v b="$best" -v d="${M[direct]}" \
	'BEGIN { printf "p99_ratio weir/best_peer=%.3f added_by_proxy weir/best_peer=%.3f\n", w / b, (w - d) / (b - d) }'
