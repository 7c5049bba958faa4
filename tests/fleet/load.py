#!/usr/bin/python3
"""load.py: a bounded HTTP/1.1 load loop for the fleet test.

Run inside the client namespace (ip netns exec NS /usr/bin/python3 load.py).
CONNS threads each open a connection, send up to REUSE requests on it
(keep-alive, so a drain's `Connection: close` is exercised), then open a new
one, so new connections keep being spread by the balancer. Every request
must come back 200 with the /echo JSON of an origin; anything else (refused,
reset, timeout, short body, other status) is a failure, kept with its time.

--sources a,b,c connects from those addresses in turn (several clients).
--header adds a header to every request; with --allow-429 a 429 (a rate
limit's refusal) is counted in "limited" rather than as a failure.

--hold n1,n2,n3 adds one connection per named origin: the thread reconnects
until the balancer hands it to that origin, then keeps it, always with a
slow request (--hold-path) in flight, until the server closes it; so when
a node is drained it has a request in flight and a kept-alive connection.
The ready file is made once the held connections are there.

It stops when STOP_FILE appears or after --duration seconds (the bound), and
writes a JSON summary to --out: totals, failures, and per origin the number
of answers in each 100 ms slot of wall-clock time, so the test can tell which
node answered when, and the client addresses the nodes saw (the
X-Forwarded-For weir adds, as /echo shows it).

    load.py --host 10.99.100.1 --port 8080 --out res.json --stop-file stop
"""

import argparse
import json
import os
import socket
import threading
import time


def read_response(sock, buf):
    """One response from <sock> (bytearray <buf> holds what came early).
    Returns (status, headers dict, body bytes)."""
    while b"\r\n\r\n" not in buf:
        data = sock.recv(65536)
        if not data:
            raise EOFError("closed before a response head (%d bytes)" % len(buf))
        buf += data
    head, _, rest = bytes(buf).partition(b"\r\n\r\n")
    del buf[:len(head) + 4]
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    status = int(parts[1])
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    n = int(headers.get("content-length", "0"))
    while len(buf) < n:
        data = sock.recv(65536)
        if not data:
            raise EOFError("closed after %d of %d body bytes" % (len(buf), n))
        buf += data
    body = bytes(buf[:n])
    del buf[:n]
    return status, headers, body


