#!/usr/bin/env python3
"""conns.py: N idle keep-alive clients held by one worker, and what 64 active
connections get meanwhile; weir, nginx and HAProxy side by side.

    tests/bench/conns.py [N] [--duration S] [--only weir,nginx,haproxy] [--per-worker M]
    (make conns100k: N = 100000; root; loopback only; about 6 minutes)

One nginx origin answers "hello from origin" (as cpusplit.sh). Each proxy
runs as two like instances, A and B, each with W workers (weir: a master
and W workers; nginx: a master and W worker processes; HAProxy: W
processes of one thread on one port, see PER_WORKER below), idle timeout
raised to 10 minutes. For each proxy in turn:

  1. B's workers' RSS and Pss (/proc/PID/smaps_rollup) and, for weir, the
     slab gauge weir_slab_bytes_in_use (after a 5,000 crowd opened and
     closed the same way, so the buffers the opening's requests in flight
     take, which every proxy keeps for reuse, are in the baseline)
  2. build/bench/crowd (tests/bench/crowd.c) opens N connections to B from
     source addresses spread over 127.10.0.0 and up (the 4-tuple space of
     one source address would not suffice), each sends one request, reads
     its answer and sits idle
  3. memory again: (after - before) / N is the worker memory per idle client
  4. ROUNDS rounds of wrk -t1 -c64 -dS --latency on A (no crowd) and on B
     (the crowd connected), the order alternating, so the noise of a
     shared machine falls on both alike; medians compared
  5. the crowd's count of connections still open (none may have closed)

Limits: the open-files limit of this process (so of the proxies and the
client, which inherit it) is raised to 4N + 10000 (root raises the hard
limit); net.core.somaxconn and net.ipv4.tcp_max_syn_backlog are raised to
65535 for the run and restored after it, even on an error or ^C.
net.ipv4.ip_local_port_range is left alone: the crowd's source addresses
make it unnecessary, and widening it would let ephemeral ports collide with
the fixed ports other tests on this machine listen on.
"""
import argparse
import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

from benchlib import wait_port, write

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ORIGIN, WEIR, NGINX, HAPROXY, STATS = 19210, 19211, 19212, 19213, 19214  # B: +100
ROUNDS = 5
SYSCTLS = {"net.core.somaxconn": 65535, "net.ipv4.tcp_max_syn_backlog": 65535}


def sysctl_path(name):
    return "/proc/sys/" + name.replace(".", "/")


def sysctl_get(name):
    with open(sysctl_path(name)) as f:
        return f.read().strip()


def sysctl_set(name, value):
    with open(sysctl_path(name), "w") as f:
        f.write(str(value))


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except FileNotFoundError:
        return []


def mem_kb(pid):
    """(RSS, Pss) of <pid> in kB."""
    rss = pss = 0
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Rss:"):
                rss = int(line.split()[1])
            elif line.startswith("Pss:"):
                pss = int(line.split()[1])
    return rss, pss


def fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def slab_in_use():
    """The gauge of instance B, the one the crowd is on."""
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{STATS + 100}/metrics", timeout=5).read().decode()
    except OSError:
        return None
    m = re.search(r"^weir_slab_bytes_in_use(?:\{[^}]*\})? (\d+)", text, re.M)
    return int(m.group(1)) if m else None


# the hard open-files limit here is 20000 and cannot be raised (no
# CAP_SYS_RESOURCE): no one process holds 100,000 sockets, so the proxies
# run one worker per PER_WORKER clients and the crowd one process per
# PER_CLIENT. HAProxy refuses a maxconn above (limit - 14) / 2 (a client
# and a server socket each), hence 8500 (12 workers for 100,000).
PER_WORKER = 8500
PER_CLIENT = 15000

UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3}


