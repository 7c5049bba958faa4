"""Header handling: hop-by-hop headers removed both ways, X-Forwarded-For,
X-Forwarded-Proto and Via added, everything else passed through as sent."""

import os
import time

from harness import build_request, header_values, proc_stat, simple


def echo(w, headers=(), target="/echo", host="app.test", version="1.1"):
    with w.client() as c:
        r = c.request("GET", target, host=host, headers=headers, version=version)
    assert r.status == 200, r
    return r.json()


def joined(entry_headers, name):
    """All values of <name> as one comma-separated list (RFC 9110 5.3)."""
    vals = [v for n, v in entry_headers if n.lower() == name.lower()]
    items = []
    for v in vals:
        items += [i.strip() for i in v.split(",") if i.strip()]
    return items


def names(entry_headers):
    return [n.lower() for n, _ in entry_headers]


def test_hop_by_hop_request_headers_are_not_forwarded(weir):
    j = echo(weir, headers=[
        ("Connection", "keep-alive, X-Hop-A, x-hop-b"),
        ("X-Hop-A", "1"), ("X-Hop-B", "2"),
        ("Keep-Alive", "timeout=5"),
        ("TE", "gzip, deflate"),  # "trailers" alone is forwarded (test_trailers)
        ("Trailer", "X-Checksum"),
        ("Upgrade", "foo/1"),
        ("Proxy-Authorization", "Basic Zm9vOmJhcg=="),
        ("Proxy-Connection", "keep-alive"),
        ("X-End-To-End", "kept"),
    ])
    got = names(j["headers"])
    for h in ("x-hop-a", "x-hop-b", "keep-alive", "te", "trailer", "upgrade",
              "proxy-authorization", "proxy-connection"):
        assert h not in got, (h, j["headers"])
    assert ["X-End-To-End", "kept"] in j["headers"]
    # weir's own Connection header to the origin, if any, lists none of the client's tokens
    for v in header_values(j, "connection"):
        assert "x-hop" not in v.lower()


def test_x_forwarded_for_is_added_with_the_client_address(weir):
    j = echo(weir)
    assert header_values(j, "x-forwarded-for") == ["127.0.0.1"]


def test_x_forwarded_for_is_appended_to_an_existing_one(weir):
    j = echo(weir, headers=[("X-Forwarded-For", "203.0.113.7")])
    assert joined(j["headers"], "x-forwarded-for") == ["203.0.113.7", "127.0.0.1"]
    assert len(header_values(j, "x-forwarded-for")) == 1
    assert header_values(j, "x-forwarded-for") == ["203.0.113.7, 127.0.0.1"]


def test_x_forwarded_for_keeps_every_earlier_hop_in_order(weir):
    j = echo(weir, headers=[("X-Forwarded-For", "198.51.100.1, 198.51.100.2"),
                            ("X-Forwarded-For", "198.51.100.3")])
    assert joined(j["headers"], "x-forwarded-for") == [
        "198.51.100.1", "198.51.100.2", "198.51.100.3", "127.0.0.1"]


def test_x_forwarded_proto_http_is_added_once(weir):
    j = echo(weir)
    assert header_values(j, "x-forwarded-proto") == ["http"]


def test_a_client_supplied_x_forwarded_proto_does_not_survive_alongside_weirs(weir):
    j = echo(weir, headers=[("X-Forwarded-Proto", "https")])
    assert header_values(j, "x-forwarded-proto") == ["http"]


def test_via_is_added(weir):
    j = echo(weir)
    assert header_values(j, "via") == ["1.1 weir"]


def test_via_is_appended_to_an_existing_one(weir):
    j = echo(weir, headers=[("Via", "1.0 fred")])
    assert joined(j["headers"], "via") == ["1.0 fred", "1.1 weir"]


def test_host_reaches_the_origin_exactly_as_the_client_sent_it(weir):
    j = echo(weir, host="App.Example.COM:8443")
    assert header_values(j, "host") == ["App.Example.COM:8443"]


def test_a_normal_request_target_reaches_the_origin_byte_for_byte(weir):
    target = "/echo/a%20b/c.d/.e/%2F?q=a+b&x=%2f%2e%2e/../&empty=&utf=%C3%A9"
    j = echo(weir, target=target)
    assert j["target"] == target
    assert j["method"] == "GET"


def test_the_path_reaches_the_origin_normalised_and_the_query_as_sent(weir):
    # dot segments removed, %7e decoded, %c3%a9 kept in upper case; the
    # query is not part of the path (test_routing.py has the rest)
    j = echo(weir, target="/echo/a%20b/./c/../%7ed/%c3%a9?q=/./../&x=%2e")
    assert j["target"] == "/echo/a%20b/~d/%C3%A9?q=/./../&x=%2e"


