#!/usr/bin/env bash
# h2peers.sh: weir's HTTP/2 server side by side with nginx, HAProxy and,
# where Debian has them, nghttpx and h2o: one origin, one load, one run.
#
#   tests/bench/h2peers.sh [options]
#
# One nginx origin (/ "hello from origin", /64k 65,536 bytes) on a free
# 127.0.0.1 port; each proxy with ONE worker or thread, in the foreground,
# on a free port, takes HTTP/2 from the clients (h2c with prior knowledge,
# or TLS with ALPN h2) and sends HTTP/1.1 keep-alive to the origin. weir is
# build/weir (or $WEIR_BIN) with a configuration written here.
#
# Options:
#   --mode rps|instr|syscalls|mem|cpu   what to measure (default rps)
#   --path P        / (18-byte body) or /64k (65536 bytes); default /
#   --tls           TLS with ALPN h2 (default: h2c, prior knowledge)
#   --rounds N      interleaved h2load rounds per target (rps; default 3)
#   --duration S    seconds per h2load run (rps; default 5, at most 20)
#   --requests N    requests counted under callgrind or strace (instr,
#                   syscalls; default 20000)
#   --conns N       idle connections opened (mem; default 2000)
#   --only LIST     the targets, comma-separated (default
#                   weir,nginx,haproxy,nghttpx,h2o)
#   --keep DIR      instr: keep the callgrind files in DIR (for
#                   callgrind_annotate: where the instructions go);
#                   syscalls: the strace -c tables
#
# Figures (one line each, then ratios weir/best_peer):
#   rps             median requests/s of h2load -c64 -m10 -t1 -D S
#   instr_per_req   user-space instructions of the serving process per
#                   succeeded request of h2load -c64 -m10 -t1 -n N, counted
#                   by callgrind from the first measured request to the
#                   last (connection set-up included, spread over N)
#   syscalls_per_req  system calls of the serving process per succeeded
#                   request of the same h2load run, counted by strace -c
#                   (with --keep, the per-call table is kept in DIR: which
#                   calls, how many epoll_waits, that is loop passes)
#   kib_per_conn    RSS growth of the serving process per idle h2
#                   connection (preface, SETTINGS, one request each), KiB
#   us_per_req      CPU (user+system) of the serving process per request
#                   of h2load -c64 -m10 -t1 -D S, from /proc/PID/stat; a
#                   line per target also gives its user part and what
#                   h2load (time(1)) and the origin spent per request, and
#                   their sum: the two cores divided by that sum bound the
#                   requests/s of the whole set-up, as cpusplit.sh does
#                   for HTTP/1
# rps: above 1 is better for weir; instr, syscalls, mem and cpu: below 1.
set -euo pipefail

MODE=rps ROUNDS=3 DUR=5 NREQ=20000 NCONN=2000 PATH_=/ TLS=0 KEEP=
TARGETS=weir,nginx,haproxy,nghttpx,h2o
while [ $# -gt 0 ]; do
	case "$1" in
	--mode) MODE=$2; shift 2;;
	--rounds) ROUNDS=$2; shift 2;;
	--duration) DUR=$2; shift 2;;
	--requests) NREQ=$2; shift 2;;
	--conns) NCONN=$2; shift 2;;
	--path) PATH_=$2; shift 2;;
	--tls) TLS=1; shift;;
	--only) TARGETS=$2; shift 2;;
	--keep) KEEP=$2; shift 2;;
	-h|--help) sed -n '2,46p' "$0"; exit 0;;
	*) echo "h2peers.sh: unknown option $1 (see --help)" >&2; exit 2;;
	esac
done
case $MODE in rps|instr|syscalls|mem|cpu) ;; *) echo "h2peers.sh: --mode rps|instr|syscalls|mem|cpu" >&2; exit 2;; esac
[ "$DUR" -le 20 ] || { echo "h2peers.sh: --duration at most 20" >&2; exit 2; }
[ "$MODE" = mem ] && TLS=1 # the figure the issue asks for is with TLS

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
WEIR=${WEIR_BIN:-$ROOT/build/weir}
[ -x "$WEIR" ] || { echo "h2peers.sh: no $WEIR (make build/weir, or set WEIR_BIN)" >&2; exit 2; }
. "$HERE/peerconf.sh"

