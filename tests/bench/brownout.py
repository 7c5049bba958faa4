#!/usr/bin/python3
"""brownout.py: one of three servers starts answering 500 under load; how
many requests fail through weir, and how long until weir routes around it,
with the traffic controls of issue 13 and without, beside nginx (passive
max_fails, with and without retrying a 500 on the next server) and HAProxy
(observe layer7 marking a server down after 5 errors, with a health check).

    /usr/bin/python3 tests/bench/brownout.py [--seconds S] [--clients C]

Each setup runs S seconds (default 6, at most 20) of C keep-alive clients
(default 8) against the proxy (weir with 2 workers, nginx and HAProxy with
one process each, as many as this machine has cores for beside the
clients) in front of three tests/origin servers, on loopback. --only weir
(or nginx, haproxy) runs only those setups. At S/3 the path the clients ask for makes server B
answer 500 (tests/origin's /on/B/...). Printed per setup: requests, 5xx
seen by clients after the brown-out began, and the time from its start to
the last 5xx a client saw (how long weir took to route around it).
"""

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import harness  # noqa: E402

SETUPS = [
    ("weir", "max_fails only (the default)", ""),
    ("weir", "outlier consecutive_5xx = 5", 'outlier = { consecutive_5xx = 5; };'),
    ("weir", "outlier + retry on 500", 'outlier = { consecutive_5xx = 5; }; retry = { on = [ "500" ]; attempts = 2; };'),
    # nginx OSS: passive only; a 500 is a failure only when proxy_next_upstream names it
    ("nginx", "nginx max_fails=1 (default)", ""),
    ("nginx", "nginx max_fails=5 + next_upstream 500",
     "proxy_next_upstream error timeout http_500; proxy_next_upstream_tries 2;"),
    # HAProxy: errors observed on live traffic mark the server down; the
    # health check (on /, which B still answers) brings it back after rise
    ("haproxy", "haproxy observe layer7 + check", ""),
    ("haproxy", "haproxy observe layer7 + check + retry-on 500", "retry-on 500\n  retries 1\n  option redispatch 1"),
]


class Peer:
    """nginx or HAProxy in the foreground, in front of <origins>."""

    def __init__(self, tmp, kind, origins, extra):
        self.port = harness.free_port()
        self.kind = kind
        if kind == "nginx":
            fails = "max_fails=5 fail_timeout=30s" if extra else "max_fails=1 fail_timeout=10s"
            servers = "".join("server %s %s; " % (o.addr, fails) for o in origins)
            conf = os.path.join(tmp, "nginx.conf")
            with open(conf, "w") as f:
                f.write("worker_processes 1; daemon off; master_process off; error_log %s/nginx.err;"
                        " pid %s/nginx.pid; events { worker_connections 4096; }\n"
                        "http { access_log off; upstream g { %s keepalive 64; }\n"
                        " server { listen 127.0.0.1:%d; location / { proxy_pass http://g;"
                        " proxy_http_version 1.1; proxy_set_header Connection \"\"; %s } } }\n"
                        % (tmp, tmp, servers, self.port, extra))
            cmd = ["nginx", "-c", conf]
        else:
            conf = os.path.join(tmp, "haproxy.cfg")
            with open(conf, "w") as f:
                f.write("global\n  nbthread 1\n  maxconn 4000\ndefaults\n  mode http\n  timeout connect 5s\n"
                        "  timeout client 30s\n  timeout server 30s\n  option http-keep-alive\n"
                        "frontend fe\n  bind 127.0.0.1:%d\n  default_backend be\nbackend be\n"
                        "  option httpchk GET /\n  http-reuse always\n%s"
                        % (self.port, ("  " + extra + "\n") if extra else ""))
                for i, o in enumerate(origins):
                    f.write("  server s%d %s check inter 2s rise 2 fall 3 observe layer7 error-limit 5"
                            " on-error mark-down\n" % (i, o.addr))
            cmd = ["haproxy", "-db", "-f", conf]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("%s did not start" % kind)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)


def run(tmp, kind, raw, seconds, clients):
    origins = [harness.Origin(tmp, n).start() for n in ("A", "B", "C")]
    if kind == "weir":
        w = harness.Weir(tmp)
        w.write_config(upstreams=[{"name": "g", "servers": [o.addr for o in origins], "raw": raw}],
                       routes=[{"path": "/", "upstream": "g"}], workers=2, level="warn")
        with open(w.conf) as f:  # no access log: the clients are the measure
            text = f.read().replace('access = "%s/access.log"' % w.dir, 'access = "off"')
        w.write_raw_config(text)
        w.start()
    else:
        w = Peer(tmp, kind, origins, raw)
    start = time.monotonic()
    brown = start + seconds / 3.0
    end = start + seconds
    lock = threading.Lock()
    stats = {"requests": 0, "failed": 0, "last_fail": None}

    def client():
        c = harness.Client(w.port, timeout=5)
        try:
            while True:
                now = time.monotonic()
                if now >= end:
                    return
                target = "/on/B/status/500" if now >= brown else "/on/none/status/500"
                r = c.request("GET", target)
                with lock:
                    stats["requests"] += 1
                    if r.status >= 500 and now >= brown:
                        stats["failed"] += 1
                        stats["last_fail"] = now
                if r.get("Connection") == "close":
                    c.close()
                    c = harness.Client(w.port, timeout=5)
        finally:
            c.close()

    ts = [threading.Thread(target=client) for _ in range(clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(seconds + 10)
    w.stop()
    for o in origins:
        o.stop()
    lf = stats["last_fail"]
    return stats["requests"], stats["failed"], (lf - brown) if lf else 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--only", default="weir,nginx,haproxy")
    a = ap.parse_args()
    seconds = min(a.seconds, 20.0)
    for kind, name, raw in SETUPS:
        if kind not in a.only.split(","):
            continue
        with tempfile.TemporaryDirectory() as tmp:
            n, failed, took = run(tmp, kind, raw, seconds, a.clients)
        print("%-46s requests=%d failed_after_brownout=%d routed_around_after=%.3fs%s" % (
            name, n, failed, took, " (never: failing to the end)" if failed and took > seconds * 2 / 3 - 0.5 else ""))


if __name__ == "__main__":
    main()