def test_end_to_end_headers_keep_their_order_case_and_duplicates(weir):
    sent = [("X-First", "1"), ("x-dup", "a"), ("Accept", "text/html"),
            ("X-Dup", "b"), ("Cookie", "c=1"), ("X-Last", "  spaced value")]
    j = echo(weir, headers=sent)
    forwarded = [(n, v) for n, v in j["headers"]
                 if n.lower() in {"x-first", "x-dup", "accept", "cookie", "x-last"}]
    assert forwarded == [("X-First", "1"), ("x-dup", "a"), ("Accept", "text/html"),
                         ("X-Dup", "b"), ("Cookie", "c=1"), ("X-Last", "spaced value")]


def test_a_large_header_value_is_forwarded_whole(weir):
    v = "v" * 8000
    j = echo(weir, headers=[("X-Large", v)])
    assert header_values(j, "x-large") == [v]


def test_the_request_to_the_origin_is_http11(weir, origin):
    echo(weir, version="1.0", headers=[("Host", "h10.test")], host=None)
    assert origin.requests("/echo")[-1]["version"] == "1.1"


def test_hop_by_hop_response_headers_are_not_passed_to_the_client(weir):
    with weir.client() as c:
        r = c.request("GET", "/respheaders")
        assert r.status == 200 and r.body == b"headers\n"
        got = [n.lower() for n, _ in r.headers]
        for h in ("x-hop-a", "x-hop-b", "keep-alive", "proxy-connection"):
            assert h not in got, (h, r.headers)
        for v in r.get_all("connection"):
            assert "x-hop" not in v.lower()
        assert r.get("X-End-To-End") == "kept"
        assert r.get("Cache-Control") == "no-store"
        assert r.get("X-Origin") == "A"
        # a response that is still keep-alive
        assert c.request("GET", "/bytes/1").body == b"x"


def test_repeated_response_headers_such_as_set_cookie_pass_in_order(weir):
    r = weir.get("/respheaders")
    assert r.get_all("Set-Cookie") == ["a=1; Path=/", "b=2; Path=/"]


def test_a_response_never_carries_two_framing_headers(weir):
    with weir.client() as c:
        for target in ("/bytes/10", "/chunked/10", "/close/10", "/respheaders", "/status/204"):
            r = c.request("GET", target)
            assert not (r.has("Content-Length") and r.has("Transfer-Encoding")), r
            assert len(r.get_all("Content-Length")) <= 1, r
            assert len(r.get_all("Transfer-Encoding")) <= 1, r


# ---- headers weir vouches for (issue 10, item 7) ---------------------------
#
# A backend behind CGI, WSGI or PHP reads X_Forwarded_Proto and
# X-Forwarded-Proto as the same variable (HTTP_X_FORWARDED_PROTO): a header
# weir asserts is dropped from a client in every such spelling, and counted.


def test_a_forged_x_forwarded_proto_in_any_spelling_never_reaches_the_origin(weir):
    before = weir.metrics().error("forged_header")
    j = echo(weir, headers=[("X-Forwarded-Proto", "https"), ("X_Forwarded_Proto", "https"),
                            ("x_forwarded-PROTO", "https")])
    assert [(n, v) for n, v in j["headers"]
            if n.lower().replace("_", "-") == "x-forwarded-proto"] == [("X-Forwarded-Proto", "http")]
    assert weir.metrics().error("forged_header") == before + 3


def test_an_underscore_x_forwarded_for_is_dropped_and_the_real_one_appended_to(weir):
    before = weir.metrics().error("forged_header")
    j = echo(weir, headers=[("X_Forwarded_For", "10.6.6.6"), ("X-Forwarded-For", "203.0.113.7")])
    assert [(n, v) for n, v in j["headers"] if n.lower().replace("_", "-") == "x-forwarded-for"] == [
        ("X-Forwarded-For", "203.0.113.7, 127.0.0.1")]
    assert weir.metrics().error("forged_header") == before + 1


def test_early_data_from_a_client_is_kept_rfc_8470(weir):
    before = weir.metrics().error("forged_header")
    j = echo(weir, headers=[("Early-Data", "1")])
    assert header_values(j, "early-data") == ["1"]
    assert weir.metrics().error("forged_header") == before


def test_forged_headers_are_counted_each_and_logged_at_info_at_most_once_a_second(weir):
    before = weir.metrics().error("forged_header")
    t0 = time.monotonic()
    for _ in range(50):
        echo(weir, headers=[("X_Forwarded_Proto", "https")])
    elapsed = time.monotonic() - t0
    assert weir.metrics().error("forged_header") == before + 50
    lines = [l for l in weir.error_lines() if "only weir sets" in l]
    # one line a second per worker at most (two workers)
    assert 1 <= len(lines) <= 2 * (int(elapsed) + 1), lines
    assert all("[info]" in l and "X_Forwarded_Proto" in l for l in lines), lines


