#!/usr/bin/env bash
# cpusplit.sh: where the CPU goes, per request, when weir, nginx and HAProxy
# each proxy the same load on this machine.
#
#   tests/bench/cpusplit.sh [--tls] [--close] [--path P] [--duration S] [--rounds R] [--conns C]
#                           [--threads T] [--pin] [--workers N] [--steering cpu|hash] [--only P,...]
#
# peers.sh compares requests/s, but on a 2-core machine the load generator
# (wrk) and the origin share the cores with the proxy, so requests/s tells
# how fast the three processes are together. This script runs the same
# set-up as peers.sh (one nginx origin on 127.0.0.1:19000 answering
# "hello from origin", each proxy with one worker, wrk -t1 -cC for S
# seconds; with --tls the proxies terminate TLS with peers.sh's ECDSA
# certificate in /tmp/peers-tls; with --close every request is a new
# connection) and, for each proxy in turn, reads the CPU time of the proxy
# and of the origin from /proc/PID/stat and wrk's from time(1).
#
# --rounds R (default 1) measures every proxy R times, taking turns: round
# 1 runs each for S seconds, then round 2 does, and so on, all of them
# started once. This VM's speed drifts by a quarter from one minute to
# the next, more than the differences measured, so one long run per proxy
# compares each with a different machine; in turns, a drift falls on all
# of them alike. Each round prints its own CPU per request, and the
# summary pools the rounds. It prints
#
#   NAME rps=R us/req proxy=P (user U) wrk=W origin=O sum=S
#
# in microseconds of CPU per request: P is what one proxied request costs
# the proxy (U of it in user space, the rest in the kernel), and 2 cores
# divided by S bounds the requests/s of the whole set-up. Softirq time the
# kernel does not charge to a process is not in these figures. Under each
# line,
#
#   sleeps/req=V idle=I
#
# V is how often the proxy blocked waiting for an event (its voluntary
# context switches) per request, I the share of the machine's CPU time
# left idle while it was measured: with three single-threaded processes
# on two cores, each request a chain through all three, a proxy that
# sleeps often leaves cores idle that its requests/s then does not use.
# With weir and a peer measured, a last line puts weir against the better peer:
#
#   weir/better peer: cpu=C (PEER) rps=Q (PEER)
#
# C is weir's CPU per request over the lower of the peers', Q weir's
# requests/s over the higher (the terms of issue 18's targets).
#
# The floor (tests/bench/floor.c, built here into build/bench/floor) runs
# first: the least a keep-alive proxy can do on this kernel, one upstream
# connection per client connection and no parsing beyond a response's
# Content-Length. Every proxy's line ends with its CPU per request as a
# ratio to the floor's (x floor). The floor speaks plain HTTP even with
# --tls, so there the ratio includes what TLS costs. --path chooses the
# request: / (18 bytes) or /64k (65536 bytes).
#
# --workers N (N > 1) runs weir with a master and N workers (the nginx and
# HAProxy stay at one), its CPU summed over the master and every worker,
# with worker_cpu_affinity at its default ("auto": on when N equals the
# cores) and reuseport_steering as --steering says (default "hash"); the
# weir line is then followed by "conns: PID=K ..." (established client
# connections per worker, sampled by ss half-way through the run).
# --threads T gives wrk T threads (default 1): with steering by CPU, a
# loopback client's connections land on the worker of the CPU the client
# ran on, so one wrk thread feeds one worker. --pin runs one wrk per CPU
# instead (taskset -c I wrk -tT -c C/ncpus), their requests and CPU
# summed, so each CPU receives its share of the connections as a NIC with
# one queue per core would spread them. --only weir,floor runs only those.
# floorsplice, run only when --only names it, is the floor moving response
# bodies through a pipe with splice(2) (floor --splice): with --path /64k
# it shows what splicing plain bodies could save on this kernel.
# --compare BIN adds "weirb": weir built otherwise (another commit, other
# compiler flags) on the same configuration, on ports 18085 and 18091,
# measured in the same rounds as build/weir, so an A/B of two builds
# shares every drift of the machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/bench/peerconf.sh

