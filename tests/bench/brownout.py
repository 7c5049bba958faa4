#!/usr/bin/python3
"""brownout.py: one of three servers starts answering 500 under load; how
many requests fail through weir, and how long until weir routes around it,
with the traffic controls of issue 13 and without.

    /usr/bin/python3 tests/bench/brownout.py [--seconds S] [--clients C]

Each setup runs S seconds (default 6, at most 20) of C keep-alive clients
(default 8) against weir (2 workers) in front of three tests/origin
servers, on loopback. At S/3 the path the clients ask for makes server B
answer 500 (tests/origin's /on/B/...). Printed per setup: requests, 5xx
seen by clients after the brown-out began, and the time from its start to
the last 5xx a client saw (how long weir took to route around it).
"""

import argparse
import os
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import harness  # noqa: E402

SETUPS = [
    ("max_fails only (the default)", ""),
    ("outlier consecutive_5xx = 5", 'outlier = { consecutive_5xx = 5; };'),
    ("outlier + retry on 500", 'outlier = { consecutive_5xx = 5; }; retry = { on = [ "500" ]; attempts = 2; };'),
]


def run(tmp, raw, seconds, clients):
    origins = [harness.Origin(tmp, n).start() for n in ("A", "B", "C")]
    w = harness.Weir(tmp)
    w.write_config(upstreams=[{"name": "g", "servers": [o.addr for o in origins], "raw": raw}],
                   routes=[{"path": "/", "upstream": "g"}], workers=2, level="warn")
    with open(w.conf) as f:  # no access log: the clients are the measure
        text = f.read().replace('access = "%s/access.log"' % w.dir, 'access = "off"')
    w.write_raw_config(text)
    w.start()
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
    a = ap.parse_args()
    seconds = min(a.seconds, 20.0)
    for name, raw in SETUPS:
        with tempfile.TemporaryDirectory() as tmp:
            n, failed, took = run(tmp, raw, seconds, a.clients)
        print("%-32s requests=%d failed_after_brownout=%d routed_around_after=%.3fs%s" % (
            name, n, failed, took, " (never: failing to the end)" if failed and took > seconds * 2 / 3 - 0.5 else ""))


if __name__ == "__main__":
    main()