# need: the tools, installed as ../shared/bench/peers.sh does; nghttpx and
# h2o are optional (skipped with a line when they cannot be had)
need() {
	local missing=() pair
	for pair in nginx:nginx-light haproxy:haproxy h2load:nghttp2-client valgrind:valgrind \
	            strace:strace curl:curl python3:python3 /usr/bin/time:time; do
		command -v "${pair%%:*}" >/dev/null || missing+=("${pair#*:}")
	done
	if [ ${#missing[@]} -gt 0 ]; then
		echo "h2peers.sh: installing ${missing[*]}" >&2
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}") >/dev/null
	fi
	for pair in nghttpx:nghttp2-proxy h2o:h2o; do
		case ",$TARGETS," in *",${pair%%:*},"*) ;; *) continue;; esac
		command -v "${pair%%:*}" >/dev/null && continue
		echo "h2peers.sh: installing ${pair#*:}" >&2
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pair#*:}" >/dev/null 2>&1 ||
			echo "h2peers.sh: ${pair%%:*} skipped: apt-get install ${pair#*:} failed" >&2
	done
}
need

W=$(mktemp -d /tmp/h2peers.XXXXXX)
PIDS=()
cleanup() {
	local p
	for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
	sleep 0.3
	for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null || true; done
	rm -rf "$W"
}
trap cleanup EXIT
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

# free ports, all bound at once so that no two are the same
read -r ORIGIN_PORT WEIR_PORT NGX_PORT HAP_PORT NGHX_PORT H2O_PORT STATS_PORT < <(python3 -c '
import socket
s = [socket.socket() for _ in range(7)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
declare -A PORT=([weir]=$WEIR_PORT [nginx]=$NGX_PORT [haproxy]=$HAP_PORT [nghttpx]=$NGHX_PORT [h2o]=$H2O_PORT)

head -c 65536 /dev/zero | tr '\0' 'x' >"$W/64k"
export PEERS_TLS_DIR=${PEERS_TLS_DIR:-/tmp/peers-tls}
CERT=$PEERS_TLS_DIR/cert.pem KEY=$PEERS_TLS_DIR/key.pem
if [ "$TLS" = 1 ]; then
	mkdir -p "$PEERS_TLS_DIR"
	if [ ! -s "$CERT" ]; then
		openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 3650 \
			-subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
			-keyout "$KEY" -out "$CERT" 2>/dev/null
	fi
	cat "$CERT" "$KEY" >"$W/haproxy.pem"
fi
SCHEME=http; [ "$TLS" = 1 ] && SCHEME=https
MAXC=$((NCONN + 2000))

bench_nginx_origin "$W/origin.conf" "$W" "$ORIGIN_PORT" "location = /64k { alias $W/64k; }"

# weir: one worker in the process started here (master_process = false),
# as nginx runs with master_process off and HAProxy with -db
WEIR_TLS=""
[ "$TLS" = 1 ] && WEIR_TLS="tls = { certificates = ( { cert = \"$CERT\"; key = \"$KEY\"; } ); };"
cat >"$W/weir.conf" <<EOF
workers = 1;
master_process = false;
stats = { listen = "127.0.0.1:$STATS_PORT"; };
log = { error = "stderr"; access = "off"; level = "notice"; };
limits = { connections = $MAXC; };
listeners = ( { address = "127.0.0.1:$WEIR_PORT"; backlog = 4096; $WEIR_TLS } );
upstreams = ( { name = "origin"; keepalive = 256; servers = ( { address = "127.0.0.1:$ORIGIN_PORT"; } ); } );
routes = ( { path = "/"; upstream = "origin"; } );
EOF

# nginx 1.22: http2 is a parameter of listen
NGX_LISTEN="127.0.0.1:$NGX_PORT http2 backlog=4096"
[ "$TLS" = 1 ] && NGX_LISTEN="127.0.0.1:$NGX_PORT ssl http2 backlog=4096; ssl_certificate $CERT; ssl_certificate_key $KEY; ssl_protocols TLSv1.2 TLSv1.3"
bench_nginx_proxy "$W/nginx.conf" "$W" "$NGX_LISTEN" "$ORIGIN_PORT"
sed -i "s/^worker_processes 1;/worker_processes 1; worker_rlimit_nofile $((2 * MAXC));/; s/worker_connections 8192;/worker_connections $((2 * MAXC));/" "$W/nginx.conf"

HAP_BIND="127.0.0.1:$HAP_PORT proto h2"
[ "$TLS" = 1 ] && HAP_BIND="127.0.0.1:$HAP_PORT ssl crt $W/haproxy.pem alpn h2"
bench_haproxy "$W/haproxy.cfg" "$MAXC" "$HAP_BIND" "127.0.0.1:$ORIGIN_PORT" \
	"  option http-keep-alive" "  http-reuse always"

# nghttpx: one worker in one process, default mode (HTTP/1.1 to the backend)
NGHX_FRONT="127.0.0.1,$NGHX_PORT;no-tls"
NGHX_TLS=()
[ "$TLS" = 1 ] && NGHX_FRONT="127.0.0.1,$NGHX_PORT" NGHX_TLS=("$KEY" "$CERT")
NGHX_CMD=(nghttpx --conf=/dev/null --single-process --workers=1 --no-ocsp
	"--frontend=$NGHX_FRONT" "--backend=127.0.0.1,$ORIGIN_PORT" --backend-keep-alive-timeout=60s
	"--rlimit-nofile=$((2 * MAXC))" --errorlog-file="$W/nghttpx.err" "${NGHX_TLS[@]}")

# h2o: one thread; h2c with prior knowledge on a plain listener
H2O_SSL=""
[ "$TLS" = 1 ] && H2O_SSL="
  ssl:
    certificate-file: $CERT
    key-file: $KEY"
cat >"$W/h2o.conf" <<EOF
num-threads: 1
max-connections: $MAXC
http2-idle-timeout: 120
pid-file: $W/h2o.pid
error-log: $W/h2o.err
user: root
listen:
  host: 127.0.0.1
  port: $H2O_PORT$H2O_SSL
hosts:
  default:
    paths:
      /:
        proxy.reverse.url: http://127.0.0.1:$ORIGIN_PORT/
        proxy.timeout.keepalive: 60000
EOF

CURL_H2=(--http2-prior-knowledge); [ "$TLS" = 1 ] && CURL_H2=(--http2 -k)
url() { echo "$SCHEME://127.0.0.1:$1"; }

# up PORT: the target answers its first HTTP/2 request (10 s; valgrind is slow)
up() {
	local i
	for i in $(seq 1 100); do
		curl -fs -o /dev/null "${CURL_H2[@]}" "$(url "$1")/" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

# start NAME [WRAPPER...]: the proxy NAME in the background; sets STARTED_PID.
# Fails (returns 1, with a line) if it does not answer.
start() {
	local name=$1
	shift
	case $name in
	weir)    setsid "$@" "$WEIR" -c "$W/weir.conf" >"$W/$name.out" 2>&1 & ;;
	nginx)   setsid "$@" nginx -c "$W/nginx.conf" >"$W/$name.out" 2>&1 & ;;
	haproxy) setsid "$@" haproxy -db -f "$W/haproxy.cfg" >"$W/$name.out" 2>&1 & ;;
	nghttpx) setsid "$@" "${NGHX_CMD[@]}" >"$W/$name.out" 2>&1 & ;;
	h2o)     setsid "$@" h2o -c "$W/h2o.conf" >"$W/$name.out" 2>&1 & ;;
	esac
	STARTED_PID=$!
	PIDS+=("$STARTED_PID")
	if ! up "${PORT[$name]}"; then
		echo "h2peers.sh: $name skipped: no HTTP/2 answer on 127.0.0.1:${PORT[$name]} ($(tail -c 300 "$W/$name.out" | tr '\n' ' '))" >&2
		stop "$STARTED_PID"
		return 1
	fi
}
# stop PID: ends it and takes it off the list cleanup() kills
stop() {
	local p keep=()
	kill "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
	for p in "${PIDS[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
	PIDS=("${keep[@]}")
}