TLS=0 CLOSE=0 DUR=5 ROUNDS=1 CONNS=64 PATH_=/ THREADS=1 PIN=0 WORKERS=1 STEER=hash ONLY=floor,weir,nginx,haproxy
COMPARE=""
while [ $# -gt 0 ]; do
	case $1 in
	--tls) TLS=1 ;;
	--close) CLOSE=1 ;;
	--duration) DUR=$2; shift ;;
	--rounds) ROUNDS=$2; shift ;;
	--conns) CONNS=$2; shift ;;
	--path) PATH_=$2; shift ;;
	--threads) THREADS=$2; shift ;;
	--pin) PIN=1 ;;
	--workers) WORKERS=$2; shift ;;
	--steering) STEER=$2; shift ;;
	--only) ONLY=$2; shift ;;
	--compare) COMPARE=$2; shift ;;
	*) echo "usage: $0 [--tls] [--close] [--path P] [--duration S] [--rounds R] [--conns C] [--threads T]" \
		"[--pin] [--workers N] [--steering cpu|hash] [--only P,...] [--compare BIN]" >&2; exit 2 ;;
	esac
	shift
done
for t in nginx haproxy wrk; do
	command -v $t >/dev/null || { echo "cpusplit.sh: needs $t (run ../shared/bench/peers.sh once)" >&2; exit 1; }
done
[ -x /usr/bin/time ] || { echo "cpusplit.sh: needs /usr/bin/time (apt-get install time)" >&2; exit 1; }
[ -x build/weir ] || make build/weir >/dev/null
mkdir -p build/bench
[ build/bench/floor -nt tests/bench/floor.c ] || cc -O2 -Wall -Wextra -Werror -o build/bench/floor tests/bench/floor.c

W=$(mktemp -d /tmp/cpusplit.XXXXXX)
head -c 65536 /dev/zero | tr '\0' 'x' >"$W/64k"
T=/tmp/peers-tls
PIDS=()
cleanup() { for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

SCHEME=http NGX_SSL="" HAP_SSL="" WEIR_CONF=tests/bench/peers.conf
if [ "$TLS" = 1 ]; then
	if [ ! -s $T/cert.pem ]; then
		mkdir -p $T
		openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 3650 \
			-subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
			-keyout $T/key.pem -out $T/cert.pem 2>/dev/null
	fi
	cat $T/cert.pem $T/key.pem >"$W/hap.pem"
	SCHEME=https WEIR_CONF=tests/bench/peers-tls.conf
	NGX_SSL=" ssl; ssl_certificate $T/cert.pem; ssl_certificate_key $T/key.pem; ssl_session_cache shared:SSL:10m; ssl_protocols TLSv1.2 TLSv1.3"
	HAP_SSL=" ssl crt $W/hap.pem"
fi
HDR=()
[ "$CLOSE" = 1 ] && HDR=(-H "Connection: close")
if [ "$WORKERS" -gt 1 ]; then
	# a master and N workers; every other line of the configuration kept
	sed -e "s/^workers = 1;/workers = $WORKERS;/" -e '/^master_process = false;/d' "$WEIR_CONF" >"$W/weir.conf"
	echo "reuseport_steering = \"$STEER\";" >>"$W/weir.conf"
	WEIR_CONF=$W/weir.conf
fi

bench_nginx_origin "$W/origin.conf" "$W" 19000 "location = /64k { alias $W/64k; }"
bench_nginx_proxy "$W/nginx.conf" "$W" "127.0.0.1:18081$NGX_SSL" 19000
bench_haproxy "$W/haproxy.cfg" 4000 "127.0.0.1:18082$HAP_SSL" 127.0.0.1:19000 "  option http-keep-alive" \
	"  http-reuse always"

# of <pid> and its children (weir's workers)
tree() { echo "$1" $(pgrep -P "$1" || true); }
ticks() { for q in $(tree "$1"); do cat "/proc/$q/stat"; done | awk '{t += $14 + $15} END {print t}'; }
uticks() { for q in $(tree "$1"); do cat "/proc/$q/stat"; done | awk '{t += $14} END {print t}'; }
# established client connections on <port> per owning pid
conns() { ss -Htnp state established "( sport = :$1 )" | grep -o 'pid=[0-9]*' | sort | uniq -c |
	awk '{printf " %s=%d", substr($2, 5), $1}'; }
hz=$(getconf CLK_TCK)

if [ -n "$COMPARE" ]; then
	# the other binary's weir: the same configuration on ports of its own
	sed -e 's/127.0.0.1:18080/127.0.0.1:18085/' -e 's/127.0.0.1:18090/127.0.0.1:18091/' "$WEIR_CONF" >"$W/weirb.conf"
fi

setsid nginx -c "$W/origin.conf" & OP=$!; PIDS+=($OP)
sleep 0.3
NAMES=() declare -A PID URL PORTOF
for p in floor floorsplice weir weirb nginx haproxy; do
	if [ "$p" = weirb ]; then
		[ -n "$COMPARE" ] || continue
	else
		case ",$ONLY," in *",$p,"*) ;; *) continue ;; esac
	fi
	S=$SCHEME
	case $p in
	floor) setsid build/bench/floor 18083 19000 & PP=$!; PORT=18083; S=http ;;
	floorsplice) setsid build/bench/floor --splice 18084 19000 & PP=$!; PORT=18084; S=http ;;
	weir) setsid build/weir -c $WEIR_CONF >"$W/weir.out" 2>&1 & PP=$!; PORT=18080 ;;
	weirb) setsid "$COMPARE" -c "$W/weirb.conf" >"$W/weirb.out" 2>&1 & PP=$!; PORT=18085 ;;
	nginx) setsid nginx -c "$W/nginx.conf" & PP=$!; PORT=18081 ;;
	haproxy) setsid haproxy -db -f "$W/haproxy.cfg" >"$W/haproxy.out" 2>&1 & PP=$!; PORT=18082 ;;
	esac
	PIDS+=($PP) NAMES+=($p) PID[$p]=$PP PORTOF[$p]=$PORT URL[$p]="$S://127.0.0.1:$PORT$PATH_"
	for _ in $(seq 1 50); do curl -ksf -o /dev/null "${URL[$p]}" && break; sleep 0.1; done
	wrk -t1 -c"$CONNS" -d1 "${HDR[@]}" "${URL[$p]}" >/dev/null 2>&1 # warm-up
