#!/usr/bin/env python3
"""inflight.py: worker memory per request in flight, weir against nginx.

Starts a slow origin (it reads requests and answers none until the end),
then each proxy in turn with one worker, sends N requests on N client
connections that all stay waiting on that origin, and prints the serving
process's RSS growth per request in flight, and for weir also its slab
bytes in use per request (weir_slab_bytes_in_use):

    tests/bench/inflight.py [N]   (default 10000, or what the open-files
                                   hard limit allows: a proxy holds two
                                   descriptors per request; loopback only)

WEIR_BIN names another weir binary (default build/weir).
"""
import os, resource, selectors, socket, subprocess, sys, tempfile, time, urllib.request

import benchlib
from benchlib import rss_kb, wait_port

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
W = tempfile.mkdtemp(prefix="weir-inflight.")
ORIGIN, WEIR, NGINX, STATS = 19120, 19121, 19122, 19123

HARD = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
resource.setrlimit(resource.RLIMIT_NOFILE, (HARD, HARD))


def slow_origin(port, count_file):
    """Accepts, reads each request head, answers nothing; writes how many
    heads it has read to <count_file> while that number changes."""
    sel = selectors.DefaultSelector()
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(4096)
    ls.setblocking(False)
    sel.register(ls, selectors.EVENT_READ)
    seen, written, conns = 0, -1, []
    while True:
        for key, _ in sel.select(timeout=0.2):
            if key.fileobj is ls:
                while True:
                    try:
                        s, _ = ls.accept()
                    except BlockingIOError:
                        break
                    s.setblocking(False)
                    sel.register(s, selectors.EVENT_READ, [b""])
                    conns.append(s)
                continue
            s, buf = key.fileobj, key.data
            try:
                chunk = s.recv(65536)
            except OSError:
                chunk = b""
            if not chunk:
                sel.unregister(s)
                s.close()
                continue
            buf[0] += chunk
            while b"\r\n\r\n" in buf[0]:
                buf[0] = buf[0].split(b"\r\n\r\n", 1)[1]
                seen += 1
        if seen != written:
            with open(count_file + ".tmp", "w") as f:
                f.write(str(seen))
            os.rename(count_file + ".tmp", count_file)
            written = seen


if len(sys.argv) > 2 and sys.argv[1] == "--origin":
    slow_origin(int(sys.argv[2]), sys.argv[3])
    sys.exit(0)

N = int(sys.argv[1]) if len(sys.argv) > 1 else 10000
if 2 * N + 1000 > HARD:
    N = (HARD - 1000) // 2
    print(f"open-files hard limit {HARD}: {N} requests in flight at most", file=sys.stderr)


def write(name, text):
    return benchlib.write(W, name, text)


def origin_seen():
    try:
        with open(os.path.join(W, "count")) as f:
            return int(f.read() or 0)
    except (OSError, ValueError):
        return 0


def weir_slab():
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{STATS}/metrics", timeout=2) as r:
            text = r.read().decode("latin-1")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("weir_slab_bytes_in_use "):
            return float(line.split()[1])
    return None


def send_waiting(port, n, batch=500):
    """n connections, each with one request the origin will not answer."""
    socks = []
    req = b"GET /slow HTTP/1.1\r\nHost: inflight\r\n\r\n"
    target = origin_seen() + n
    while len(socks) < n:
        for _ in range(min(batch, n - len(socks))):
            s = socket.socket()
            try:
                s.connect(("127.0.0.1", port))
                s.sendall(req)
            except OSError as e:
                print(f"connection {len(socks)}: {e}", file=sys.stderr)
                s.close()
                return socks
            socks.append(s)
        time.sleep(0.05)
    end = time.time() + 20
    while origin_seen() < target and time.time() < end:
        time.sleep(0.2)
    if origin_seen() < target:
        print(f"the origin saw {n - (target - origin_seen())} of {n} requests", file=sys.stderr)
    return socks


def measure(name, cmd, port, slab=None):
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port)
        pid = p.pid
        warm = send_waiting(port, 200)  # let lazy start-up allocations happen
        for s in warm:
            s.close()
        time.sleep(1.5)
        before, slab0 = rss_kb(pid), slab() if slab else None
        start = origin_seen()
        socks = send_waiting(port, N)
        time.sleep(1.5)  # weir samples its slab gauge once a second
        after, slab1 = rss_kb(pid), slab() if slab else None
        ok = origin_seen() - start
        for s in socks:
            s.close()
        per = (after - before) * 1024 / max(ok, 1)
        extra = ""
        if slab0 is not None and slab1 is not None:
            extra = f", slab {(slab1 - slab0) / max(ok, 1):.0f} bytes per request"
        print(f"{name}: {ok}/{N} requests in flight, RSS {before} kB -> {after} kB, "
              f"{per:.0f} bytes per request{extra}")
        return per
    finally:
        p.terminate()
        p.wait(timeout=10)


origin = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--origin", str(ORIGIN),
                           os.path.join(W, "count")])
try:
    wait_port(ORIGIN)
    weir = measure("weir", [os.environ.get("WEIR_BIN") or os.path.join(ROOT, "build/weir"), "-c", write("weir.conf", f"""
workers = 1; master_process = false;
stats = {{ listen = "127.0.0.1:{STATS}"; }};
log = {{ error = "{W}/weir.err"; access = "off"; level = "notice"; }};
listeners = ( {{ address = "127.0.0.1:{WEIR}"; backlog = 4096; }} );
upstreams = ( {{ name = "o"; keepalive = 64; servers = ( {{ address = "127.0.0.1:{ORIGIN}"; }} ); }} );
routes = ( {{ path = "/"; upstream = "o"; }} );
limits = {{ connections = {N + 500}; }};
timeouts = {{ upstream_read = "5m"; }};
""")], WEIR, slab=weir_slab)
    nginx = measure("nginx", ["nginx", "-c", write("nginx.conf", f"""
worker_processes 1; daemon off; master_process off; error_log {W}/n.err; pid {W}/n.pid;
worker_rlimit_nofile {HARD};
events {{ worker_connections {2 * N + 1000}; }}
http {{ access_log off;
  upstream o {{ server 127.0.0.1:{ORIGIN}; keepalive 64; }}
  server {{ listen 127.0.0.1:{NGINX} backlog=4096; keepalive_timeout 120s;
    location / {{ proxy_pass http://o; proxy_http_version 1.1; proxy_set_header Connection "";
                 proxy_read_timeout 300s; }} }} }}
""")], NGINX)
    print(f"inflight_bytes_per_req weir={weir:.0f} nginx={nginx:.0f} ratio={weir / nginx:.3f}")
finally:
    origin.terminate()
    origin.wait(timeout=10)
