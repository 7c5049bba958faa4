"""adaptive_concurrency (issue 14, item 7): a gradient controller in the
master caps the requests in flight to an upstream group, node-wide: the
cap falls while the group's latency rises over its baseline, climbs back
when the latency falls, and a request over it waits in the group's queue,
then gets a 503 with Retry-After.

The origin's /conc/BASE/PER answers after BASE + PER ms per request in
flight there, so its latency rises with concurrency. Limits are read from
weir_upstream_adaptive_concurrency_limit. Load loops are bounded in time
and talk only to 127.0.0.0/8.
"""

import signal
import threading
import time

import pytest

from harness import Client, slack, wait_until
from test_breaker import block, breaker_weir, parallel
from test_metrics import stats_request
from test_outlier import weir_t_errors


def limit(w):
    return w.metrics()("weir_upstream_adaptive_concurrency_limit", upstream="g")


def refused(w):
    return w.metrics()("weir_upstream_adaptive_concurrency_refused_total", upstream="g")


class Load:
    """Threads looping requests to self.target on kept-alive connections,
    keeping the last 503 seen."""

    def __init__(self, port, target, n):
        self.port, self.target = port, target
        self.stop = threading.Event()
        self.last_503 = None
        self.threads = [threading.Thread(target=self.loop, daemon=True) for _ in range(n)]
        for t in self.threads:
            t.start()

    def loop(self):
        while not self.stop.is_set():
            try:
                with Client(self.port, timeout=10) as c:
                    while not self.stop.is_set():
                        r = c.request("GET", self.target)
                        if r.status == 503:
                            self.last_503 = r
            except Exception:
                time.sleep(0.01)

    def end(self):
        self.stop.set()
        for t in self.threads:
            t.join(slack(12))


@pytest.mark.normal_only
def test_the_limit_falls_with_latency_and_climbs_back(weir_factory, origin):
    w = breaker_weir(weir_factory, [origin.addr],
                     block("adaptive_concurrency", min_limit=2, max_limit=200, initial_limit=40,
                           window="500ms", smoothing=100))
    assert limit(w) == 40
    load = Load(w.port, "/conc/10/0", 6)
    try:
        # a baseline at 10 ms; 6 in flight never use half of 40: it stays
        time.sleep(3)
        assert limit(w) == 40
        # 30 clients, each adding 10 ms: latency far over the baseline
        load.stop.set()
        for t in load.threads:
            t.join(slack(12))
        load = Load(w.port, "/conc/10/10", 30)
        wait_until(lambda: limit(w) <= 10, slack(10), what="the limit down to 10")
        low = limit(w)
        wait_until(lambda: load.last_503 is not None, slack(5), what="a 503 over the limit")
        r = load.last_503
        assert r.get("Retry-After") == "1", r
        assert refused(w) > 0
        m = w.metrics()
        assert m("weir_upstream_adaptive_concurrency_baseline_seconds", upstream="g") < 0.05
        # the latency no longer rises with concurrency: the limit climbs
        load.target = "/conc/10/0"
        wait_until(lambda: limit(w) >= 30, slack(12), what="the limit back to 30")
        print("limit 40 -> %d -> %d" % (low, limit(w)))
    finally:
        load.end()


def test_over_the_limit_requests_queue_then_503(weir_factory, origin):
    # a fixed limit of 2 (min = max): two slow requests hold it
    fixed = dict(min_limit=2, max_limit=2, initial_limit=2)
    w = breaker_weir(weir_factory, [origin.addr],
                     block("adaptive_concurrency", queue_timeout="3s", **fixed))
    t0 = time.monotonic()
    got = parallel(w, "/slow/700", 3)  # the third waits for a place, then is served
    assert [r.status for r in got] == [200] * 3, got
    assert time.monotonic() - t0 >= 1.3
    m = w.metrics()
    assert m("weir_upstream_rejected_total", upstream="g", by="queue_timeout") == 0
    assert refused(w) == 0

    w = breaker_weir(weir_factory, [origin.addr],
                     block("adaptive_concurrency", queue_timeout="200ms", **fixed))
    got = parallel(w, "/slow/1500", 3)
    bad = [r for r in got if r.status == 503]
    assert len(bad) == 1 and sorted(r.status for r in got) == [200, 200, 503], got
    assert bad[0].get("Retry-After") == "1", bad[0]
    m = w.metrics()
    assert m("weir_upstream_rejected_total", upstream="g", by="queue_timeout") == 1
    assert refused(w) == 1
    wait_until(lambda: len([l for l in w.access_lines() if l.endswith(" ctl=adaptive_concurrency")]) == 1,
               slack(2), what="the refusal's access log line")

    # no queue at all: refused at once, as upstream_limit
    w = breaker_weir(weir_factory, [origin.addr], block("adaptive_concurrency", max_pending=0, **fixed))
    got = parallel(w, "/slow/1000", 3)
    assert sorted(r.status for r in got) == [200, 200, 503], got
    assert [r.get("Retry-After") for r in got if r.status == 503] == ["1"], got
    m = w.metrics()
    assert m("weir_upstream_rejected_total", upstream="g", by="upstream_limit") == 1
    assert m("weir_errors_total", kind="adaptive_concurrency") == 1
    assert refused(w) == 1


def test_adaptive_concurrency_config_errors(tmp_path):
    cases = [
        (dict(min_limit=10, max_limit=5), "max_limit must be at least min_limit"),
        (dict(initial_limit=2000), "initial_limit must lie within"),
        (dict(window="100ms"), "window"),
        (dict(window="5s", baseline_window="6s"), "baseline_window must be at least twice window"),
        (dict(smoothing=0), "smoothing"),
    ]
    for kw, what in cases:
        err = weir_t_errors(tmp_path, block("adaptive_concurrency", **kw))
        assert "check.conf:3:" in err and what in err, (kw, err)


def test_a_reload_keeps_the_limit_within_the_new_bounds(weir_factory, origin):
    def conf(**kw):
        return dict(upstreams=[{"name": "g", "servers": [origin.addr], "max_fails": 0,
                                "raw": block("adaptive_concurrency", **kw)}],
                    routes=[{"path": "/", "upstream": "g"}], workers=2)

    def reload(**kw):
        w.write_config(**conf(**kw))
        ok = w.metrics()("weir_reloads_total", result="ok")
        w.signal(signal.SIGHUP)
        wait_until(lambda: w.metrics()("weir_reloads_total", result="ok") > ok, slack(5), what="reload")
        time.sleep(1)  # a few of the master's ticks

    w = breaker_weir(weir_factory, [origin.addr], block("adaptive_concurrency", min_limit=3, max_limit=3,
                                                        initial_limit=3))
    time.sleep(1)
    assert limit(w) == 3
    reload(min_limit=2, max_limit=200, initial_limit=50)
    assert limit(w) == 3  # kept: initial_limit holds at first start only
    reload(min_limit=10, max_limit=200, initial_limit=50)
    assert limit(w) == 10  # held to the new bounds
    status, text, _ = stats_request(w.stats_port, "GET", "/upstreams")
    assert status == 200 and "  adaptive_concurrency limit=10 " in text, text
