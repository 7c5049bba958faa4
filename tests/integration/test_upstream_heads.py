"""Heads to and from upstreams through the client codecs (worker/h1/h1.h:
codec): the request head made by the codec of the group's protocol from
the core's message (HTTP/2: fields, names lowered where they are copied,
never in place), the response head read by it into a message with the
same checks whatever the protocol, and what reads the head back (the
access log, $request_uri) seeing the target as forwarded."""

import json

import pytest

from harness import slack, wait_until
from h2util import H2Client
from test_h2_upstream import get, h2o  # noqa: F401 (a fixture)


def two_protocols(weir_factory, o, origin, route_extra="", **kw):
    """weir with an HTTP/2 group ("h2", /h2/...) and an HTTP/1 one ("a",
    /h1/...), both routes stripping their prefix and with <route_extra>."""
    ups = [{"name": "h2", "servers": [o.addr], "raw": 'protocol = "h2c";'},
           {"name": "a", "servers": [origin.addr]}]
    routes = [{"path": "/h2/", "upstream": "h2", "extra": "strip_prefix = true; " + route_extra},
              {"path": "/h1/", "upstream": "a", "extra": "strip_prefix = true; " + route_extra}]
    return weir_factory(upstreams=ups, routes=routes, **kw)


@pytest.mark.parametrize("kind", ["upper", "connection", "keepalive", "te", "badlength", "twolengths"])
def test_an_h2_upstreams_forbidden_field_is_a_502_and_the_session_lives_on(weir_factory, h2o, kind):
    o = h2o()
    ups = [{"name": "h2", "servers": [o.addr], "raw": 'protocol = "h2c";'}]
    w = weir_factory(upstreams=ups, routes=[{"path": "/", "upstream": "h2"}], workers=1)
    r = get(w.port, "/fields/" + kind)
    assert r.status == 502, r
    r = get(w.port, "/fields/fine")
    assert r.status == 200 and r.body == b"ok" and r.get("x-fine") == "1", r


def test_a_response_without_length_from_h2_ends_with_its_stream(weir_factory, h2o):
    o = h2o()
    ups = [{"name": "h2", "servers": [o.addr], "raw": 'protocol = "h2c";'}]
    w = weir_factory(upstreams=ups, routes=[{"path": "/", "upstream": "h2"}], workers=1)
    r = get(w.port, "/bytes/5000?nolength")
    assert r.status == 200 and r.chunked and len(r.body) == 5000, r
    # END_STREAM on the HEADERS: an empty body of known length
    r = get(w.port, "/bytes/0?nolength")
    assert r.status == 200 and not r.chunked and r.get("content-length") == "0" and r.body == b"", r
    # a HEAD's content-length describes the body it does not carry
    r = get(w.port, "/bytes/10", method="HEAD")
    assert r.status == 200 and r.get("content-length") == "10" and r.body == b"", r
    h = H2Client(w.port)
    rs = h.wait([h.request("/bytes/3000?nolength")], slack(10))
    assert rs[0]["status"] == 200 and len(rs[0]["body"]) == 3000, rs[0]
    h.close()


def test_header_rules_with_literal_names_reach_an_h2_upstream_lowered(weir_factory, h2o, origin):
    """A rule's name is the route table's (shared, never written to): the
    HTTP/2 codec lowers a copy of it. Both protocols, three times each, on
    one worker that must never restart."""
    o = h2o()
    rules = ('headers = { request = { set = { X-Rule-Set = "literal"; }; '
             'add = { X-Rule-Add = "$method"; }; }; }; ')
    w = two_protocols(weir_factory, o, origin, rules, workers=1)
    for _ in range(3):
        r = get(w.port, "/h2/echo", headers=[("X-Rule-Set", "the client's")])
        assert r.status == 200, r
        hs = [tuple(h) for h in json.loads(r.body)["headers"]]
        assert ("x-rule-set", "literal") in hs and ("x-rule-add", "GET") in hs, hs
        assert not any(n == "x-rule-set" and v != "literal" for n, v in hs), hs
        r = get(w.port, "/h1/echo")
        assert r.status == 200, r
        hs = json.loads(r.body)["headers"]
        assert ["X-Rule-Set", "literal"] in hs and ["X-Rule-Add", "GET"] in hs, hs
    assert not any("exited" in l or "signal" in l for l in w.error_lines()), w.error_lines()


