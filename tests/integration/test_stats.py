"""The stats endpoint: Prometheus text, summed over the workers."""

import time

from harness import Client, build_request, settle, simple, slack, wait_until

METRICS = [
    "weir_requests_total", "weir_responses_total", "weir_client_connections_total",
    "weir_client_connections_active", "weir_client_bytes_received_total",
    "weir_client_bytes_sent_total", "weir_upstream_connects_total",
    "weir_upstream_reuses_total", "weir_errors_total", "weir_slab_bytes_in_use",
    "weir_workers_alive", "weir_worker_restarts_total",
]
KINDS = ["bad_request", "bad_framing", "no_route", "header_timeout", "body_timeout",
         "body_too_large", "uri_too_long", "headers_too_large", "upstream_refused",
         "upstream_closed", "upstream_bad_response", "no_server", "upstream_timeout",
         "client_closed", "client_timeout", "response_cut", "no_memory"]


def test_the_stats_endpoint_exports_every_documented_metric(weir):
    m = weir.metrics()
    missing = [n for n in METRICS if n not in m.names()]
    assert missing == [], missing
    for cls in ("1xx", "2xx", "3xx", "4xx", "5xx"):
        assert m.has("weir_responses_total", **{"class": cls}), cls
    missing = [k for k in KINDS if not m.has("weir_errors_total", kind=k)]
    assert missing == [], missing
    assert m("weir_workers_alive") == 2
    assert "# TYPE weir_requests_total counter" in m.text


def test_the_stats_endpoint_answers_404_for_other_paths(weir):
    with Client(weir.stats_port) as c:
        r = c.request("GET", "/nope", headers=[("Connection", "close")])
    assert r.status == 404


def test_requests_and_responses_are_counted_over_all_workers(weir_factory, origin):
    w = simple(weir_factory, origin, workers=2)
    m0 = w.metrics()
    for _ in range(10):  # separate connections land on both workers
        assert w.get("/status/200").status == 200
    for _ in range(3):
        assert w.get("/status/503").status == 503
    assert w.get("/status/302").status == 302
    settle()
    m1 = w.metrics()

    def d(name, **labels):
        return m1(name, **labels) - m0(name, **labels)
    assert d("weir_requests_total") == 14
    assert d("weir_responses_total", **{"class": "2xx"}) == 10
    assert d("weir_responses_total", **{"class": "5xx"}) == 3
    assert d("weir_responses_total", **{"class": "3xx"}) == 1
    assert d("weir_client_connections_total") == 14


def test_active_client_connections_go_up_and_back_down(weir):
    base = weir.metrics()("weir_client_connections_active")
    clients = [Client(weir.port) for _ in range(5)]
    for c in clients:
        assert c.request("GET", "/").status == 200
    wait_until(lambda: weir.metrics()("weir_client_connections_active") == base + 5, slack(2),
               what="5 more active connections")
    for c in clients:
        c.close()
    wait_until(lambda: weir.metrics()("weir_client_connections_active") == base, slack(2),
               what="active connections back to %d" % base)


def test_client_bytes_are_counted_both_ways(weir):
    m0 = weir.metrics()
    req = build_request("POST", "/upload", body=b"b" * 10000)
    with weir.client() as c:
        c.send(req)
        r = c.read_response()
        assert r.status == 200
        c.send(build_request("GET", "/bytes/50000"))
        r2 = c.read_response()
    settle()
    m1 = weir.metrics()
    recv = m1("weir_client_bytes_received_total") - m0("weir_client_bytes_received_total")
    sent = m1("weir_client_bytes_sent_total") - m0("weir_client_bytes_sent_total")
    assert recv >= len(req) + 10, recv
    assert recv < len(req) + 1000, recv
    assert sent >= len(r.body) + 50000 + len(r2.raw_head), sent
    assert sent < 50000 + 5000, sent


def test_slab_memory_in_use_returns_to_its_level_after_connections_close(weir_factory, origin):
    weir = simple(weir_factory, origin, upstream_opts={"keepalive": 0})
    base = weir.metrics()("weir_slab_bytes_in_use")
    clients = [Client(weir.port) for _ in range(20)]
    for c in clients:
        c.send(build_request("GET", "/slow/300"))
    for c in clients:
        assert c.read_response().status == 200
        c.close()
    wait_until(lambda: weir.metrics()("weir_slab_bytes_in_use") <= base, slack(3),
               what="slab bytes back to %d" % base)


def test_a_request_waiting_on_a_slow_upstream_holds_at_most_8_kib_of_slab(weir_factory, origin):
    """Memory per request in flight: the connection, the request with its
    header array, the upstream connection and the heads, sized to what they
    hold (no 16 KiB buffer per head, no idle input buffer)."""
    n = 200
    weir = simple(weir_factory, origin, workers=1)
    assert weir.get("/echo").status == 200  # the classes a request uses exist
    time.sleep(slack(1.2))  # the gauge is sampled once a second
    base = weir.metrics()("weir_slab_bytes_in_use")
    clients = [Client(weir.port) for _ in range(n)]
    try:
        for c in clients:
            c.send(build_request("GET", "/slow/15000"))
        wait_until(lambda: len(origin.requests("/slow/15000")) >= n, slack(10),
                   what="%d requests waiting at the origin" % n)
        time.sleep(slack(1.2))
        held = weir.metrics()("weir_slab_bytes_in_use") - base
    finally:
        for c in clients:
            c.close()
    print("slab bytes per request in flight: %.0f" % (held / n))
    assert held / n <= 8192, "%.0f slab bytes per request in flight" % (held / n)