done

# voluntary context switches of <pid> and its children: the times the
# proxy slept waiting for an event
sleeps() { for q in $(tree "$1"); do cat "/proc/$q/status"; done | awk '/^voluntary_ctxt_switches/ {t += $2} END {print t}'; }
# the machine's idle ticks, every CPU
idle() { awk '/^cpu / {print $5}' /proc/stat; }

# one wrk run against <name>'s URL; appends "name req rps pticks uticks
# oticks wu ws sleeps idleticks" to $W/runs
measure() {
	local p=$1 PP=${PID[$1]} URL=${URL[$1]} p0 u0 o0 p1 u1 o1 req rps wu ws v0 v1 i0 i1
	p0=$(ticks $PP) u0=$(uticks $PP) o0=$(ticks $OP) v0=$(sleeps $PP) i0=$(idle)
	if [ "$p" = weir ] && [ "$WORKERS" -gt 1 ] && [ ! -s "$W/conns" ]; then
		(sleep "$(awk -v d="$DUR" 'BEGIN {print d / 2}')"; conns ${PORTOF[$p]} >"$W/conns") & SP=$!
	fi
	if [ "$PIN" = 1 ]; then
		CPUS=$(taskset -pc $$ | sed 's/.*: //' | tr ',' ' ')
		n=$(echo $CPUS | wc -w) WP=()
		for c in $CPUS; do
			/usr/bin/time -f "%U %S" -o "$W/time.$c" taskset -c "$c" \
				wrk -t"$THREADS" -c$((CONNS / n)) -d"$DUR" "${HDR[@]}" "$URL" >"$W/wrk.$c" 2>&1 & WP+=($!)
		done
		wait "${WP[@]}"
		cat "$W"/wrk.* | awk '/requests in/ {r += $1} /Requests\/sec/ {s += $2}
			END {printf "%d requests in\nRequests/sec: %f\n", r, s}' >"$W/wrk"
		cat "$W"/time.* | awk '{u += $1; s += $2} END {print u, s}' >"$W/time"
		rm -f "$W"/wrk.* "$W"/time.*
	else
		/usr/bin/time -f "%U %S" -o "$W/time" wrk -t"$THREADS" -c"$CONNS" -d"$DUR" "${HDR[@]}" "$URL" >"$W/wrk" 2>&1
	fi
	if [ -n "${SP:-}" ]; then wait $SP; SP=""; fi
	p1=$(ticks $PP) u1=$(uticks $PP) o1=$(ticks $OP) v1=$(sleeps $PP) i1=$(idle)
	req=$(awk '/requests in/ {print $1}' "$W/wrk")
	rps=$(awk '/Requests\/sec/ {print $2}' "$W/wrk")
	read -r wu ws <"$W/time"
	echo "$p $req $rps $((p1 - p0)) $((u1 - u0)) $((o1 - o0)) $wu $ws $((v1 - v0)) $((i1 - i0))" >>"$W/runs"
}

