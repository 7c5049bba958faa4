"""Reloads under HTTP/2 load (issue 12, item 7: "graceful GOAWAY on drain
and on reload, so clients move to the new workers without losing a
stream"): clients keep several streams open at once and reconnect when a
GOAWAY comes; every stream the old worker accepted (at or below the
GOAWAY's last stream id) is answered in full, and one above it was never
started, so the client sends it again. h2load cannot show this (it does
not reconnect after a GOAWAY), nor python3-h2 alone (it refuses frames
after one): h2util's past_goaway client does."""

import signal
import threading
import time

from harness import fetch_metrics, slack, wait_until
from h2util import H2Client


def test_reloads_under_h2_load_lose_no_stream(weir_factory, origin):
    w = weir_factory(upstreams=[{"name": "a", "servers": [origin.addr]}], routes=[{"path": "/", "upstream": "a"}],
                     workers=2)
    stop = threading.Event()
    tally = {"ok": 0, "again": 0, "lost": [], "goaways": 0, "after": 0}
    lock = threading.Lock()
    reloaded_at = []

    def client(k):
        pending = []
        while not stop.is_set():
            c = H2Client(w.port, past_goaway=True)
            try:
                while not stop.is_set() and c.goaway is None and not c.closed:
                    want = pending or ["/echo/slow/%d" % (20 + 10 * i) for i in range(5)]
                    pending = []
                    sids = {c.request(p): p for p in want}
                    got = c.wait(list(sids), timeout=10)
                    for sid, r in zip(sids, got):
                        done = r["ended"] and r["status"] == 200 and sids[sid].encode() in r["body"]
                        with lock:
                            if done:
                                tally["ok"] += 1
                                if reloaded_at and time.monotonic() > reloaded_at[-1] + 0.3:
                                    tally["after"] += 1
                            elif c.last_stream_id is not None and sid > c.last_stream_id and r["status"] is None:
                                tally["again"] += 1  # never started: sent again
                                pending.append(sids[sid])
                            else:
                                tally["lost"].append((k, sid, r, c.goaway, c.last_stream_id))
                if c.goaway is not None:
                    with lock:
                        tally["goaways"] += 1
            finally:
                c.close()

    ts = [threading.Thread(target=client, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    try:
        for _ in range(3):
            time.sleep(1.0)
            w.signal(signal.SIGHUP)
            reloaded_at.append(time.monotonic())
        time.sleep(1.5)
    finally:
        stop.set()
        for t in ts:
            t.join(slack(20))
    assert tally["lost"] == [], tally["lost"][:3]
    assert tally["goaways"] >= 4, tally  # the reloads reached the clients
    assert tally["ok"] > 100 and tally["after"] > 0, tally
    m = fetch_metrics(w.stats_port)
    assert m("weir_h2_goaways_total", code="NO_ERROR") >= 4
    wait_until(lambda: fetch_metrics(w.stats_port)("weir_h2_streams_active") == 0, slack(5), what="no stream left")
