#!/usr/bin/env python3
"""idle.py: worker memory per idle keep-alive client, weir against nginx.

Starts an nginx origin, then each proxy in turn with one worker, opens N
client connections that each send one request, read the answer and then sit
idle, and prints the serving process's RSS growth per connection:

    tests/bench/idle.py [N]      (default 10000; loopback only, bounded)
"""
import os, resource, selectors, socket, subprocess, sys, tempfile, time

import benchlib
from benchlib import rss_kb, wait_port

N = int(sys.argv[1]) if len(sys.argv) > 1 else 10000
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
W = tempfile.mkdtemp(prefix="weir-idle.")
ORIGIN, WEIR, NGINX = 19110, 19111, 19112

resource.setrlimit(resource.RLIMIT_NOFILE, (resource.getrlimit(resource.RLIMIT_NOFILE)[1],) * 2)


def write(name, text):
    return benchlib.write(W, name, text)


def open_idle(port, n, batch=200):
    """n connections, one request each, answers read, left open; opened
    <batch> at a time, so what is measured is what an idle connection
    holds, not the peak of n requests in flight at once."""
    socks, done = [], 0
    while done < n:
        s, d = open_batch(port, min(batch, n - done))
        socks += s
        done += d
        if d == 0:
            break
    return socks, done


def open_batch(port, n):
    sel = selectors.DefaultSelector()
    socks, done = [], 0
    req = b"GET / HTTP/1.1\r\nHost: idle\r\n\r\n"
    for _ in range(n):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        sel.register(s, selectors.EVENT_WRITE, [b""])
        socks.append(s)
    end = time.time() + 60
    while done < n and time.time() < end:
        for key, ev in sel.select(timeout=1):
            s, buf = key.fileobj, key.data
            if ev & selectors.EVENT_WRITE:
                s.send(req)
                sel.modify(s, selectors.EVENT_READ, buf)
                continue
            chunk = s.recv(65536)
            buf[0] += chunk
            if not chunk or buf[0].endswith(b"hello from origin\n"):
                sel.unregister(s)
                done += 1
    return socks, done


def measure(name, cmd, port, pidfn):
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port)
        pid = pidfn(p.pid)
        warm, _ = open_idle(port, 100)  # let lazy start-up allocations happen
        before = rss_kb(pid)
        socks, ok = open_idle(port, N)
        time.sleep(0.5)
        after = rss_kb(pid)
        for s in socks + warm:
            s.close()
        per = (after - before) * 1024 / max(ok, 1)
        print(f"{name}: {ok}/{N} idle clients, RSS {before} kB -> {after} kB, {per:.0f} bytes per connection")
        return per
    finally:
        p.terminate()
        p.wait(timeout=10)


origin = subprocess.Popen(["nginx", "-c", write("origin.conf", f"""
worker_processes 1; daemon off; master_process off; error_log {W}/o.err; pid {W}/o.pid;
events {{ worker_connections 4096; }}
http {{ access_log off; server {{ listen 127.0.0.1:{ORIGIN}; location / {{ return 200 "hello from origin\\n"; }} }} }}
""")])
try:
    wait_port(ORIGIN)
    weir = measure("weir", [os.path.join(ROOT, "build/weir"), "-c", write("weir.conf", f"""
workers = 1; master_process = false;
log = {{ error = "{W}/weir.err"; access = "off"; level = "notice"; }};
listeners = ( {{ address = "127.0.0.1:{WEIR}"; backlog = 4096; }} );
upstreams = ( {{ name = "o"; keepalive = 64; servers = ( {{ address = "127.0.0.1:{ORIGIN}"; }} ); }} );
routes = ( {{ path = "/"; upstream = "o"; }} );
limits = {{ connections = {N + 1000}; }};
""")], WEIR, lambda pid: pid)
    nginx = measure("nginx", ["nginx", "-c", write("nginx.conf", f"""
worker_processes 1; daemon off; master_process off; error_log {W}/n.err; pid {W}/n.pid;
worker_rlimit_nofile {2 * N + 1000};
events {{ worker_connections {2 * N + 1000}; }}
http {{ access_log off;
  upstream o {{ server 127.0.0.1:{ORIGIN}; keepalive 64; }}
  server {{ listen 127.0.0.1:{NGINX} backlog=4096; keepalive_timeout 120s;
    location / {{ proxy_pass http://o; proxy_http_version 1.1; proxy_set_header Connection ""; }} }} }}
""")], NGINX, lambda pid: pid)
    print(f"idle_bytes_per_conn weir={weir:.0f} nginx={nginx:.0f} ratio={weir / nginx:.3f}")
finally:
    origin.terminate()
    origin.wait(timeout=10)
