#!/usr/bin/env python3
"""ratelimit_load.py: full load on a rate-limited proxy from several
client addresses of 127.0.0.0/8, and how far each address's admitted count
is from the exact bound burst + rate x t (tests/bench/ratelimit.sh).

Each address has 2 keep-alive connections with one request always
outstanding, for --seconds; t is measured per address from its first
request sent to its last answer. A proxy that counts per process
admits up to workers x the bound; one that resets or approximates drifts.
"""

import argparse
import re
import socket
import threading
import time


def run(port, src, end, out):
    req = b"GET / HTTP/1.1\r\nHost: b\r\n\r\n"
    s, buf = None, b""
    while time.monotonic() < end:
        try:
            if s is None:
                s = socket.socket()
                s.settimeout(10)
                s.bind((src, 0))
                s.connect(("127.0.0.1", port))
                buf = b""
            sent = time.monotonic()
            s.sendall(req)
            while b"\r\n\r\n" not in buf:
                b = s.recv(65536)
                if not b:
                    raise ConnectionResetError()
                buf += b
            head, _, buf = buf.partition(b"\r\n\r\n")
            m = re.search(rb"(?i)\r\ncontent-length: *(\d+)", head)
            n = int(m.group(1)) if m else 0
            while len(buf) < n:
                b = s.recv(65536)
                if not b:
                    raise ConnectionResetError()
                buf += b
            buf = buf[n:]
            out.append((sent, time.monotonic(), int(head.split(b" ", 2)[1])))
            if re.search(rb"(?i)\r\nconnection: *close", head):
                s.close()
                s = None
        except OSError:
            if s:
                s.close()
            s = None
            time.sleep(0.002)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--name", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--rate", type=float, required=True)
    ap.add_argument("--burst", type=int, required=True)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--addrs", type=int, default=8)
    a = ap.parse_args()
    end = time.monotonic() + a.seconds
    res = {}
    threads = []
    for i in range(a.addrs):
        src = "127.0.%d.%d" % (10 + i, 1 + i)
        res[src] = []
        for _ in range(2):
            t = threading.Thread(target=run, args=(a.port, src, end, res[src]), daemon=True)
            t.start()
            threads.append(t)
    for t in threads:
        t.join(a.seconds + 15)
    tot_ok = tot_bound = 0
    worst = 0.0
    other = 0
    for src, r in res.items():
        ok = [x for x in r if x[2] == 200]
        other += sum(1 for x in r if x[2] not in (200, 429, 503))
        if not ok:
            continue
        span = max(x[1] for x in r) - min(x[0] for x in r)
        bound = a.burst + a.rate * span
        tot_ok += len(ok)
        tot_bound += bound
        worst = max(worst, abs(len(ok) - bound))
    asked = sum(len(r) for r in res.values())
    print("peer=%s asked=%d admitted=%d exact_bound=%.0f off=%+.0f (%+.1f%%) worst_address_off=%.0f%s"
          % (a.name, asked, tot_ok, tot_bound, tot_ok - tot_bound, 100.0 * (tot_ok - tot_bound) / max(tot_bound, 1),
             worst, " other_statuses=%d" % other if other else ""))


if __name__ == "__main__":
    main()