# the process that serves requests: the only child if there is one, else
# itself; h2o serves in the process started, its child is a helper
server_pid() {
	local kids=""
	[ "$2" = h2o ] || kids=$(pgrep -P "$1" || true)
	if [ -n "$kids" ] && [ "$(echo "$kids" | wc -l)" -eq 1 ]; then echo "$kids"; else echo "$1"; fi
}

# the targets to run: those asked for whose program is here
LIST=()
for t in ${TARGETS//,/ }; do
	case $t in
	weir|nginx|haproxy) LIST+=("$t");;
	nghttpx|h2o) if command -v "$t" >/dev/null; then LIST+=("$t"); else echo "h2peers.sh: $t skipped: not installed" >&2; fi;;
	*) echo "h2peers.sh: unknown target $t" >&2; exit 2;;
	esac
done

setsid nginx -c "$W/origin.conf" >"$W/origin.out" 2>&1 &
ORIGIN_PID=$!
PIDS+=($ORIGIN_PID)
for _ in $(seq 1 100); do curl -fs -o /dev/null "http://127.0.0.1:$ORIGIN_PORT/" && break; sleep 0.1; done
curl -fs -o "$W/body.origin" "http://127.0.0.1:$ORIGIN_PORT$PATH_"

median() { sort -g | awk '{a[NR]=$1} END {if (NR==0) print "nan"; else if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == "" || b == "nan" || b+0 == 0) print "nan"; else printf "%.3f\n", a/b }'; }