def wrk(port, duration):
    """(requests/s, p99 in ms, errors line or "") of one wrk -t1 -c64 run."""
    out = subprocess.run(["wrk", "-t1", "-c64", f"-d{duration}", "--latency", f"http://127.0.0.1:{port}/"],
                         capture_output=True, text=True, timeout=duration + 30).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    m = re.search(r"^\s+99%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
    p99 = float(m.group(1)) * UNITS[m.group(2)]
    errs = re.search(r"Socket errors:.*|Non-2xx.*", out)
    return rps, p99, errs.group(0) if errs else ""


class Crowd:
    """N idle clients in processes of at most PER_CLIENT connections each
    (the open-files limit is per process), process k on source addresses
    127.(10+k).0.1 and up."""

    def __init__(self, port, n):
        k = -(-n // PER_CLIENT)
        self.ps = []
        for i in range(k):
            m = n // k + (1 if i < n % k else 0)
            self.ps.append(subprocess.Popen(
                [os.path.join(ROOT, "build/bench/crowd"), "-p", str(port), "-n", str(m),
                 "-s", f"127.{10 + i}.0.1", "-a", "1024", "-b", str(max(50, 500 // k)), "-w", "180"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
        self.readies = [p.stdout.readline().strip() for p in self.ps]
        self.ready = "ok=%d failed=%d first_error=%s" % (
            self._sum(self.readies, "ok"), self._sum(self.readies, "failed"),
            ",".join(sorted({re.search(r"first_error=(\S+)", r).group(1) for r in self.readies if r})))

    @staticmethod
    def _sum(lines, key):
        return sum(int(re.search(key + r"=(\d+)", l).group(1)) for l in lines if key + "=" in l)

    def ok(self):
        return self._sum(self.readies, "ok")

    def status(self):
        lines = []
        for p in self.ps:
            p.stdin.write("status\n")
            p.stdin.flush()
            lines.append(p.stdout.readline().strip())
        return "open=%d closed=%d" % (self._sum(lines, "open"), self._sum(lines, "closed"))

    def close(self):
        for p in self.ps:
            p.stdin.close()
        for p in self.ps:
            p.wait(timeout=60)


def mem_all(pids):
    rss = pss = nfd = 0
    for pid in pids:
        r, p = mem_kb(pid)
        rss, pss, nfd = rss + r, pss + p, nfd + fds(pid)
    return rss, pss, nfd


def median(xs):
    xs = sorted(xs)
    return (xs[(len(xs) - 1) // 2] + xs[len(xs) // 2]) / 2


def start_all(cmds, log):
    return [subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True) for cmd in cmds]


def run_proxy(name, make, n, duration, W):
    """<make>(port, stats port, tag) gives (commands, workers of the pids)."""
    log = open(os.path.join(W, f"{name}.out"), "w")
    cmds_a, _ = make(0, "a")
    cmds_b, workers_of = make(100, "b")
    pa, pb = start_all(cmds_a, log), start_all(cmds_b, log)
    port = {"weir": WEIR, "nginx": NGINX, "haproxy": HAPROXY}[name]
    try:
        wait_port(port)
        wait_port(port + 100)
        time.sleep(1)
        workers = workers_of([p.pid for p in pb])
        for q in (port, port + 100):
            wrk(q, 1)  # warm-up: pools, upstream connections, lazy allocations
        Crowd(port + 100, min(n, 5000)).close()
        time.sleep(1)
        before, slab0 = mem_all(workers), slab_in_use() if name == "weir" else None
        t0 = time.time()
        crowd = Crowd(port + 100, n)
        opened = time.time() - t0
        time.sleep(2)
        after, slab1 = mem_all(workers), slab_in_use() if name == "weir" else None
        runs = {"base": [], "crowd": []}
        for r in range(ROUNDS):
            order = [("base", port), ("crowd", port + 100)]
            for tag, q in order if r % 2 == 0 else order[::-1]:
                runs[tag].append(wrk(q, duration))
        status = crowd.status()
        crowd.close()
        ok = crowd.ok()
        per = lambda a, b: (b - a) * 1024 / max(ok, 1)
        r = {
            "name": name, "ok": ok, "ready": crowd.ready, "status": status, "open_secs": opened,
            "rss": per(before[0], after[0]), "pss": per(before[1], after[1]),
            "slab": (slab1 - slab0) / max(ok, 1) if slab0 is not None and slab1 is not None else None,
            "runs": runs, "workers": len(workers),
            "b_rps": median(x[0] for x in runs["base"]), "l_rps": median(x[0] for x in runs["crowd"]),
            "b_p99": median(x[1] for x in runs["base"]), "l_p99": median(x[1] for x in runs["crowd"]),
        }
        print(f"{name}: {len(workers)} workers; crowd {crowd.ready}; {status}; opened in {opened:.1f}s")
        print(f"{name}:   B's workers: RSS {before[0]} -> {after[0]} kB, Pss {before[1]} -> {after[1]} kB, "
              f"fds {before[2]} -> {after[2]}" + (f", slab in use {slab0} -> {slab1}" if slab0 is not None else ""))
        for tag in ("base", "crowd"):
            print(f"{name}:   wrk {tag:5} rps " + " ".join(f"{x[0]:.0f}" for x in runs[tag]) +
                  "; p99 ms " + " ".join(f"{x[1]:.2f}" for x in runs[tag]) +
                  "".join(f"; {x[2]}" for x in runs[tag] if x[2]))
        sys.stdout.flush()
        return r
    finally:
        for p in pa + pb:
            p.terminate()
        for p in pa + pb:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        log.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("n", nargs="?", type=int, default=100000)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--only", default="weir,nginx,haproxy")
    ap.add_argument("--per-worker", type=int, default=PER_WORKER,
                    help="clients per worker (19000 fits one weir or nginx worker here; HAProxy refuses)")
    a = ap.parse_args()
    n = a.n
    if os.geteuid() != 0:
        raise SystemExit("conns.py: run as root (limits and sysctls)")
    for t in ("nginx", "haproxy", "wrk"):
        if subprocess.run(["sh", "-c", f"command -v {t}"], capture_output=True).returncode:
            raise SystemExit(f"conns.py: needs {t}")
    subprocess.run(["make", "-s", "-C", ROOT, "build/weir"], check=True)
    os.makedirs(os.path.join(ROOT, "build/bench"), exist_ok=True)
    subprocess.run(["cc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", os.path.join(ROOT, "build/bench/crowd"),
                    os.path.join(ROOT, "tests/bench/crowd.c")], check=True)
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if hard != resource.RLIM_INFINITY and hard < max(PER_WORKER, PER_CLIENT) + 3000:
        raise SystemExit(f"conns.py: the open-files hard limit is {hard}: lower PER_WORKER and PER_CLIENT")

    W = tempfile.mkdtemp(prefix="weir-conns.")
    saved = {k: sysctl_get(k) for k in SYSCTLS}
    # a SIGTERM runs the finally below like ^C does
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    origin = None
    results = []
    try:
        for k, v in SYSCTLS.items():
            if int(saved[k]) < v:
                sysctl_set(k, v)
        origin = subprocess.Popen(["nginx", "-c", write(W, "origin.conf", f"""
worker_processes 1; daemon off; master_process off; error_log {W}/origin.err; pid {W}/origin.pid;
events {{ worker_connections 8192; }}
http {{ access_log off; keepalive_requests 100000000;
  server {{ listen 127.0.0.1:{ORIGIN} backlog=4096; location / {{ return 200 "hello from origin\\n"; }} }} }}
""")], start_new_session=True)
        wait_port(ORIGIN)
        nw = -(-n // a.per_worker)
        conns = n // nw + 2000

        def make(off, tag):
            if name == "weir":
                return [[os.path.join(ROOT, "build/weir"), "-c", write(W, f"weir-{tag}.conf", f"""
workers = {nw};
log = {{ error = "{W}/weir-{tag}.err"; access = "off"; level = "notice"; }};
stats = {{ listen = "127.0.0.1:{STATS + off}"; }};
listeners = ( {{ address = "127.0.0.1:{WEIR + off}"; backlog = 65535; }} );
upstreams = ( {{ name = "o"; keepalive = 64; servers = ( {{ address = "127.0.0.1:{ORIGIN}"; }} ); }} );
routes = ( {{ path = "/"; upstream = "o"; }} );
limits = {{ connections = {conns}; }};
timeouts = {{ client_keepalive = "10m"; }};
""")]], lambda pids: children(pids[0])
            if name == "nginx":
                return [["nginx", "-c", write(W, f"nginx-{tag}.conf", f"""
worker_processes {nw}; daemon off; error_log {W}/nginx-{tag}.err; pid {W}/nginx-{tag}.pid;
worker_rlimit_nofile {hard};
events {{ worker_connections {min(2 * conns, hard - 64)}; }}
http {{ access_log off; keepalive_requests 100000000; keepalive_timeout 600s;
  upstream o {{ server 127.0.0.1:{ORIGIN}; keepalive 64; keepalive_requests 100000000; }}
  server {{ listen 127.0.0.1:{NGINX + off} backlog=65535 reuseport;
    location / {{ proxy_pass http://o; proxy_http_version 1.1; proxy_set_header Connection ""; }} }} }}
""")]], lambda pids: children(pids[0])
            # HAProxy 2.6 has threads, not processes: nw instances on one
            # port (it binds with SO_REUSEPORT), one thread each
            return [["haproxy", "-db", "-f", write(W, f"haproxy-{tag}.cfg", f"""
global
  nbthread 1
  maxconn {min(conns, (hard - 100) // 2)}
defaults
  mode http
  maxconn {min(conns, (hard - 100) // 2)}
  timeout connect 5s
  timeout client 600s
  timeout http-keep-alive 600s
  timeout server 30s
  option http-keep-alive
frontend fe
  bind 127.0.0.1:{HAPROXY + off} backlog 65535
  default_backend be
backend be
  http-reuse always
  server s1 127.0.0.1:{ORIGIN}
""")]] * nw, lambda pids: pids

        for name in a.only.split(","):
            results.append(run_proxy(name, make, n, a.duration, W))
    finally:
        if origin:
            origin.terminate()
            origin.wait(timeout=10)
        for k, v in saved.items():
            sysctl_set(k, v)
    print(f"\n{n} idle keep-alive clients, {nw} workers each; medians of {ROUNDS} rounds of wrk -t1 -c64 "
          f"-d{a.duration}s on an instance without (base) and one with the crowd; load average "
          + " ".join(f"{x:.1f}" for x in os.getloadavg()))
    print(f"{'proxy':8} {'idle held':>13} {'RSS B/conn':>10} {'Pss B/conn':>10} {'slab B/conn':>11} "
          f"{'rps base':>9} {'rps crowd':>9} {'d%':>6} {'p99 base':>9} {'p99 crowd':>9} {'d%':>6}")
    for r in results:
        held = int(re.search(r"open=(\d+)", r["status"]).group(1))
        slab = f"{r['slab']:.0f}" if r["slab"] is not None else "-"
        print(f"{r['name']:8} {held:>6}/{n:<6} {r['rss']:>10.0f} {r['pss']:>10.0f} {slab:>11} "
              f"{r['b_rps']:>9.0f} {r['l_rps']:>9.0f} {100 * (r['l_rps'] / r['b_rps'] - 1):>+6.1f} "
              f"{r['b_p99']:>8.2f}ms {r['l_p99']:>8.2f}ms {100 * (r['l_p99'] / r['b_p99'] - 1):>+6.1f}")
    print(f"(details in {W})")


if __name__ == "__main__":
    main()