# the summary line of <name>: its runs of every round pooled (requests/s
# their mean), as a ratio to the floor's CPU per request <2> when given
report() {
	awk -v n=$1 -v hz="$hz" -v fl="${2:-}" -v dur="$DUR" -v ncpu="$(nproc)" '$1 == n {
		r += $2; rps += $3; p += $4; u += $5; o += $6; wu += $7; ws += $8; v += $9; i += $10; k++ }
	END {
		t = 1e6 / hz / r; w = (wu + ws) * 1e6 / r
		printf "%-8s rps=%.0f us/req proxy=%.2f (user %.2f) wrk=%.2f origin=%.2f sum=%.2f",
			n, rps / k, p * t, u * t, w, o * t, p * t + w + o * t
		if (fl != "") printf " x floor=%.2f", p * t / fl
		printf "\n%-8s sleeps/req=%.3f idle=%.2f\n", "", v / r, i / (hz * dur * ncpu * k) }' "$W/runs"
}

: >"$W/runs"
for r in $(seq 1 "$ROUNDS"); do
	[ "$ROUNDS" -gt 1 ] && : >"$W/round"
	for p in "${NAMES[@]}"; do
		measure $p
		[ "$ROUNDS" -gt 1 ] && tail -1 "$W/runs" >>"$W/round"
	done
	if [ "$ROUNDS" -gt 1 ]; then
		# each round's figures alone, so a drift of the machine shows
		awk -v r=$r -v hz="$hz" '{ t = 1e6 / hz / $2; line = line sprintf(" %s=%.2f", $1, $4 * t)
			if ($1 == "floor") fl = $4 * t; if ($1 == "weir") we = $4 * t }
			END { printf "round %d us/req proxy:%s", r, line
			if (fl != "" && we != "") printf " (weir x floor=%.2f)", we / fl; printf "\n" }' "$W/round"
	fi
done
FLOOR=""
for p in "${NAMES[@]}"; do
	line=$(report $p "$FLOOR")
	echo "$line"
	[ "$p" = weir ] && [ -s "$W/conns" ] && echo "         conns:$(cat "$W/conns")"
	[ "$p" = floor ] && FLOOR=$(echo "$line" | sed -n 's/.*proxy=\([0-9.]*\).*/\1/p')
done
# weir against the better peer, as issue 18's targets are put: CPU per
# request over the lower of the peers', requests/s over the higher
awk '$1 ~ /^(weir|nginx|haproxy)$/ { r[$1] += $2; rps[$1] += $3; p[$1] += $4; k[$1]++ }
	END {
		if (!k["weir"]) exit
		for (n in k) if (n != "weir") {
			c = p[n] / r[n]; q = rps[n] / k[n]
			if (bc == "" || c < bc) { bc = c; bcn = n }
			if (bq == "" || q > bq) { bq = q; bqn = n }
		}
		if (bc == "") exit
		printf "weir/better peer: cpu=%.2f (%s) rps=%.2f (%s)\n", p["weir"] / r["weir"] / bc, bcn,
			rps["weir"] / k["weir"] / bq, bqn }' "$W/runs"
