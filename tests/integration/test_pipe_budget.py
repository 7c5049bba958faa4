"""Per-pipe byte budgets (limits.pipe_budget): a stream holds at most that
many body bytes read from one side and not yet written to the other, in
each direction, whatever the framing; spans it holds back are counted in
weir_pipe_budget_stalls_total{direction}. Bodies still arrive whole and
in order, and the connections stay in sync."""

import hashlib
import os
import subprocess
import sys

from harness import WEIR_BIN, Client, chunked, slack
from test_route_settings import weir_with_override

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "origin"))
from origin import text_body  # noqa: E402  the origin's own bytes


def sha(b):
    return hashlib.sha256(b).hexdigest()


def one(origin):
    return dict(upstreams=[{"name": "a", "servers": [origin.addr]}], routes=[{"path": "/", "upstream": "a"}])


def stalls(w, direction):
    return w.metrics().get("weir_pipe_budget_stalls_total", direction=direction)


def test_a_small_budget_moves_every_framing_whole_and_counts_its_stalls(weir_factory, origin):
    w = weir_factory(workers=1, limits={"pipe_budget": "1k", "body_buffer": 0}, **one(origin))
    with w.client() as c:
        # responses: Content-Length, chunked, until close
        r = c.request("GET", "/bytes/100000")
        assert r.status == 200 and r.body == b"x" * 100000
        down = stalls(w, "client")
        # 100000 bytes in spans of at most 1 KiB, read some 16 KiB at a
        # time: all but the last span of each read held the rest back
        assert down >= 100000 // 1024 // 2, down
        # chunks of 4 KiB, past the budget: each must be held back in part,
        # however the reads fall (chunks of 1000 bytes each in a read of
        # its own, as a busy machine reads them, never stalled)
        r = c.request("GET", "/text/50000?mode=chunked")
        assert r.status == 200 and r.body == text_body(50000)
        assert stalls(w, "client") > down
        # requests: Content-Length and chunked, streamed (body_buffer 0)
        data = os.urandom(60000)
        r = c.request("POST", "/upload", body=data)
        assert r.json() == {"body_len": len(data), "body_sha256": sha(data)}
        up = stalls(w, "upstream")
        assert up >= 60000 // 1024 // 2, up
        r = c.request("POST", "/upload", headers=[("Transfer-Encoding", "chunked")],
                      body=chunked(data, 7777, ""))
        assert r.json() == {"body_len": len(data), "body_sha256": sha(data)}
        assert stalls(w, "upstream") > up
        # the connection is still in sync
        assert c.request("GET", "/bytes/4").body == b"xxxx"
    with w.client() as c:
        r = c.request("GET", "/close/30000")
        assert r.body == b"x" * 30000


def test_the_default_budget_never_binds_over_http1(weir_factory, origin):
    """64k by default: one HTTP/1 input buffer is less, so nothing waits on
    it; a stream buffer's room for a head in front of its 64 KiB does not
    make it wait either (the second response's head is read into one,
    with up to 66 KiB of body behind it)."""
    w = weir_factory(workers=1, **one(origin))
    with w.client() as c:
        assert c.request("GET", "/bytes/300000").body == b"x" * 300000
        assert c.request("GET", "/bytes/300000").body == b"x" * 300000
        data = os.urandom(200000)
        assert c.request("POST", "/upload", body=data).json()["body_len"] == len(data)
    assert stalls(w, "client") == 0
    assert stalls(w, "upstream") == 0
    assert w.metrics().has("weir_pipe_budget_stalls_total", direction="client")


def test_a_route_sets_its_own_budget_and_bad_values_are_refused(weir_factory, origin):
    ups = [{"name": "a", "servers": [origin.addr]}]
    w = weir_with_override(weir_factory, ups, ("big.test", "small.test"), "small.test",
                           'limits = { pipe_budget = "1k"; };')
    with Client(w.port) as c:
        assert c.request("GET", "/bytes/50000", host="big.test").body == b"x" * 50000
        assert stalls(w, "client") == 0
        assert c.request("GET", "/bytes/50000", host="small.test").body == b"x" * 50000
        assert stalls(w, "client") >= 50000 // 1024 // 2
    # below the floor: refused by weir -t, naming the file and line
    bad = weir_factory(start=False, limits={"pipe_budget": "512"}, upstreams=ups,
                       routes=[{"path": "/", "upstream": "a"}])
    r = subprocess.run([WEIR_BIN, "-t", "-c", bad.conf], capture_output=True, text=True, timeout=slack(10))
    out = r.stdout + r.stderr
    assert r.returncode != 0 and "pipe_budget" in out and "%s:" % bad.conf in out, out
