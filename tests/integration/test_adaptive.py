"""Adaptive rate limits (docs/config.md, "rate_limits.adaptive"): the rate
follows the upstream's health, judged by the master over a window: 1.0x
while healthy, 0.6x while its p99 exceeds latency_p99, 0.3x while more than
5% of its answers are 5xx, never below the floor, and back when the window
recovers.

The origin's /mode answers as /mode-set last asked (fast, slow, failing);
a few clients keep it busy through weir (its answers are what the master
judges), while others hammer limited routes whose own answers stay fast.
The admitted rate is read from weir_rate_limit_decisions_total{allowed}:
rates against counters, with generous tolerances. Load loops are bounded
in time and talk only to 127.0.0.0/8.
"""

import subprocess
import threading
import time

import pytest

from harness import Client, WEIR_BIN, slack, wait_until
from test_rate_limit import start

RATE = 100
WINDOW = "2s"
LIMITS = [
    'name = "ad"; key = "route"; rate = "%d/s"; '
    'adaptive = { upstream = "a"; latency_p99 = "100ms"; floor = "10/s"; window = "%s"; };' % (RATE, WINDOW),
    'name = "adf"; key = "route"; rate = "%d/s"; '
    'adaptive = { upstream = "a"; latency_p99 = "100ms"; floor = "50/s"; window = "%s"; };' % (RATE, WINDOW),
]
ROUTES = [("/echo", ["ad"]), ("/healthz", ["adf"]), ("/mode", [])]


def mode_set(origin, what):
    with Client(origin.port) as c:
        r = c.request("GET", "/mode-set/%s" % what, headers=[("Connection", "close")])
    assert r.status == 200, r


class Load:
    """Threads that loop requests on kept-alive connections until stopped."""

    def __init__(self, port):
        self.port = port
        self.stop = threading.Event()
        self.threads = []

    def loop(self, target):
        while not self.stop.is_set():
            try:
                with Client(self.port) as c:
                    while not self.stop.is_set():
                        c.request("GET", target)
            except Exception:
                time.sleep(0.01)

    def add(self, target, n):
        for _ in range(n):
            t = threading.Thread(target=self.loop, args=(target,), daemon=True)
            t.start()
            self.threads.append(t)

    def end(self):
        self.stop.set()
        for t in self.threads:
            t.join(slack(10))


def allowed(w, limit):
    return w.metrics()("weir_rate_limit_decisions_total", limit=limit, result="allowed")


def factor(w, limit="ad"):
    m = w.metrics()
    if not m.has("weir_rate_limit_adaptive_factor", limit=limit):
        return None
    return m("weir_rate_limit_adaptive_factor", limit=limit)


def rejected(w, limit):
    return w.metrics()("weir_rate_limit_decisions_total", limit=limit, result="rejected")


def rate(w, limit, seconds=2.0):
    """The admitted and the rejected per second over <seconds>."""
    a0, r0, t0 = allowed(w, limit), rejected(w, limit), time.monotonic()
    time.sleep(seconds)
    a1, r1, t1 = allowed(w, limit), rejected(w, limit), time.monotonic()
    return (a1 - a0) / (t1 - t0), (r1 - r0) / (t1 - t0)


def error_ratio(w, limit):
    m = w.metrics()
    return m("weir_rate_limit_adaptive_error_ratio", limit=limit)


def phase(w, want, floor_want, clean=False):
    for attempt in range(3):
        wait_until(lambda: factor(w) == want, slack(8), what="factor %s" % want)
        if clean:
            # back to health: the rate is measured once the window holds no
            # failures, so the phase is 1.0x throughout
            wait_until(lambda: error_ratio(w, "ad") == 0 and error_ratio(w, "adf") == 0
                       and factor(w) == want and factor(w, "adf") == want, slack(15),
                       what="a window without failures")
        (r, rj), (rf, rfj) = rate(w, "ad"), rate(w, "adf", 1.5)
        # the rates hold for the factor they were measured under: on a
        # loaded machine a healthy upstream's p99 can pass the bound for a
        # moment and the factor move in the 3.5 s; measured again then
        if factor(w) == want and factor(w, "adf") == want:
            break
    # GCRA admits at most rate x t (+1); below it only if the clients could
    # not keep up on a loaded machine, which shows as (almost) nothing
    # rejected: the lower bound holds while the limit is what binds
    assert r <= 1.15 * RATE * want + 2, (want, r)
    assert rf <= 1.15 * floor_want + 2, (floor_want, rf)
    assert r >= 0.6 * RATE * want or rj < 0.2 * RATE * want, (want, r, rj)
    assert rf >= 0.6 * floor_want or rfj < 0.2 * floor_want, (floor_want, rf, rfj)
    return r, rf


