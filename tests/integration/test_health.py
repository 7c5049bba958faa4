"""Active health checks (upstreams.health): one prober per node, a child of
the master, whose results are words in the shared segment that every worker
reads when it picks a server.

Origins of our own answer /healthz with what /health-set/N last asked for
(tests/origin/origin.py), so a test can fail a server's checks while the
server itself still answers; requests are counted on the origin side. Bounds
are generous (the machine is shared): a check every 200 ms, fall 2, rise 2.
"""

import os
import re
import signal
import socket
import subprocess
import time

import pytest

import harness
from harness import Client, closed_port, free_port, settle, slack, wait_until, WEIR_BIN

INTERVAL = 0.2
FAST = 'path = "/healthz"; interval = "200ms"; timeout = "150ms"; jitter = "20ms"; rise = 2; fall = 2;'


def health_set(origin, what):
    """Tells <origin> (directly, not through weir) what /healthz answers."""
    with Client(origin.port) as c:
        r = c.request("GET", "/health-set/%s" % what, headers=[("Connection", "close")])
    assert r.status == 200, r


def health(w, server, upstream="a"):
    m = w.metrics()
    if not m.has("weir_upstream_health", upstream=upstream, server=server):
        return None
    return m("weir_upstream_health", upstream=upstream, server=server)


def checks(w, server, result, upstream="a"):
    return w.metrics()("weir_health_checks_total", upstream=upstream, server=server, result=result)


def upstreams_line(w, server):
    """The key=value fields of <server>'s line in GET /upstreams."""
    with Client(w.stats_port) as c:
        r = c.request("GET", "/upstreams", host="127.0.0.1:%d" % w.stats_port,
                      headers=[("Connection", "close")])
    assert r.status == 200, r
    for line in r.body.decode().splitlines():
        f = line.split()
        if len(f) > 1 and f[0] == "server" and f[1] == server:
            return dict(kv.split("=", 1) for kv in f[2:])
    raise AssertionError("no line for %s in %r" % (server, r.body))


def prober_pid(w):
    """The prober's pid, from its start-up line (the newest one)."""
    pids = [int(m.group(1)) for l in w.error_lines()
            for m in [re.search(r"health prober started, pid (\d+)", l)] if m]
    return pids[-1] if pids else None


def two_origins(weir_factory, origin_factory, health=FAST, workers=3, **kw):
    a, b = origin_factory("A"), origin_factory("B")
    w = weir_factory(upstreams=[{"name": "a", "servers": [a.addr, b.addr], "health": health, **kw}],
                     routes=[{"path": "/", "upstream": "a"}], workers=workers)
    wait_until(lambda: checks(w, a.addr, "ok") >= 1 and checks(w, b.addr, "ok") >= 1, slack(5),
               what="the first checks")
    return w, a, b


def spread(w, n=30):
    """Sends <n> requests, each on a new connection (so every worker gets
    some); all must be answered 200."""
    for _ in range(n):
        r = w.get("/echo", headers=[("Connection", "close")])
        assert r.status == 200, r


def test_a_failing_server_is_taken_out_within_fall_intervals_and_gets_no_request_until_back(
        weir_factory, origin_factory):
    w, a, b = two_origins(weir_factory, origin_factory)
    spread(w, 20)
    assert a.requests("/echo") and b.requests("/echo")  # both in use
    assert health(w, b.addr) == 1

    health_set(b, 503)
    t0 = time.monotonic()
    wait_until(lambda: health(w, b.addr) == 0, slack(2 * INTERVAL * 2 + 1), what="b taken out")
    took_out = time.monotonic() - t0
    n_b = len(b.requests("/echo"))
    spread(w, 30)
    assert len(b.requests("/echo")) == n_b, "a request reached the server while its health was down"
    assert any("health down after 2 failed check(s) in a row (last: HTTP status 503)" in l
               and b.addr in l for l in w.error_lines()), w.error_lines()
    line = upstreams_line(w, b.addr)
    assert line["health"] == "down" and line["last_check"] == "bad_status" and line["last_status"] == "503", line

    health_set(b, 200)
    t1 = time.monotonic()
    wait_until(lambda: health(w, b.addr) == 1, slack(2 * INTERVAL * 2 + 1), what="b back")
    back = time.monotonic() - t1
    spread(w, 20)
    assert len(b.requests("/echo")) > n_b
    assert any("health up after 2 passed check(s)" in l and b.addr in l for l in w.error_lines())
    assert checks(w, b.addr, "bad_status") >= 2
    assert upstreams_line(w, b.addr)["health"] == "up"
    # one transition each way, one line each
    assert sum(1 for l in w.error_lines() if "health down" in l) == 1
    print("taken out after %.2f s, back after %.2f s" % (took_out, back))


