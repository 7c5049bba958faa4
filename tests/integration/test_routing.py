"""Routing: host exact > wildcard > any, longest path prefix within the chosen
host, 404 when nothing matches, weighted round robin within a group."""

import collections

from harness import Client, error_response_ok, settle, slack, wait_until


def three_origins(origin_factory, weir_factory, routes, **kw):
    a, b, c = origin_factory("A"), origin_factory("B"), origin_factory("C")
    w = weir_factory(upstreams=[{"name": "a", "servers": [a.addr]},
                                {"name": "b", "servers": [b.addr]},
                                {"name": "c", "servers": [c.addr]}],
                     routes=routes, **kw)
    return w, a, b, c


SPEC_ROUTES = [
    {"host": "api.example.com", "path": "/v1/", "upstream": "a"},
    {"host": "*.example.com", "path": "/", "upstream": "b"},
    {"path": "/", "upstream": "c"},
]


def origin_of(w, host, target="/echo"):
    r = w.get(target, host=host)
    assert r.status == 200, r
    return r.get("X-Origin")


def test_an_exact_host_route_beats_a_wildcard_and_a_catch_all(origin_factory, weir_factory):
    w, *_ = three_origins(origin_factory, weir_factory, SPEC_ROUTES)
    assert origin_of(w, "api.example.com", "/v1/users") == "A"


def test_a_wildcard_host_route_beats_the_catch_all(origin_factory, weir_factory):
    w, *_ = three_origins(origin_factory, weir_factory, SPEC_ROUTES)
    assert origin_of(w, "www.example.com", "/anything") == "B"
    assert origin_of(w, "a.b.example.com", "/") == "B"


def test_a_host_that_matches_no_pattern_goes_to_the_catch_all(origin_factory, weir_factory):
    w, *_ = three_origins(origin_factory, weir_factory, SPEC_ROUTES)
    assert origin_of(w, "other.org") == "C"
    assert origin_of(w, "127.0.0.1:%d" % w.port) == "C"


def test_a_wildcard_does_not_match_the_bare_domain(origin_factory, weir_factory):
    w, *_ = three_origins(origin_factory, weir_factory, SPEC_ROUTES)
    assert origin_of(w, "example.com") == "C"
    assert origin_of(w, "notexample.com") == "C"


def test_host_matching_ignores_case_and_the_port(origin_factory, weir_factory):
    w, *_ = three_origins(origin_factory, weir_factory, SPEC_ROUTES)
    assert origin_of(w, "API.Example.COM:8080", "/v1/x") == "A"
    assert origin_of(w, "WWW.EXAMPLE.com:443", "/") == "B"


def test_the_longest_path_prefix_wins_within_a_host(origin_factory, weir_factory):
    routes = [
        {"host": "h.test", "path": "/", "upstream": "a"},
        {"host": "h.test", "path": "/v1/", "upstream": "b"},
        {"host": "h.test", "path": "/v1/admin/", "upstream": "c"},
    ]
    w, *_ = three_origins(origin_factory, weir_factory, routes)
    assert origin_of(w, "h.test", "/v1/admin/x") == "C"
    assert origin_of(w, "h.test", "/v1/users?admin/") == "B"
    assert origin_of(w, "h.test", "/v1/") == "B"
    assert origin_of(w, "h.test", "/v1") == "A"
    assert origin_of(w, "h.test", "/v2/x") == "A"


def test_route_order_in_the_file_does_not_change_longest_prefix_matching(origin_factory, weir_factory):
    routes = [
        {"path": "/v1/admin/", "upstream": "c"},
        {"path": "/", "upstream": "a"},
        {"path": "/v1/", "upstream": "b"},
    ]
    w, *_ = three_origins(origin_factory, weir_factory, routes)
    assert origin_of(w, "x", "/v1/admin/y") == "C"
    assert origin_of(w, "x", "/v1/y") == "B"
    assert origin_of(w, "x", "/y") == "A"


def test_a_request_matching_no_route_gets_404_and_never_reaches_an_origin(origin_factory, weir_factory):
    routes = [{"host": "only.test", "path": "/", "upstream": "a"},
              {"host": "*.example.com", "path": "/api/", "upstream": "b"}]
    w, a, b, c = three_origins(origin_factory, weir_factory, routes)
    m0 = w.metrics()
    n0 = len(w.error_lines())
    with w.client() as cl:
        r = cl.request("GET", "/x", host="other.test")
        error_response_ok(r, 404, "Not Found", close=False)
        r = cl.request("GET", "/web/x", host="www.example.com")
        error_response_ok(r, 404, "Not Found", close=False)
        # a 404 keeps the connection: the next request on it is served
        r = cl.request("GET", "/", host="only.test")
        assert r.status == 200 and r.get("X-Origin") == "A"
    settle()
    assert a.requests("/x") == [] and b.requests() == [] and c.requests() == []
    m1 = w.metrics()
    assert m1.error("no_route") - m0.error("no_route") == 2
    wait_until(lambda: len(w.error_lines()) >= n0 + 2, slack(2), what="2 error-log lines")