# report LABEL BEST(max|min) UNIT: the figure line, then weir over each peer
# and over the best of them
declare -A FIG
report() {
	local label=$1 best=$2 line="$1 path=$PATH_ tls=$TLS" t b="" bn="" r=""
	for t in "${LIST[@]}"; do line+=" $t=${FIG[$t]:-nan}"; done
	echo "$line"
	for t in "${LIST[@]}"; do
		[ "$t" = weir ] && continue
		[ "${FIG[$t]:-nan}" = nan ] && continue
		r+=" weir/$t=$(ratio "${FIG[weir]:-nan}" "${FIG[$t]}")"
		if [ -z "$b" ] || awk -v x="${FIG[$t]}" -v y="$b" -v m="$best" 'BEGIN { exit !((m == "max") ? x > y : x < y) }'; then
			b=${FIG[$t]} bn=$t
		fi
	done
	echo "${label}_ratio$r weir/best_peer=$(ratio "${FIG[weir]:-nan}" "$b") best_peer=${bn:-none}"
}

H2LOAD=(h2load -c64 -m10 -t1)

if [ "$MODE" = rps ]; then
	RUN=()
	for t in "${LIST[@]}"; do
		start "$t" || continue
		# the answer must be the origin's, over HTTP/2
		curl -fs "${CURL_H2[@]}" -o "$W/body.$t" -w '%{http_version}' "$(url "${PORT[$t]}")$PATH_" >"$W/ver.$t" || true
		if ! cmp -s "$W/body.$t" "$W/body.origin" || [ "$(cat "$W/ver.$t")" != 2 ]; then
			echo "h2peers.sh: $t skipped: its HTTP/2 answer to $PATH_ is not the origin's (version $(cat "$W/ver.$t"))" >&2
			stop "$STARTED_PID"; continue
		fi
		RUN+=("$t")
	done
	LIST=("${RUN[@]}")
	declare -A RPS
	for r in $(seq 1 "$ROUNDS"); do
		for t in "${LIST[@]}"; do
			out=$(timeout $((DUR + 15)) "${H2LOAD[@]}" -D "$DUR" "$(url "${PORT[$t]}")$PATH_" 2>&1 || true)
			rps=$(echo "$out" | awk '/^finished in/ {print $4}')
			bad=$(echo "$out" | awk '/^requests:/ {print $10+$12}')
			[ "${bad:-0}" = 0 ] || echo "# round $r $t: $(echo "$out" | grep -E '^(requests|status codes):' | tr '\n' ' ')" >&2
			RPS[$t]="${RPS[$t]:-} ${rps:-0}"
		done
	done
	for t in "${LIST[@]}"; do FIG[$t]=$(echo ${RPS[$t]} | tr ' ' '\n' | median); done
	report rps max
	# requests/s are only as good as the machine is idle: say how busy it was
	echo "# load average after the rounds: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"
fi

if [ "$MODE" = instr ]; then
	for t in "${LIST[@]}"; do
		start "$t" valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$W/cg.$t.%p" || continue
		sp=$(server_pid "$STARTED_PID" "$t")
		callgrind_control -i on "$sp" >/dev/null 2>&1 || echo "# instr $t: callgrind_control -i on $sp failed" >&2
		out=$(timeout 300 "${H2LOAD[@]}" -n "$NREQ" "$(url "${PORT[$t]}")$PATH_" 2>&1 || true)
		ok=$(echo "$out" | awk '/^requests:/ {print $8}')
		callgrind_control -d "$sp" >/dev/null 2>&1 || echo "# instr $t: callgrind_control -d $sp failed" >&2
		total=$(for f in "$W"/cg."$t".*; do callgrind_annotate "$f" 2>/dev/null |
			awk '/PROGRAM TOTALS/ {gsub(",","",$1); print $1}'; done | awk '{s+=$1} END {print s+0}')
		FIG[$t]=$(awk -v t="$total" -v n="${ok:-0}" 'BEGIN { if (n == 0) print "nan"; else printf "%.0f\n", t/n }')
		[ -z "$KEEP" ] || { mkdir -p "$KEEP" && cp "$W"/cg."$t".* "$KEEP"/; }
		[ "${ok:-0}" = "$NREQ" ] || echo "# instr $t: only ${ok:-0} of $NREQ requests succeeded" >&2
		stop "$STARTED_PID"; sleep 0.5
	done
	report instr_per_req min
fi

