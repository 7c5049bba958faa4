"""Retries (issue 13, item 5): on connect-failure (default), reset, timeout
(per_try_timeout) and status codes, to a different server each try, at
most `attempts` tries; a request whose sent bytes cannot be sent again
safely is not retried; a node-wide budget stops a retry storm; when tries
run out, the last upstream response is what the client gets."""

import threading
import time

from harness import Client, build_request, closed_port, slack, wait_until


def retry(**kw):
    on = kw.pop("on", None)
    keys = " ".join(('%s = "%s";' if isinstance(v, str) else "%s = %d;") % (k, v) for k, v in kw.items())
    if on is not None:
        keys = "on = [ %s ]; " % ", ".join('"%s"' % w for w in on) + keys
    return "retry = { %s };" % keys


def retry_weir(weir_factory, servers, raw, workers=1, **kw):
    return weir_factory(upstreams=[{"name": "g", "servers": servers, "max_fails": 0, "raw": raw}],
                        routes=[{"path": "/", "upstream": "g"}], workers=workers, **kw)


def ask(w, target, n, method="GET", body=None):
    out = []
    for _ in range(n):
        with w.client() as c:
            out.append(c.request(method, target, body=body))
    return out


def results(w, result):
    return w.metrics()("weir_upstream_retries_by_result_total", upstream="g", result=result)


def test_connect_failures_are_retried_on_another_server_within_attempts(weir_factory, origin_factory):
    a = origin_factory("A")
    dead = "127.0.0.1:%d" % closed_port()
    w = retry_weir(weir_factory, [dead, a.addr], retry(attempts=2))
    got = ask(w, "/echo", 6)
    assert all(r.status == 200 and r.get("X-Origin") == "A" for r in got)
    assert results(w, "attempted") == 3 and results(w, "succeeded") == 3  # every other request met dead first
    w2 = retry_weir(weir_factory, [dead, a.addr], retry(attempts=1))
    got = [r.status for r in ask(w2, "/echo", 6)]
    assert sorted(got) == [200] * 3 + [502] * 3, got


def test_a_reset_before_any_response_byte_is_retried_only_when_on_names_it(weir_factory, origin_factory):
    a, b = origin_factory("A"), origin_factory("B")
    w = retry_weir(weir_factory, [a.addr, b.addr], retry(on=["reset"], attempts=2))
    got = ask(w, "/on/A/close-early", 4)
    assert all(r.status == 200 and r.get("X-Origin") == "B" for r in got), got
    assert results(w, "attempted") == 2
    w2 = retry_weir(weir_factory, [a.addr, b.addr], retry(on=["connect-failure"], attempts=2))
    assert sorted(r.status for r in ask(w2, "/on/A/close-early", 4)) == [200, 200, 502, 502]


def test_a_try_past_per_try_timeout_is_retried_on_timeout(weir_factory, origin_factory):
    a, b = origin_factory("A"), origin_factory("B")
    w = retry_weir(weir_factory, [a.addr, b.addr],
                   retry(on=["timeout"], attempts=2, per_try_timeout="300ms"),
                   timeouts={"upstream_read": "5s"})
    for _ in range(2):
        t0 = time.monotonic()
        r = ask(w, "/on/A/stall", 1)[0]
        assert r.status == 200 and r.get("X-Origin") == "B", r
        assert time.monotonic() - t0 < 3  # not the 5 s of upstream_read
    assert results(w, "attempted") == 1  # the other request went to B first
    assert results(w, "succeeded") == 1


def test_a_status_named_in_on_is_retried_and_the_last_answer_is_returned(weir_factory, origin_factory):
    a, b, c = origin_factory("A"), origin_factory("B"), origin_factory("C")
    w = retry_weir(weir_factory, [a.addr, b.addr, c.addr], retry(on=["503"], attempts=3))
    got = ask(w, "/on/A/status/503", 3)
    assert all(r.status == 200 for r in got), got
    # every server answers 503: three tries, each to another server, and
    # the client gets the last upstream answer, not a 502 of weir's own
    for o in (a, b, c):
        o.clear_log()
    r = ask(w, "/status/503", 1)[0]
    assert r.status == 503 and r.body == b"status 503\n", r
    assert [len(o.requests("/status/503")) for o in (a, b, c)] == [1, 1, 1]
    assert results(w, "attempts_exhausted") == 1
    wait_until(lambda: len([l for l in w.access_lines() if l.endswith(" ctl=retried")]) == 2, slack(2),
               what="the retried requests named in the access log")


def test_a_streamed_post_is_not_retried_after_it_was_sent_a_buffered_one_is(weir_factory, origin_factory):
    a, b = origin_factory("A"), origin_factory("B")
    w = retry_weir(weir_factory, [a.addr, b.addr], retry(on=["reset"], attempts=2),
                   limits={"body_buffer": 0})
    got = ask(w, "/on/A/close-early", 4, method="POST", body=b"x" * 100)
    assert sorted(r.status for r in got) == [200, 200, 502, 502], got
    assert results(w, "not_replayable") == 2 and results(w, "attempted") == 0
    w2 = retry_weir(weir_factory, [a.addr, b.addr], retry(on=["reset"], attempts=2))
    got = ask(w2, "/on/A/close-early", 4, method="POST", body=b"x" * 100)
    assert all(r.status == 200 and r.get("X-Origin") == "B" for r in got), got
    assert all(e["body_len"] == 100 for e in b.requests("/echo")), b.requests("/echo")