def test_sixteen_connection_tokens_pass_and_more_get_400(weir_factory, origin):
    w = simple(weir_factory, origin, workers=1)
    names = ["X-Hop-%d" % i for i in range(16)]
    j = echo(w, headers=[("Connection", ", ".join(names))] + [(n, "1") for n in names] + [("X-Kept", "1")])
    assert not [n for n, _ in j["headers"] if n.lower().startswith("x-hop-")]
    assert header_values(j, "x-kept") == ["1"]
    m0 = w.metrics()
    with w.client() as c:
        r = c.request("GET", "/echo", headers=[("Connection", ", ".join(names + ["X-Hop-16"]))])
    assert r.status == 400
    assert w.metrics().error("connection_tokens") - m0.error("connection_tokens") == 1


def cpu_seconds(pid):
    f = proc_stat(pid)
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def test_connection_tokens_times_headers_cannot_burn_the_worker(weir_factory, origin):
    """Every Connection token was compared with every header name: 18,000
    tokens and 990 headers in a 64 KiB head are 18 million comparisons per
    request. Such a head is answered 400 at once."""
    w = simple(weir_factory, origin, workers=1, limits={"headers": 1000, "header_size": "64k"})
    (worker,) = w.worker_pids()
    headers = [("Connection", ",".join(["zz"] * 18000))] + [("a%d" % (i % 10), "1") for i in range(990)]
    req = build_request("GET", "/echo", headers=headers)
    assert len(req) < 65536
    cpu0 = cpu_seconds(worker)
    statuses = set()
    for _ in range(100):
        with w.client() as c:
            c.send(req)
            statuses.add(c.read_response().status)
    cpu = cpu_seconds(worker) - cpu0
    print("worker CPU for 100 requests: %.2f s" % cpu)
    assert statuses == {400}, statuses
    assert cpu < 0.5, "the worker spent %.2f s of CPU on 100 requests" % cpu


# ---- lookalikes of the headers weir owns ------------------------------------
#
# CGI, WSGI and PHP read Transfer_Encoding as HTTP_TRANSFER_ENCODING, and some
# frameworks act on it: a request header that, '_' read as '-', names one of
# the framing, hop-by-hop or Host headers weir owns is dropped and counted as
# forged_header. Other underscore names pass unless underscores_in_headers is
# false (nginx's default drops them all).


def test_underscore_lookalikes_of_framing_hop_by_hop_and_host_never_reach_the_origin(weir):
    before = weir.metrics().error("forged_header")
    j = echo(weir, headers=[("Transfer_Encoding", "chunked"), ("Content_Length", "5"),
                            ("Proxy_Connection", "keep-alive"), ("Keep_Alive", "300"), ("Trailer_", "x"),
                            ("x", "y"), ("CONNECTION_", "x"), ("Proxy_Authorization", "x"),
                            ("X_Api_Key", "k")])
    got, hs = names(j["headers"]), [tuple(h) for h in j["headers"]]
    for n in ("transfer_encoding", "content_length", "proxy_connection", "keep_alive", "proxy_authorization"):
        assert n not in got, j["headers"]
    assert ("X_Api_Key", "k") in hs and ("x", "y") in hs
    # Trailer_ and CONNECTION_ are no lookalikes ("trailer-" is no name weir owns)
    assert "trailer_" in got and "connection_" in got
    assert weir.metrics().error("forged_header") == before + 5


def test_names_without_a_dash_such_as_host_have_no_underscore_lookalike(weir):
    before = weir.metrics().error("forged_header")
    j = echo(weir, headers=[("host_", "evil.test")])
    assert "host_" in names(j["headers"])  # not a lookalike: "host-" is no name
    j = echo(weir, headers=[("Ho_st", "evil.test")])
    assert "ho_st" in names(j["headers"])
    assert weir.metrics().error("forged_header") == before


def test_underscores_in_headers_false_drops_every_underscore_name(weir_factory, origin):
    w = simple(weir_factory, origin, extra="underscores_in_headers = false;")
    before = w.metrics()
    j = echo(w, headers=[("X_Api_Key", "k"), ("X-Api-Key", "ok"), ("Transfer_Encoding", "chunked")])
    got = names(j["headers"])
    assert "x_api_key" not in got and "transfer_encoding" not in got
    assert ("X-Api-Key", "ok") in [tuple(h) for h in j["headers"]]
    after = w.metrics()
    assert after.error("forged_header") == before.error("forged_header") + 1
    assert after.error("underscore_header") == before.error("underscore_header") + 1


def test_an_upstreams_underscore_framing_lookalike_reaches_the_client_and_frames_nothing(weir):
    with weir.client() as c:
        r = c.request("GET", "/lookalikes")
        assert r.status == 200, r
        assert r.get("Transfer_Encoding") == "chunked" and r.get("Content_Length") == "999"
        assert r.body == b"lookalikes\n"
        # the connection is still in step: weir framed the response itself
        assert c.request("GET", "/echo").status == 200