def test_a_host_whose_routes_match_no_path_gets_404_rather_than_the_catch_all(origin_factory, weir_factory):
    # host selection first, then the longest prefix within that host
    routes = [{"host": "api.example.com", "path": "/v1/", "upstream": "a"},
              {"path": "/", "upstream": "c"}]
    w, a, b, c = three_origins(origin_factory, weir_factory, routes)
    r = w.get("/v2/x", host="api.example.com")
    assert r.status == 404, r
    assert c.requests() == []


def test_weighted_round_robin_splits_requests_by_weight(origin_factory, weir_factory):
    a, b = origin_factory("A"), origin_factory("B")
    w = weir_factory(workers=1,
                     upstreams=[{"name": "g", "servers": [(a.addr, 3), (b.addr, 1)]}],
                     routes=[{"path": "/", "upstream": "g"}])
    seen = collections.Counter()
    with Client(w.port) as cl:
        for _ in range(40):
            r = cl.request("GET", "/echo")
            assert r.status == 200
            seen[r.get("X-Origin")] += 1
    assert seen == {"A": 30, "B": 10}, seen


def test_equal_weights_alternate_between_servers(origin_factory, weir_factory):
    a, b = origin_factory("A"), origin_factory("B")
    w = weir_factory(workers=1,
                     upstreams=[{"name": "g", "servers": [a.addr, b.addr]}],
                     routes=[{"path": "/", "upstream": "g"}])
    order = []
    with Client(w.port) as cl:
        for _ in range(10):
            order.append(cl.request("GET", "/").get("X-Origin"))
    assert order.count("A") == 5 and order.count("B") == 5, order
    assert all(order[i] != order[i + 1] for i in range(9)), order


def test_an_ipv6_literal_host_goes_to_the_catch_all(origin_factory, weir_factory):
    w, *_ = three_origins(origin_factory, weir_factory, SPEC_ROUTES)
    assert origin_of(w, "[::1]:8080") == "C"
    assert origin_of(w, "[::1]") == "C"


# ---- the path routed is the path forwarded (issue 10, item 13) -------------
#
# Routes see the path as RFC 3986 6.2.2 normalises it (unreserved
# percent-encodings decoded, dot segments removed); the upstream gets that
# same path, so "/public/../internal" can never reach an upstream under the
# /public/ route.

DOT_ROUTES = [
    {"path": "/public/", "upstream": "a"},
    {"path": "/internal/", "upstream": "b"},
    {"path": "/", "upstream": "c"},
]


def goes(w, origins, cases):
    """Each (target, origin name, target that origin saw) of <cases>."""
    for target, name, seen in cases:
        with Client(w.port) as cl:
            r = cl.request("GET", target, host="h.test")
        assert r.status == 200 and r.get("X-Origin") == name, (target, r)
        got = origins[name].requests()
        assert got and got[-1]["target"] == seen, (target, got[-1:])


def last_target(o):
    reqs = o.requests()
    assert reqs, "origin %s got nothing" % o.name
    return reqs[-1]["target"]


def test_dot_segments_are_resolved_before_routing_and_forwarding(origin_factory, weir_factory):
    w, a, b, c = three_origins(origin_factory, weir_factory, DOT_ROUTES)
    goes(w, {"A": a, "B": b}, [
        ("/public/../internal/x", "B", "/internal/x"),
        ("/public/./a/../../internal/y?q=/../z", "B", "/internal/y?q=/../z"),  # the query as sent
        ("/public/x/.", "A", "/public/x/"),
    ])
    assert a.requests("/public/../") == [] and a.requests("/internal") == []
    # the access log shows the target as forwarded
    wait_until(lambda: any('"GET /internal/x HTTP/1.1" 200' in l for l in w.access_lines()), slack(3),
               what="the access line of the forwarded target")


def test_percent_encoded_dots_and_unreserved_characters_are_decoded(origin_factory, weir_factory):
    w, a, b, c = three_origins(origin_factory, weir_factory, DOT_ROUTES)
    goes(w, {"A": a, "B": b}, [
        ("/public/%2e%2e/internal/x", "B", "/internal/x"),
        ("/public/%2E./internal/%7euser", "B", "/internal/~user"),
        ("/%70ublic/x", "A", "/public/x"),  # %70 is 'p'
    ])
    assert b.requests("/public") == []


def test_an_encoded_slash_stays_encoded_and_in_its_segment(origin_factory, weir_factory):
    w, a, b, c = three_origins(origin_factory, weir_factory, DOT_ROUTES)
    goes(w, {"A": a}, [
        ("/public/a%2Fb", "A", "/public/a%2Fb"),
        # hex digits of a kept encoding in upper case (RFC 3986 6.2.2.1)
        ("/public/a%2f..%2f..%2finternal?x=%2e%2e", "A", "/public/a%2F..%2F..%2Finternal?x=%2e%2e"),
    ])