if [ "$MODE" = syscalls ]; then
	for t in "${LIST[@]}"; do
		start "$t" || continue
		sp=$(server_pid "$STARTED_PID" "$t")
		strace -c -f -p "$sp" -o "$W/st.$t" 2>/dev/null &
		spid=$!
		sleep 0.5
		out=$(timeout 300 "${H2LOAD[@]}" -n "$NREQ" "$(url "${PORT[$t]}")$PATH_" 2>&1 || true)
		ok=$(echo "$out" | awk '/^requests:/ {print $8}')
		sleep 0.3
		kill -INT "$spid" 2>/dev/null || true
		wait "$spid" 2>/dev/null || true
		# the total line: "100.00 secs usecs/call calls [errors] total"
		calls=$(awk '$NF == "total" { print $4 }' "$W/st.$t" 2>/dev/null)
		FIG[$t]=$(awk -v c="${calls:-0}" -v n="${ok:-0}" 'BEGIN { if (n == 0 || c == 0) print "nan"; else printf "%.2f\n", c/n }')
		[ -z "$KEEP" ] || { mkdir -p "$KEEP" && cp "$W/st.$t" "$KEEP/strace.$t"; }
		[ "${ok:-0}" = "$NREQ" ] || echo "# syscalls $t: only ${ok:-0} of $NREQ requests succeeded" >&2
		stop "$STARTED_PID"; sleep 0.5
	done
	report syscalls_per_req min
fi

if [ "$MODE" = mem ]; then
	for t in "${LIST[@]}"; do
		start "$t" || continue
		sp=$(server_pid "$STARTED_PID" "$t")
		out=$(cd "$HERE" && timeout 120 python3 h2idle.py "${PORT[$t]}" "$sp" "$NCONN" --tls --path "$PATH_" || true)
		echo "# $t: $out" >&2
		FIG[$t]=$(echo "$out" | awk '{for (i=1;i<=NF;i++) if ($i ~ /^kib_per_conn=/) {sub("kib_per_conn=","",$i); print $i}}')
		ok=$(echo "$out" | awk '{for (i=1;i<=NF;i++) if ($i ~ /^ok=/) {sub("ok=","",$i); print $i}}')
		[ "${ok:-0}" = "$NCONN" ] || { echo "# mem $t: only ${ok:-0} of $NCONN connections opened" >&2; }
		[ -n "${FIG[$t]}" ] || FIG[$t]=nan
		stop "$STARTED_PID"; sleep 0.5
	done
	report kib_per_conn min
fi

if [ "$MODE" = cpu ]; then
	hz=$(getconf CLK_TCK)
	# CPU ticks (user+system, or user alone) of <pid> and its children
	ticks() { for q in $1 $(pgrep -P "$1" || true); do cat "/proc/$q/stat"; done | awk -v f="${2:-}" '{t += $14 + (f == "u" ? 0 : $15)} END {print t}'; }
	OP=$ORIGIN_PID
	for t in "${LIST[@]}"; do
		start "$t" || continue
		sp=$(server_pid "$STARTED_PID" "$t")
		timeout 20 "${H2LOAD[@]}" -D 1 "$(url "${PORT[$t]}")$PATH_" >/dev/null 2>&1 || true # warm-up
		p0=$(ticks "$sp") u0=$(ticks "$sp" u) o0=$(ticks "$OP")
		/usr/bin/time -f "%U %S" -o "$W/time" timeout $((DUR + 15)) "${H2LOAD[@]}" -D "$DUR" \
			"$(url "${PORT[$t]}")$PATH_" >"$W/h2load" 2>&1 || true
		p1=$(ticks "$sp") u1=$(ticks "$sp" u) o1=$(ticks "$OP")
		ok=$(awk '/^requests:/ {print $8}' "$W/h2load")
		read -r lu ls <"$W/time"
		line=$(awk -v n="$t" -v r="${ok:-0}" -v p=$((p1 - p0)) -v u=$((u1 - u0)) -v o=$((o1 - o0)) \
			-v lu="$lu" -v ls="$ls" -v hz="$hz" -v d="$DUR" 'BEGIN {
			if (r == 0) { printf "%-8s no request succeeded\n", n; exit }
			t = 1e6 / hz / r; l = (lu + ls) * 1e6 / r
			printf "%-8s rps=%.0f us/req proxy=%.2f (user %.2f) h2load=%.2f origin=%.2f sum=%.2f\n",
				n, r / d, p * t, u * t, l, o * t, p * t + l + o * t }')
		echo "$line"
		FIG[$t]=$(echo "$line" | sed -n 's/.*proxy=\([0-9.]*\).*/\1/p')
		[ -n "${FIG[$t]}" ] || FIG[$t]=nan
		stop "$STARTED_PID"; sleep 0.5
	done
	report us_per_req min
fi
