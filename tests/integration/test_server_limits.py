"""Per-server limits (issue 13, item 4: "per group and per server"):
limits.max_requests_per_server and max_connections_per_server cap the
requests in flight to each server of a group, node-wide (over both
workers); the pick passes a full server by (counted in
weir_upstream_server_full_skips_total) and takes another; with every
server full the request is treated as past the group's cap: the group's
queue, then 503, or 503 at once."""

import time

from harness import Client, slack, wait_until
from test_breaker import block, breaker_weir, parallel
from test_metrics import admin
from test_outlier import weir_t_errors


def origins_of(got):
    return sorted(r.get("X-Origin") for r in got)


def active(w, server):
    return w.metrics()("weir_upstream_server_requests_active", upstream="g", server=server)


def test_a_full_server_is_passed_by_across_workers(weir_factory, origin_factory):
    a, b = origin_factory("A"), origin_factory("B")
    # A weighs 100 times B: without the cap both would go to A
    w = breaker_weir(weir_factory, [(a.addr, 100), (b.addr, 1)], block("limits", max_requests_per_server=1))
    got = parallel(w, "/slow/1000", 2)
    assert [r.status for r in got] == [200, 200], got
    assert origins_of(got) == ["A", "B"], origins_of(got)
    m = w.metrics()
    assert m("weir_upstream_server_full_skips_total", upstream="g", server=a.addr) >= 1
    assert m("weir_upstream_server_full_skips_total", upstream="g", server=b.addr) == 0
    # the places are given back when the requests end
    wait_until(lambda: active(w, a.addr) == 0 and active(w, b.addr) == 0, slack(3), what="places given back")
    with Client(w.port) as c:
        assert c.request("GET", "/echo").get("X-Origin") == "A"


def test_every_server_full_is_the_group_full(weir_factory, origin_factory):
    a, b = origin_factory("A"), origin_factory("B")
    w = breaker_weir(weir_factory, [a.addr, b.addr], block("limits", max_requests_per_server=1))
    got = parallel(w, "/slow/1000", 3)
    assert sorted(r.status for r in got) == [200, 200, 503], got
    assert origins_of([r for r in got if r.status == 200]) == ["A", "B"]
    m = w.metrics()
    assert m("weir_upstream_rejected_total", upstream="g", by="upstream_limit") == 1
    assert m.error("upstream_limit") == 1

    # with a queue the third waits for a place, then is served
    w = breaker_weir(weir_factory, [a.addr, b.addr],
                     block("limits", max_connections_per_server=1, max_pending=4, queue_timeout="5s"))
    t0 = time.monotonic()
    got = parallel(w, "/slow/700", 3)
    assert [r.status for r in got] == [200] * 3, got
    assert time.monotonic() - t0 >= 1.3
    assert w.metrics()("weir_upstream_rejected_total", upstream="g", by="upstream_limit") == 0


def test_weir_t_refuses_a_bad_per_server_limit(tmp_path):
    err = weir_t_errors(tmp_path, block("limits", max_requests_per_server=-1))
    assert "check.conf:3:" in err and "max_requests_per_server" in err, err


def test_the_cap_is_exact_over_both_workers(weir_factory, origin_factory):
    # 12 requests at once on their own connections (over both workers), 2
    # places per server: each origin counts what it has in flight, and
    # never sees more than 2; the rest wait in the group's queue
    a, b = origin_factory("A"), origin_factory("B")
    w = breaker_weir(weir_factory, [(a.addr, 100), (b.addr, 1)],
                     block("limits", max_requests_per_server=2, max_pending=20, queue_timeout="10s"))
    got = parallel(w, "/conc/300/0", 12)
    # a place another worker takes between the "some server has room"
    # check and the pick sends the request back to the queue
    assert [r.status for r in got] == [200] * 12, got
    assert w.metrics().error("no_server") == 0
    seen = {}
    for r in got:
        n = int(r.body.split()[1])
        seen[r.get("X-Origin")] = max(seen.get(r.get("X-Origin"), 0), n)
    assert seen == {"A": 2, "B": 2}, seen



def test_a_full_server_beside_a_drained_one_queues_the_request(weir_factory, origin_factory):
    # A is drained (out of the pick, its count at 0), B holds one place:
    # the second request finds no server with room that can be picked,
    # which is the group full (the queue), not "no server"
    a, b = origin_factory("A"), origin_factory("B")
    w = breaker_weir(weir_factory, [a.addr, b.addr],
                     block("limits", max_requests_per_server=1, max_pending=4, queue_timeout="5s"))
    admin(w, "g", a.addr, state="drain")
    got = parallel(w, "/slow/500", 2)
    assert [r.status for r in got] == [200, 200], got
    assert origins_of(got) == ["B", "B"]
    m = w.metrics()
    assert m.error("no_server") == 0
    assert m("weir_upstream_rejected_total", upstream="g", by="upstream_limit") == 0


def test_a_full_server_beside_a_drained_one_without_a_queue_is_the_limit(weir_factory, origin_factory):
    a, b = origin_factory("A"), origin_factory("B")
    w = breaker_weir(weir_factory, [a.addr, b.addr], block("limits", max_requests_per_server=1))
    admin(w, "g", a.addr, state="drain")
    got = parallel(w, "/slow/500", 2)
    assert sorted(r.status for r in got) == [200, 503], got
    m = w.metrics()
    assert m.error("no_server") == 0 and m.error("upstream_limit") == 1
    assert m("weir_upstream_rejected_total", upstream="g", by="upstream_limit") == 1


def test_a_place_taken_under_a_request_sends_it_back_to_the_queue(weir_factory, origin_factory):
    # one place per server, two workers racing for each freed place every
    # 2 ms: a request that saw room and lost the place to the other worker
    # waits again in the queue (no 503 no_server), 80 requests in turn
    a, b = origin_factory("A"), origin_factory("B")
    w = breaker_weir(weir_factory, [a.addr, b.addr],
                     block("limits", max_requests_per_server=1, max_pending=200, queue_timeout="30s"))
    got = parallel(w, "/conc/5/0", 80)
    assert [r.status for r in got] == [200] * 80, [r.status for r in got if r.status != 200]
    m = w.metrics()
    assert m.error("no_server") == 0
    assert max(int(r.body.split()[1]) for r in got) == 1
