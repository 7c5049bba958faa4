"""A worker that could not run for a while (starved of CPU, stopped by a
debugger or SIGSTOP, a paused VM) comes back with deadlines passed and the
I/O that arrived meanwhile not yet seen: a deadline that passed while its
socket was ready is judged after that I/O, so an answer already in hand is
delivered, not replaced by a 504, and a request that came within the
keep-alive timeout is served, not dropped by a close."""

import os
import signal
import sys
import time

import pytest

from harness import build_request, simple
from h2util import H2Client

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "origin"))
from h2_origin import H2Origin  # noqa: E402


def stalled(w, seconds):
    """Stops weir's only worker for <seconds>, then lets it go on."""
    (pid,) = w.wait_workers()
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(seconds)
    finally:
        os.kill(pid, signal.SIGCONT)


def test_an_answer_that_came_in_time_during_a_stall_is_delivered_not_504(weir_factory, origin):
    w = simple(weir_factory, origin, workers=1, timeouts={"upstream_read": "1s"})
    m0 = w.metrics()
    with w.client() as c:
        c.send(build_request("GET", "/slow/300"))
        time.sleep(0.1)  # forwarded; the origin answers 200 ms later, in time
        stalled(w, 1.5)  # the worker resumes 0.5 s past upstream_read
        r = c.read_response(timeout=5)
        assert r.status == 200, (r.status, r.body[:200])
        assert c.request("GET", "/bytes/3").body == b"xxx"
    m1 = w.metrics()
    assert m1.error("upstream_timeout") == m0.error("upstream_timeout")


def test_a_request_that_came_within_keepalive_during_a_stall_is_served(weir_factory, origin):
    w = simple(weir_factory, origin, workers=1, timeouts={"client_keepalive": "1s"})
    with w.client() as c:
        assert c.request("GET", "/bytes/1").body == b"x"
        (pid,) = w.wait_workers()
        os.kill(pid, signal.SIGSTOP)
        try:
            time.sleep(0.6)
            c.send(build_request("GET", "/bytes/2"))  # within the 1 s keep-alive
            time.sleep(0.9)  # the worker resumes 0.5 s past it
        finally:
            os.kill(pid, signal.SIGCONT)
        r = c.read_response(timeout=5)
        assert r.status == 200 and r.body == b"xx", (r.status, r.body[:200])


def test_an_http2_request_that_came_within_keepalive_during_a_stall_is_served(weir_factory, origin):
    w = simple(weir_factory, origin, workers=1, timeouts={"client_keepalive": "1s"})
    c = H2Client(w.port)
    try:
        assert c.get("/bytes/1")["body"] == b"x"
        (pid,) = w.wait_workers()
        os.kill(pid, signal.SIGSTOP)
        try:
            time.sleep(0.6)
            sid = c.request("/bytes/2")  # within the 1 s keep-alive
            time.sleep(0.9)
        finally:
            os.kill(pid, signal.SIGCONT)
        (r,) = c.wait([sid])
        assert r["status"] == 200 and r["body"] == b"xx", r
    finally:
        c.close()


def test_an_http2_window_update_that_came_during_a_stall_keeps_the_stream(weir_factory, origin):
    # the stream's own timer has no socket: its session's is asked
    w = simple(weir_factory, origin, workers=1, timeouts={"client_send": "1s"})
    c = H2Client(w.port, settings={1 << 2: 1024})  # INITIAL_WINDOW_SIZE
    try:
        c.read_some(0.3)
        sid = c.request("/bytes/5000")
        time.sleep(0.3)  # 1 KiB went out; the stream waits on its window
        (pid,) = w.wait_workers()
        os.kill(pid, signal.SIGSTOP)
        try:
            time.sleep(0.4)
            c.conn.increment_flow_control_window(8192, stream_id=sid)
            c.flush()
            time.sleep(0.8)  # the worker resumes 0.5 s past client_send
        finally:
            os.kill(pid, signal.SIGCONT)
        (r,) = c.wait([sid])
        assert r["status"] == 200 and r["reset"] is None and r["body"] == b"x" * 5000, \
            (r["status"], r["reset"], len(r["body"]))
    finally:
        c.close()


@pytest.fixture
def h2_origin():
    o = H2Origin()
    yield o
    o.close()


def test_an_h2_upstreams_answer_that_came_in_time_during_a_stall_is_delivered(weir_factory, h2_origin):
    w = weir_factory(upstreams=[{"name": "h2", "servers": [h2_origin.addr], "raw": 'protocol = "h2c";'}],
                     routes=[{"path": "/", "upstream": "h2"}], workers=1, timeouts={"upstream_read": "1s"})
    m0 = w.metrics()
    with w.client() as c:
        assert c.request("GET", "/bytes/1").status == 200  # the session is up
        c.send(build_request("GET", "/slow/300"))
        time.sleep(0.1)
        stalled(w, 1.5)
        r = c.read_response(timeout=5)
        assert r.status == 200, (r.status, r.body[:200])
    assert w.metrics().error("upstream_timeout") == m0.error("upstream_timeout")


def test_an_upstream_that_stays_silent_past_a_stall_still_gets_504(weir_factory, origin):
    # the grace is for I/O that is there: a silent upstream is judged at once
    w = simple(weir_factory, origin, workers=1, timeouts={"upstream_read": "1s"})
    m0 = w.metrics()
    with w.client() as c:
        c.send(build_request("GET", "/stall"))
        time.sleep(0.1)
        stalled(w, 1.5)
        t = time.monotonic()
        r = c.read_response(timeout=5)
        assert r.status == 504
        assert time.monotonic() - t < 1.0
    assert w.metrics().error("upstream_timeout") == m0.error("upstream_timeout") + 1
