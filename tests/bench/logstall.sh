#!/usr/bin/env bash
# logstall.sh: does an upstream outage at full load slow weir down when its
# error log's reader is slow (a pipe, journald under pressure)?
#
#   tests/bench/logstall.sh [--duration S] [--conns C] [--bin PATH]
#
# One worker (master_process on) in front of an upstream that refuses
# connections, so every request is a 502 with an error-log line. wrk -t2
# -cC (64) for S seconds (10), twice:
#   devnull  the error log (stderr) on /dev/null;
#   slowpipe the error log on a pipe whose reader takes 4 KiB every 100 ms
#            (40 KiB/s, far less than a 502 storm writes);
# and prints requests/s, latency and non-2xx answers of each, then
#
#   logstall devnull=R/s slowpipe=R/s ratio=X
#
# A worker that blocks on its log is held to the reader's pace (ratio far
# below 1); one that buffers, throttles and drops stays near 1.
# --bin selects the binary (default build/weir): run it with an older
# build to compare. KEEP=1 keeps the temporary directory. Everything
# listens on 127.0.0.1; every run is bounded (wrk -d, timeout).
set -euo pipefail

DUR=10 CONNS=64 BIN=
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

TMP=$(mktemp -d /tmp/weir-logstall.XXXXXX)
WEIR_PID=
cleanup() {
	[ -n "$WEIR_PID" ] && kill "$WEIR_PID" 2>/dev/null || true
	wait 2>/dev/null || true
	[ -n "${KEEP:-}" ] && echo "kept $TMP" || rm -rf "$TMP"
}
trap cleanup EXIT

free_port() {
	/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
PORT=$(free_port) STATS=$(free_port) DOWN=$(free_port) # nothing listens on DOWN

cat >"$TMP/weir.conf" <<EOF
workers = 1;
log = { error = "stderr"; access = "off"; level = "info"; };
stats = { listen = "127.0.0.1:$STATS"; };
listeners = ( { address = "127.0.0.1:$PORT"; } );
upstreams = ( { name = "down"; servers = ( { address = "127.0.0.1:$DOWN"; } ); } );
routes = ( { path = "/"; upstream = "down"; } );
EOF

wait_port() {
	for _ in $(seq 100); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
		sleep 0.05
	done
	echo "weir did not start" >&2
	return 1
}

slow_reader() {
	# 4 KiB every 100 ms until the writer goes away
	while sleep 0.1; do
		[ "$(head -c 4096 | wc -c)" -gt 0 ] || break
	done
}

run() { # NAME: starts weir, runs wrk, stops weir
	local name=$1
	if [ "$name" = devnull ]; then
		"$BIN" -c "$TMP/weir.conf" 2>/dev/null &
		WEIR_PID=$!
	else
		mkfifo "$TMP/err.fifo"
		slow_reader <"$TMP/err.fifo" &
		"$BIN" -c "$TMP/weir.conf" 2>"$TMP/err.fifo" &
		WEIR_PID=$!
	fi
	wait_port "$PORT"
	timeout $((DUR + 30)) wrk -t2 -c"$CONNS" -d"${DUR}s" --latency "http://127.0.0.1:$PORT/" >"$TMP/wrk-$name.txt" || true
	curl -s "http://127.0.0.1:$STATS/metrics" | grep -E '^weir_(log_dropped_total|responses_total\{class="5xx"\})' \
		>"$TMP/metrics-$name.txt" || true
	kill "$WEIR_PID" 2>/dev/null || true
	wait "$WEIR_PID" 2>/dev/null || true
	WEIR_PID=
	rm -f "$TMP/err.fifo"
	echo "== $name"
	grep -E 'Requests/sec|Latency  |Non-2xx|Socket errors|requests in' "$TMP/wrk-$name.txt" || true
	sed 's/^/   /' "$TMP/metrics-$name.txt"
}

run devnull
run slowpipe
r1=$(awk '/Requests\/sec/ {print $2}' "$TMP/wrk-devnull.txt")
r2=$(awk '/Requests\/sec/ {print $2}' "$TMP/wrk-slowpipe.txt")
echo "logstall devnull=${r1:-0}/s slowpipe=${r2:-0}/s ratio=$(awk -v a="${r1:-0}" -v b="${r2:-0}" \
	'BEGIN { printf "%.2f", (a > 0 ? b / a : 0) }')"