class Loader:
    def __init__(self, a):
        self.a = a
        self.lock = threading.Lock()
        self.ok = 0
        self.failures = []
        self.slots = {}  # origin -> {slot: count}
        self.connections = 0
        self.closes_by_server = 0
        self.held = 0
        self.clients = set()  # the client addresses weir saw (X-Forwarded-For)
        self.next_source = 0
        self.limited = 0  # 429s, when --allow-429 makes them answers, not failures

    def stopped(self, deadline):
        return time.monotonic() >= deadline or os.path.exists(self.a.stop_file)

    def record(self, origin, client):
        slot = int(time.time() * 10)
        with self.lock:
            self.ok += 1
            self.clients.add(client)
            per = self.slots.setdefault(origin, {})
            per[slot] = per.get(slot, 0) + 1

    def fail(self, what):
        with self.lock:
            self.failures.append({"t": time.time(), "error": what})

    def request(self, sock, buf, req):
        """One request on <sock>: (origin or None, server closes)."""
        try:
            sock.sendall(req)
            status, headers, body = read_response(sock, buf)
        except (OSError, EOFError, ValueError, IndexError) as e:
            self.fail("%s: %s" % (type(e).__name__, e))
            return None, True
        closes = headers.get("connection", "").lower() == "close"
        if closes:
            with self.lock:
                self.closes_by_server += 1
        if status == 429 and self.a.allow_429:
            # a rate limit's refusal, under test: counted, the connection
            # goes on ("" is an answer that came from no origin)
            with self.lock:
                self.limited += 1
            return "", closes
        if status != 200:
            self.fail("status %d" % status)
            return None, closes
        try:
            echo = json.loads(body)
            origin = echo["origin"]
            xff = [v for n, v in echo["headers"] if n.lower() == "x-forwarded-for"]
        except (ValueError, KeyError, TypeError):
            self.fail("not an /echo answer: %r" % body[:80])
            return None, closes
        self.record(origin, xff[-1] if xff else "")
        return origin, closes

    def connect(self):
        src = None
        if self.a.sources:
            # several clients: each new connection from the next address
            with self.lock:
                self.next_source += 1
                src = (self.a.sources[self.next_source % len(self.a.sources)], 0)
        try:
            sock = socket.create_connection((self.a.host, self.a.port), timeout=self.a.timeout,
                                            source_address=src)
        except OSError as e:
            self.fail("connect: %s" % e)
            time.sleep(0.05)
            return None
        with self.lock:
            self.connections += 1
        return sock

    def req(self, path):
        extra = "".join("%s\r\n" % h for h in self.a.header)
        return ("GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: weir-fleet-load\r\n%s\r\n"
                % (path, self.a.host_header, extra)).encode()

    def thread(self, deadline):
        """New connections all along: REUSE requests each."""
        req = self.req(self.a.path)
        while not self.stopped(deadline):
            sock = self.connect()
            if sock is None:
                continue
            buf = bytearray()
            try:
                for _ in range(self.a.reuse):
                    if self.stopped(deadline):
                        break
                    origin, closes = self.request(sock, buf, req)
                    if origin is None or closes:
                        break
                    if self.a.pause:
                        time.sleep(self.a.pause)
            finally:
                sock.close()

    def hold(self, deadline, want):
        """One connection held on origin <want>, a slow request always in
        flight on it, until the server closes it (a drain); then the same
        on whatever node new connections reach."""
        fast, slow = self.req(self.a.path), self.req(self.a.hold_path)
        sock = None
        for _ in range(300):  # find <want> among the balancer's choices
            if self.stopped(deadline):
                break
            sock = self.connect()
            if sock is None:
                continue
            buf = bytearray()
            origin, closes = self.request(sock, buf, fast)
            if origin == want and not closes:
                break
            sock.close()
            sock = None
        if sock is None:
            self.fail("no connection reached origin %s" % want)
        with self.lock:
            self.held += 1
        while not self.stopped(deadline):
            if sock is None:
                sock = self.connect()
                buf = bytearray()
                if sock is None:
                    continue
            origin, closes = self.request(sock, buf, slow)
            if origin is None or closes:
                sock.close()
                sock = None
        if sock is not None:
            sock.close()

    def run(self):
        a = self.a
        start = time.time()
        deadline = time.monotonic() + a.duration
        threads = [threading.Thread(target=self.thread, args=(deadline,), daemon=True)
                   for _ in range(a.conns)]
        holds = [o for o in a.hold.split(",") if o]
        threads += [threading.Thread(target=self.hold, args=(deadline, o), daemon=True)
                    for o in holds]
        for t in threads:
            t.start()
        while self.held < len(holds) and not self.stopped(deadline):
            time.sleep(0.01)
        if a.ready_file:
            open(a.ready_file, "w").close()
        for t in threads:
            t.join(a.duration + 2 * a.timeout + 5)
        end = time.time()
        out = {
            "start": start, "end": end, "ok": self.ok,
            "failed": len(self.failures), "failures": self.failures[:50],
            "connections": self.connections, "closes_by_server": self.closes_by_server,
            "slots": {o: {str(k): v for k, v in s.items()} for o, s in self.slots.items()},
            "hit_deadline": time.monotonic() >= deadline,
            "clients": sorted(self.clients), "limited": self.limited,
        }
        tmp = a.out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(out, f)
        os.rename(tmp, a.out)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--host", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--host-header", default="fleet.test")
    p.add_argument("--path", default="/echo")
    p.add_argument("--conns", type=int, default=6)
    p.add_argument("--reuse", type=int, default=10)
    p.add_argument("--pause", type=float, default=0.002)
    p.add_argument("--timeout", type=float, default=3.0)
    p.add_argument("--duration", type=float, default=20.0)
    p.add_argument("--stop-file", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--ready-file", help="made once the held connections are there")
    p.add_argument("--hold", default="", help="origins to hold a connection on (n1,n2)")
    p.add_argument("--hold-path", default="/echo/slow/200")
    p.add_argument("--sources", type=lambda v: v.split(","), default=[],
                   help="client addresses to connect from, in turn (a,b,c)")
    p.add_argument("--header", action="append", default=[], help="'Name: value' on every request")
    p.add_argument("--allow-429", action="store_true",
                   help="a 429 is counted as limited, not as a failure (rate limit phases)")
    a = p.parse_args()
    Loader(a).run()


if __name__ == "__main__":
    main()