def test_the_budget_stops_a_retry_storm_when_every_server_fails(weir_factory, origin_factory):
    a, b = origin_factory("A"), origin_factory("B")
    w = retry_weir(weir_factory, [a.addr, b.addr], retry(on=["503"], attempts=3, budget_percent=20,
                                                          budget_min=3), workers=2)
    n = 20
    out = [None] * n
    go = threading.Barrier(n)

    def one(i):
        with Client(w.port, timeout=10) as c:
            go.wait()
            out[i] = c.request("GET", "/sleep/600/status/503")
    ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(slack(15))
    assert all(r is not None and r.status == 503 and r.body == b"status 503\n" for r in out), out
    # 20 in flight allow max(3, 20 % of 20) = 4 retries in flight, over
    # both workers; each of those may go on to its third try
    attempted, refused = results(w, "attempted"), results(w, "budget_exhausted")
    assert attempted <= 8 and refused >= 12, (attempted, refused)
    sent = len(a.requests()) + len(b.requests())
    assert sent <= n + 8, sent  # without the budget: 60
    wait_until(lambda: len([l for l in w.access_lines() if l.endswith(" ctl=retry_budget")]) == refused, slack(2),
               what="the requests the budget stopped named in the access log")
    wait_until(lambda: w.metrics()("weir_upstream_retries_in_flight", upstream="g") == 0, slack(2),
               what="no retry in flight")


def test_the_operators_setup_from_the_issue_behaves_as_written(weir_factory, origin_factory):
    """inventory: breaker at more than 5 % failures, 2 retries including
    after a timeout; payment: breaker at more than 80 % of its pool in
    use, 1 retry on network errors only; inventory balanced by least
    request, payment at random."""
    i1, i2, i3 = origin_factory("I1"), origin_factory("I2"), origin_factory("I3")
    p1, p2 = origin_factory("P1"), origin_factory("P2")
    inventory = ('balance = "least_request"; breaker = { error_percent = 5; min_requests = 20; open_time = "30s"; }; '
                 'retry = { on = [ "connect-failure", "reset", "timeout" ]; attempts = 3; '
                 'per_try_timeout = "300ms"; };')
    payment = ('balance = "random"; limits = { max_connections = 10; }; breaker = { pool_percent = 80; error_percent = 0; }; '
               'retry = { on = [ "connect-failure", "reset" ]; attempts = 2; };')
    w = weir_factory(upstreams=[{"name": "inventory", "servers": [i1.addr, i2.addr, i3.addr], "max_fails": 0,
                                 "raw": inventory},
                                {"name": "payment", "servers": [p1.addr, p2.addr], "max_fails": 0, "raw": payment}],
                     routes=[{"host": "inventory", "path": "/", "upstream": "inventory"},
                             {"host": "payment", "path": "/", "upstream": "payment"}],
                     workers=2, timeouts={"upstream_read": "1s"})

    def get(host, target):
        with w.client() as c:
            return c.request("GET", target, host=host)

    # inventory: two servers stall, the third try answers
    for _ in range(3):
        r = get("inventory", "/on/I1,I2/stall")
        assert r.status == 200 and r.get("X-Origin") == "I3", r
    # payment: a reset is retried once, a timeout is not
    for _ in range(2):
        r = get("payment", "/on/P1/close-early")
        assert r.status == 200 and r.get("X-Origin") == "P2", r
    # (each worker balances on its own: which server a request meets first
    # is not known, so ask until one met P1; at random, seven in a row miss
    # it once in 128 runs, and once in CI did: 30 tries miss it once in
    # half a billion, and a miss costs nothing, as P2 answers at once)
    tried0 = w.metrics()("weir_upstream_retries_by_result_total", upstream="payment", result="attempted")
    statuses = []
    while 504 not in statuses:
        statuses.append(get("payment", "/on/P1/stall").status)
        assert len(statuses) < 30, statuses
    assert set(statuses) <= {200, 504}, statuses
    assert w.metrics()("weir_upstream_retries_by_result_total", upstream="payment", result="attempted") == tried0
    # inventory: 2 failures in 22 answers is more than 5 %
    for _ in range(20):
        assert get("inventory", "/echo").status == 200
    assert get("inventory", "/status/500").status == 500
    assert w.metrics()("weir_upstream_breaker_state", upstream="inventory", state="closed") == 1
    assert get("inventory", "/status/500").status == 500
    wait_until(lambda: w.metrics()("weir_upstream_breaker_state", upstream="inventory", state="open") == 1,
               slack(2), what="inventory's breaker open")
    r = get("inventory", "/echo")
    assert r.status == 503 and r.get("Retry-After"), r
    # payment: 9 of 10 connections in use is past 80 %
    out = [None] * 9
    go = threading.Barrier(9)

    def one(i):
        with Client(w.port, timeout=10) as c:
            go.wait()
            out[i] = c.request("GET", "/echo/slow/700", host="payment")
    ts = [threading.Thread(target=one, args=(i,)) for i in range(9)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(slack(15))
    assert w.metrics()("weir_upstream_breaker_state", upstream="payment", state="open") == 1
    assert get("payment", "/echo").status == 503
