"""Reloads and binary upgrades under HTTP/2 load (issue 12, item 7:
"graceful GOAWAY on drain and on reload, so clients move to the new
workers without losing a stream"): clients keep several streams open at
once and reconnect when a GOAWAY comes; every stream the old worker
accepted (at or below the GOAWAY's last stream id) is answered in full,
and one above it was never started, so the client sends it again.
h2load cannot show this (it does not reconnect after a GOAWAY), nor
python3-h2 alone (it refuses frames after one): h2util's past_goaway
client does."""

import signal
import socket
import threading
import time

from harness import fetch_metrics, slack, unread_by_server, wait_until
from h2util import PREFACE, H2Client
from test_upgrade import masters, private_binary, read_pid, start_weir  # noqa: F401 (fixtures)


class H2Load:
    """Four clients, five streams open at a time each, until stopped."""

    def __init__(self, port):
        self.port = port
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.tally = {"ok": 0, "again": 0, "lost": [], "goaways": 0, "after": 0}
        self.marks = []
        self.threads = [threading.Thread(target=self.client, args=(k,)) for k in range(4)]
        for t in self.threads:
            t.start()

    def mark(self):
        """An event (a signal sent): answers 0.3 s after it count as after."""
        self.marks.append(time.monotonic())

    def client(self, k):
        pending = []
        tally = self.tally
        while not self.stop.is_set():
            try:
                c = H2Client(self.port, past_goaway=True)
            except OSError:
                time.sleep(0.05)  # between an old master's close and a new one's accept
                continue
            try:
                while not self.stop.is_set() and c.goaway is None and not c.closed:
                    want = pending or ["/echo/slow/%d" % (20 + 10 * i) for i in range(5)]
                    pending = []
                    sids = {c.request(p): p for p in want}
                    got = c.wait(list(sids), timeout=10)
                    for sid, r in zip(sids, got):
                        done = r["ended"] and r["status"] == 200 and sids[sid].encode() in r["body"]
                        with self.lock:
                            if done:
                                tally["ok"] += 1
                                if self.marks and time.monotonic() > self.marks[-1] + 0.3:
                                    tally["after"] += 1
                            elif c.last_stream_id is not None and sid > c.last_stream_id and r["status"] is None:
                                tally["again"] += 1  # never started: sent again
                                pending.append(sids[sid])
                            else:
                                tally["lost"].append((k, sid, r, c.goaway, c.last_stream_id))
                if c.goaway is not None:
                    with self.lock:
                        tally["goaways"] += 1
            except OSError as e:
                with self.lock:  # an open connection reset: whatever was on it is lost
                    tally["lost"].append((k, "connection", repr(e)))
            finally:
                c.close()

    def end(self):
        self.stop.set()
        for t in self.threads:
            t.join(slack(20))
        return self.tally


def test_reloads_under_h2_load_lose_no_stream(weir_factory, origin):
    w = weir_factory(upstreams=[{"name": "a", "servers": [origin.addr]}], routes=[{"path": "/", "upstream": "a"}],
                     workers=2)
    load = H2Load(w.port)
    try:
        for _ in range(3):
            time.sleep(1.0)
            w.signal(signal.SIGHUP)
            load.mark()
        time.sleep(1.5)
    finally:
        tally = load.end()
    assert tally["lost"] == [], tally["lost"][:3]
    assert tally["goaways"] >= 4, tally  # the reloads reached the clients
    assert tally["ok"] > 100 and tally["after"] > 0, tally
    m = fetch_metrics(w.stats_port)
    assert m("weir_h2_goaways_total", code="NO_ERROR") >= 4
    wait_until(lambda: fetch_metrics(w.stats_port)("weir_h2_streams_active") == 0, slack(5), what="no stream left")


def test_a_binary_upgrade_under_h2_load_loses_no_stream(weir_factory, origin, masters, private_binary):  # noqa: F811
    w = start_weir(weir_factory, origin)
    old_pid = w.pid
    load = H2Load(w.port)
    try:
        time.sleep(1.0)
        w.signal(signal.SIGUSR2)
        load.mark()
        new_pid = wait_until(lambda: (lambda p: p if p and p != old_pid else None)(read_pid(w.pid_file)),
                             slack(10), what="new pid file")
        masters.append(new_pid)
        assert w.wait_exit(15) == 0  # the old master drained its HTTP/2 clients and left
        time.sleep(1.0)
    finally:
        tally = load.end()
    assert tally["lost"] == [], tally["lost"][:3]
    assert tally["goaways"] >= 1, tally
    assert tally["ok"] > 50 and tally["after"] > 0, tally


def draining_lines(w):
    return sum(1 for line in w.error_lines() if "draining" in line and "connection(s)" in line)


def test_a_connection_whose_preface_comes_after_the_drain_gets_a_goaway(weir_factory, origin):
    """A connection a worker accepted before its drain, whose preface it
    reads only after: the drain found no session there to send a GOAWAY
    to, so the session sends its own at start. Without one the client
    would go on opening streams on the draining worker until
    timeouts.drain cut them unanswered."""
    w = weir_factory(upstreams=[{"name": "a", "servers": [origin.addr]}], routes=[{"path": "/", "upstream": "a"}],
                     workers=1, timeouts={"drain": "20s", "client_header": "20s"})
    sock = socket.create_connection(("127.0.0.1", w.port), timeout=slack(5))
    try:
        sock.sendall(PREFACE[:16])  # not an idle connection: the drain keeps it
        wait_until(lambda: unread_by_server(w.port, sock) == 0, slack(5), interval=0.001,
                   what="the first bytes read by the worker")
        before = draining_lines(w)
        w.signal(signal.SIGHUP)
        wait_until(lambda: draining_lines(w) > before, slack(10), interval=0.005, what="the old worker draining")
        c = H2Client(w.port, sock=sock, sent=16, past_goaway=True)
        sid = c.request("/echo/late")
        r = c.responses[sid]
        deadline = time.monotonic() + slack(3)
        while time.monotonic() < deadline and not c.closed and not (
                c.goaway is not None and (c.last_stream_id < sid or r["ended"] or r["reset"] is not None)):
            c.read_some(0.2)
        assert c.goaway == 0, (c.goaway, c.closed, r)  # NO_ERROR
        if c.last_stream_id >= sid:  # a stream taken before the GOAWAY is answered in full
            assert r["status"] == 200 and r["ended"] and b"/echo/late" in r["body"], r
        else:  # one above it was never started: the client may send it again
            assert r["status"] is None and r["reset"] is None, r
    finally:
        sock.close()
    m = fetch_metrics(w.stats_port)
    assert m("weir_h2_goaways_total", code="NO_ERROR") >= 1