def test_an_absolute_form_target_is_normalised_too(origin_factory, weir_factory):
    w, a, b, c = three_origins(origin_factory, weir_factory, DOT_ROUTES)
    with Client(w.port) as cl:
        r = cl.request("GET", "http://h.test/public/%2e%2e/internal/x?y", host="h.test")
        assert r.status == 200 and r.get("X-Origin") == "B", r
        assert last_target(b) == "/internal/x?y"
        # "*" is no path: not normalised, and routed as before (no route
        # prefix matches it: 404, not 400)
        r = cl.request("OPTIONS", "*", host="h.test")
        error_response_ok(r, 404, "Not Found", close=False)
    assert w.metrics().error("bad_path") == 0


def test_a_path_above_the_root_or_badly_encoded_is_refused_with_400(origin_factory, weir_factory):
    w, a, b, c = three_origins(origin_factory, weir_factory, DOT_ROUTES)
    before = w.metrics()
    bad = ["/../etc/passwd", "/public/../../etc", "/%2e%2e/etc", "/public/%zz", "/public/a%", "/public/a%2",
           "/public/a%00b", "http://h.test/../etc"]
    for target in bad:
        with Client(w.port) as cl:
            r = cl.request("GET", target, host="h.test")
            error_response_ok(r, 400, "Bad Request", close=True)
            assert cl.closed_by_peer(), target
    after = w.metrics()
    assert after.error("bad_path") == before.error("bad_path") + len(bad)
    assert after.error("bad_request") == before.error("bad_request")
    assert a.requests() == [] and b.requests() == [] and c.requests() == []
    # the log line names the target as the client sent it
    wait_until(lambda: any('"GET /../etc/passwd HTTP/1.1" 400' in l for l in w.access_lines()), slack(3),
               what="the access line of the refused target")


# ---- paths that some backends read otherwise -------------------------------
#
# A backslash (IIS, ASP.NET, some Java servers read it as '/'), a dot
# segment with parameters (Tomcat and Spring strip ";x" before resolving
# dots) would reach a backend behind the /public/ route as /internal: 400.
# Runs of '/' are merged (merge_slashes, on by default) so that "//internal"
# is routed as the "/internal" most backends read it as.


def test_a_backslash_in_the_path_is_refused_with_400_but_not_in_the_query(origin_factory, weir_factory):
    w, a, b, c = three_origins(origin_factory, weir_factory, DOT_ROUTES)
    before = w.metrics()
    bad = ["/public\\..\\internal/x", "/public%5C..%5Cinternal/x", "/public/a%5cb", "/public/a\\b"]
    for target in bad:
        with Client(w.port) as cl:
            r = cl.request("GET", target, host="h.test")
            error_response_ok(r, 400, "Bad Request", close=True)
    after = w.metrics()
    assert after.error("bad_path") == before.error("bad_path") + len(bad)
    assert a.requests() == [] and b.requests() == [] and c.requests() == []
    goes(w, {"A": a}, [("/public/x?q=a%5Cb", "A", "/public/x?q=a%5Cb")])


def test_a_dot_segment_with_parameters_is_refused_with_400(origin_factory, weir_factory):
    w, a, b, c = three_origins(origin_factory, weir_factory, DOT_ROUTES)
    before = w.metrics()
    bad = ["/public/..;/internal/x", "/public/..;jsessionid=1/internal/x", "/public/.;/x",
           "/public/%2e%2e;/internal/x", "/public/..%3B/internal/x"]
    for target in bad:
        with Client(w.port) as cl:
            r = cl.request("GET", target, host="h.test")
            error_response_ok(r, 400, "Bad Request", close=True)
    assert w.metrics().error("bad_path") == before.error("bad_path") + len(bad)
    assert a.requests() == [] and b.requests() == [] and c.requests() == []
    # parameters on any other segment pass as sent
    goes(w, {"A": a}, [("/public/a;jsessionid=1/b", "A", "/public/a;jsessionid=1/b")])


def test_runs_of_slashes_are_merged_before_routing_and_forwarding(origin_factory, weir_factory):
    routes = [{"path": "/admin/", "upstream": "a"}, {"path": "/", "upstream": "c"}]
    w, a, b, c = three_origins(origin_factory, weir_factory, routes)
    goes(w, {"A": a, "C": c}, [
        ("//admin/x", "A", "/admin/x"),
        ("/admin//x//y?q=//z", "A", "/admin/x/y?q=//z"),  # the query as sent
        ("/x/%2F%2Fadmin/", "C", "/x/%2F%2Fadmin/"),        # encoded slashes are no separators
    ])
    assert c.requests("//") == [] and w.metrics().error("bad_path") == 0


def test_merge_slashes_false_keeps_them(origin_factory, weir_factory):
    routes = [{"path": "/admin/", "upstream": "a"}, {"path": "/", "upstream": "c"}]
    w, a, b, c = three_origins(origin_factory, weir_factory, routes, extra="merge_slashes = false;")
    goes(w, {"C": c}, [("//admin/x", "C", "//admin/x")])