def test_the_access_log_and_request_uri_show_the_target_forwarded_to_either_protocol(weir_factory, h2o, origin):
    o = h2o()
    rules = 'headers = { response = { set = { X-Uri = "$request_uri"; X-Path = "$path"; }; }; }; '
    w = two_protocols(weir_factory, o, origin, rules, workers=1,
                      log_extra='format = "$request_uri|$path|$query_string|$host"; ')
    for proto in ("h2", "h1"):
        r = get(w.port, "/%s/echo/x?q=1" % proto)
        assert r.status == 200, r
        e = json.loads(r.body)
        assert e.get("path", e.get("target")) == "/echo/x?q=1", e
        assert r.get("x-uri") == "/echo/x?q=1" and r.get("x-path") == "/echo/x", r
    lines = wait_until(lambda: (lambda ls: ls if len(ls) >= 2 else None)(w.access_lines()), slack(3),
                       what="two log lines")
    assert lines[:2] == ["/echo/x?q=1|/echo/x|q=1|localhost"] * 2, lines


def test_an_h2_request_head_carries_what_weir_adds(weir_factory, h2o):
    o = h2o()
    ups = [{"name": "h2", "servers": [o.addr], "raw": 'protocol = "h2c";'}]
    w = weir_factory(upstreams=ups, routes=[{"path": "/", "upstream": "h2"}], extra="request_id = true;",
                     workers=1)
    r = get(w.port, "/echo", headers=[("X-Forwarded-For", "10.0.0.1"), ("Via", "1.0 other"),
                                      ("TE", "trailers, deflate"), ("Keep-Alive", "5"), ("X_Api_Key", "k")])
    assert r.status == 200, r
    e = json.loads(r.body)
    hs = [tuple(h) for h in e["headers"]]
    d = dict(hs)
    assert d["x-forwarded-for"] == "10.0.0.1, 127.0.0.1" and d["via"] == "1.0 other, 1.1 weir", hs
    assert d["x-forwarded-proto"] == "http" and d["te"] == "trailers" and d["x_api_key"] == "k", hs
    assert len(d["x-request-id"]) == 32 and "keep-alive" not in d and e["authority"] == "localhost", hs
    assert [n for n, _ in hs] == [n.lower() for n, _ in hs]


@pytest.mark.parametrize("primary", ["h1", "h2"])
def test_an_open_breaker_sends_to_a_backup_group_of_the_other_protocol(weir_factory, h2o, origin, primary):
    """The head is made for the route's group while the request's spans
    are whole; the backup group's protocol gets its own head then, swapped
    in when the request goes there."""
    o = h2o()
    bk = 'breaker = { min_requests = 3; error_percent = 50; open_time = "20s"; backup = "spare"; };'
    h1 = {"servers": [origin.addr], "max_fails": 0}
    h2 = {"servers": [o.addr], "max_fails": 0, "raw": 'protocol = "h2c"; '}
    g, spare = (h1, h2) if primary == "h1" else (h2, h1)
    g = dict(g, name="g", raw=g.get("raw", "") + bk)
    spare = dict(spare, name="spare")
    w = weir_factory(upstreams=[g, spare], routes=[{"path": "/", "upstream": "g"}],
                     workers=1)
    trip = "/status/500" if primary == "h1" else "/rst"
    for _ in range(3):
        assert get(w.port, trip).status in (500, 502)
    for _ in range(3):
        r = get(w.port, "/echo/x?q=1", headers=[("X-Thing", "One")])
        assert r.status == 200, r
        e = json.loads(r.body)
        if primary == "h1":  # to the HTTP/2 spare: fields, lower case
            assert e["path"] == "/echo/x?q=1" and ("x-thing", "One") in [tuple(h) for h in e["headers"]], e
        else:  # to the HTTP/1 spare: text
            assert e["target"] == "/echo/x?q=1" and ["X-Thing", "One"] in e["headers"], e
    assert w.metrics()("weir_upstream_rejected_total", upstream="g", by="breaker_open") == 3