# a healthy phase needs the upstream's p99 under 100 ms throughout: under
# the sanitizers, with the suites running beside it, weir's own latency
# passed that for moments (the factor dipped between the checks around a
# measurement: twice this stop); the code is the ASan suite's in the
# tests below
@pytest.mark.normal_only
def test_adaptive_follows_health(weir_factory, origin):
    w = start(weir_factory, origin, LIMITS, ROUTES)
    mode_set(origin, "ok")
    load = Load(w.port)
    try:
        load.add("/echo", 3)
        load.add("/healthz", 2)
        load.add("/mode", 3)  # the upstream's own traffic, judged
        got = [phase(w, 1.0, RATE)]
        m = w.metrics()
        assert m("weir_rate_limit_adaptive_error_ratio", limit="ad") == 0
        assert m("weir_rate_limit_adaptive_answers", limit="ad") > 0

        mode_set(origin, "sleep/300")  # p99 over the 100 ms bound
        got.append(phase(w, 0.6, 0.6 * RATE))
        assert w.metrics()("weir_rate_limit_adaptive_p99_seconds", limit="ad") > 0.1

        mode_set(origin, "fail/500")  # errors well past 5%: 0.3x, and adf held at its 50/s floor
        got.append(phase(w, 0.3, 50))
        assert w.metrics()("weir_rate_limit_adaptive_error_ratio", limit="ad") > 0.05

        mode_set(origin, "ok")  # the window recovers: back to 1.0x
        got.append(phase(w, 1.0, RATE, clean=True))
        assert w.metrics()("weir_rate_limit_adaptive_error_ratio", limit="ad") <= 0.05
        print("admitted per second (ad, adf) by phase 1.0x, 0.6x, 0.3x, 1.0x:", got)
    finally:
        load.end()
        mode_set(origin, "ok")


def test_adaptive_no_flapping_at_threshold(weir_factory, origin):
    """Hysteresis: at 0.3x, a window sitting at the 5% threshold (every
    20th answer a 500) keeps 0.3x; judged on the threshold alone it turned
    to 1.0x and back as single failures came and left the window."""
    w = start(weir_factory, origin, LIMITS[:1], ROUTES[:1] + ROUTES[2:])
    load = Load(w.port)
    try:
        mode_set(origin, "fail/500")
        load.add("/mode", 4)
        wait_until(lambda: factor(w) == 0.3, slack(8), what="factor 0.3")
        mode_set(origin, "failevery/20")
        # the window of all-500 answers ages out (2 s) toward 5%
        wait_until(lambda: error_ratio(w, "ad") < 0.07, slack(10), what="an error ratio near 5%")
        seen, ratios, end = [], [], time.monotonic() + 8
        while time.monotonic() < end:
            m = w.metrics()
            seen.append(m("weir_rate_limit_adaptive_factor", limit="ad"))
            ratios.append(m("weir_rate_limit_adaptive_error_ratio", limit="ad"))
            time.sleep(0.1)
        flips = sum(1 for a, b in zip(seen, seen[1:]) if a != b)
        print("error ratios %.4f..%.4f, factors %s, flips %d" % (min(ratios), max(ratios), sorted(set(seen)), flips))
        # the origin's count may lose a failure to a thread race: the ratio
        # stays near 5%, well over the 4% a return needs
        assert min(ratios) > 0.04 and max(ratios) < 0.07, (min(ratios), max(ratios))
        assert flips == 0 and set(seen) == {0.3}, (flips, sorted(set(seen)))
        mode_set(origin, "ok")  # clean: back to 1.0x
        wait_until(lambda: factor(w) == 1.0, slack(8), what="factor 1.0")
    finally:
        load.end()
        mode_set(origin, "ok")


def check(tmp_path, text):
    p = tmp_path / "weir.conf"
    p.write_text(text)
    r = subprocess.run([WEIR_BIN, "-t", "-c", str(p)], capture_output=True, text=True, timeout=10)
    return r.returncode, r.stdout + r.stderr, str(p)


BASE = """listeners = ( { address = "127.0.0.1:18080"; } );
upstreams = ( { name = "a"; servers = ( { address = "127.0.0.1:18081"; } ); } );
rate_limits = (
  { name = "ad"; key = "route"; %s
    adaptive = { %s };
  }
);
routes = ( { path = "/"; upstream = "a"; rate_limits = [ "ad" ]; } );
"""


def test_adaptive_config_errors(tmp_path):
    rc, out, path = check(tmp_path, BASE % ('rate = "100/s";', 'upstream = "a"; latency_p99 = "200ms"; floor = "10/s";'))
    assert rc == 0, out
    cases = [
        ('rate = "100/s";', 'upstream = "nope";', 5, "is not an upstream"),
        ('rate = "100/s";', 'upstream = "a";\n floor = "200/s";', 6, "is above its rate"),
        ('rate = "100/s";', 'upstream = "a";\n floor = "ten";', 6, "floor"),
        ('rate = "100/s";', 'upstream = "a";\n window = "100ms";', 6, "window"),
        ('rate = "100/s";', 'latency_p99 = "1s";', 5, "upstream"),
        ('concurrent = 5;', 'upstream = "a";', 5, "needs a rate"),
    ]
    for lim, ad, line, what in cases:
        rc, out, path = check(tmp_path, BASE % (lim, ad))
        assert rc != 0, (lim, ad, out)
        assert "%s:%d" % (path, line) in out and what in out, (lim, ad, out)