def test_when_every_server_is_down_by_health_the_panic_mode_still_serves(weir_factory, origin_factory):
    w, a, b = two_origins(weir_factory, origin_factory)
    before = w.metrics()("weir_upstream_panic_total")
    health_set(a, 500)
    health_set(b, 500)
    wait_until(lambda: health(w, a.addr) == 0 and health(w, b.addr) == 0, slack(3), what="both down")
    spread(w, 10)  # answered by the servers anyway: a stale guess beats a certain 503
    settle()
    assert w.metrics()("weir_upstream_panic_total") - before >= 10


def test_tcp_checks_take_out_a_closed_port_and_keep_an_open_one(weir_factory, origin):
    dead = "127.0.0.1:%d" % closed_port()
    w = weir_factory(upstreams=[{"name": "a", "servers": [origin.addr, dead], "max_fails": 0,
                                 "health": 'type = "tcp"; interval = "200ms"; timeout = "150ms"; fall = 2;'}],
                     routes=[{"path": "/", "upstream": "a"}], workers=2)
    wait_until(lambda: health(w, dead) == 0, slack(3), what="the closed port taken out")
    assert health(w, origin.addr) == 1
    assert checks(w, dead, "connect_failed") >= 1
    assert upstreams_line(w, dead)["last_check"] == "connect_failed"
    # max_fails is off: only the health word keeps requests off the dead port
    for _ in range(10):
        assert w.get("/", headers=[("Connection", "close")]).status == 200
    settle()
    m = w.metrics()
    assert m("weir_upstream_server_connects_total", upstream="a", server=dead) == 0
    assert m("weir_upstream_server_requests_total", upstream="a", server=dead) == 0
    assert not origin.requests("/healthz")  # a TCP check sends no request


def test_a_probe_target_that_accepts_and_stalls_times_out_and_does_not_delay_a_reload(weir_factory, origin):
    stall = socket.socket()
    stall.bind(("127.0.0.1", 0))
    stall.listen(16)  # the kernel completes handshakes; nobody ever reads
    addr = "127.0.0.1:%d" % stall.getsockname()[1]
    try:
        w = weir_factory(upstreams=[{"name": "a", "servers": [origin.addr, addr], "health":
                                     'path = "/healthz"; interval = "1s"; timeout = "900ms"; fall = 1;'}],
                         routes=[{"path": "/", "upstream": "a"}], workers=2)
        wait_until(lambda: checks(w, addr, "timeout") >= 1, slack(4), what="the stalled check to time out")
        assert health(w, addr) == 0
        assert any("no status line within 900 ms" in l for l in w.error_lines()), w.error_lines()
        # while checks stall (each holds its socket for 900 ms of every
        # second), a HUP is handled at once
        old = set(w.worker_pids())
        t0 = time.monotonic()
        w.signal(signal.SIGHUP)
        wait_until(lambda: any("reloaded" in l for l in w.error_lines()), slack(2), what="the reload")
        assert time.monotonic() - t0 < slack(2)
        wait_until(lambda: not (set(w.worker_pids()) & old), slack(5), what="old workers gone")
        assert health(w, addr) == 0  # kept across the reload
    finally:
        stall.close()


def test_health_state_is_kept_across_hup_and_a_new_server_starts_up(weir_factory, origin_factory, tmp_path):
    w, a, b = two_origins(weir_factory, origin_factory,
                          health='path = "/healthz"; interval = "500ms"; timeout = "400ms"; fall = 1; rise = 3;')
    health_set(b, 503)
    wait_until(lambda: health(w, b.addr) == 0, slack(3), what="b down")
    c = origin_factory("C")
    text = open(w.conf).read()
    w.write_raw_config(text.replace('"%s"; }' % b.addr, '"%s"; }, { address = "%s"; }' % (b.addr, c.addr)))
    n_b = len(b.requests("/echo"))
    w.signal(signal.SIGHUP)
    wait_until(lambda: any("reloaded" in l for l in w.error_lines()), slack(3), what="the reload")
    # the new server starts up; the down one stays down through the reload,
    # with no request let through while the new prober starts
    assert health(w, c.addr) == 1
    for _ in range(3):
        assert health(w, b.addr) == 0
        spread(w, 5)
    assert len(b.requests("/echo")) == n_b
    assert c.requests("/echo")
    health_set(b, 200)
    wait_until(lambda: health(w, b.addr) == 1, slack(4), what="b back after rise checks")
