"""The request of an HTTP/2 stream (worker/h2/h2_stream.c) reaches the core
as a message built from its header fields, held to the HTTP/1 reader's
rules (http_request_begin_fields, worker/h1/h1.h): what HTTP/1 refuses is
refused over HTTP/2 as well, by nghttp2 or by weir, and never reaches the
origin; the limits answer 414, 431 and 413 at the same bounds; cookie
crumbs arrive joined byte for byte."""

import json

import pytest

from harness import fetch_metrics, header_values, slack, wait_until
from h2util import H2Client


def h2_weir(weir_factory, origin, limits=None):
    return weir_factory(upstreams=[{"name": "a", "servers": [origin.addr]}], routes=[{"path": "/", "upstream": "a"}],
                        limits=limits)


# what weir's own checks refuse (nghttp2 lets these through), then bytes
# nghttp2 itself refuses in a value (a reset): neither kind goes upstream
@pytest.mark.parametrize("method,path,headers,by_weir", [
    ("FOO", "/echo", [], True),              # no method of http-parser's table
    ("get", "/echo", [], True),              # a method's case matters
    ("GET", "/echo#frag", [], True),         # a fragment is never sent
    ("GET", "/echo\u00ff", [], True),        # obs-text in the target
    ("GET", "/echo", [("x-a", "a\x7fb")], False),
    ("GET", "/echo", [("x-a", "a\x01b")], False),
    ("GET", "/echo", [("x-a", "\x1b[31m")], False),
], ids=["unknown-method", "lower-case-method", "fragment", "high-byte-target", "del", "soh", "esc"])
def test_what_the_http1_reader_refuses_is_refused_and_never_reaches_the_origin(weir, origin, method, path, headers,
                                                                            by_weir):
    c = H2Client(weir.port)
    before = fetch_metrics(weir.stats_port).error("bad_request")
    r = c.get(path, method=method, headers=headers)
    if by_weir:
        # the HTTP/1 reader's answer, as for a head it refuses
        assert (r["status"], r["body"]) == (400, b"400 Bad Request\n"), r
        assert fetch_metrics(weir.stats_port).error("bad_request") == before + 1
    else:
        assert r["status"] == 400 or (r["status"] is None and r["reset"]), r
    assert c.get("/echo")["status"] == 200  # the connection goes on
    c.close()
    assert [e["target"] for e in origin.requests()] == ["/echo"]


def test_a_path_one_byte_past_uri_size_is_414_and_one_at_it_goes_through(weir_factory, origin):
    w = h2_weir(weir_factory, origin, limits={"uri_size": 1024})
    c = H2Client(w.port)
    at = "/echo?" + "q" * (1024 - 6)
    before = fetch_metrics(w.stats_port).error("uri_too_long")
    assert c.get(at)["status"] == 200
    r = c.get(at + "q")
    assert r["status"] == 414, r
    assert fetch_metrics(w.stats_port).error("uri_too_long") == before + 1
    c.close()
    assert [len(e["target"]) for e in origin.requests()] == [1024]


def test_one_field_past_limits_headers_is_431_and_the_list_at_it_goes_through(weir, origin):
    # limits.headers = 100, each pseudo-header counted as HTTP/2 counts it
    c = H2Client(weir.port)
    r = c.get("/echo", headers=[("x-n-%d" % i, str(i)) for i in range(96)])
    assert r["status"] == 200, r
    assert len([n for n, _ in json.loads(r["body"])["headers"] if n.startswith("x-n-")]) == 96
    r = c.get("/echo", headers=[("x-n-%d" % i, str(i)) for i in range(97)])
    assert r["status"] == 431, r
    c.close()
    assert len(origin.requests("/echo")) == 1


def test_a_content_length_past_body_size_is_413_before_the_body_is_read(weir_factory, origin):
    w = h2_weir(weir_factory, origin, limits={"body_size": 1000})
    c = H2Client(w.port)
    r = c.get("/upload", method="POST", headers=[("content-length", "1000")], body=b"b" * 1000)
    assert r["status"] == 200 and json.loads(r["body"])["body_len"] == 1000, r
    before = fetch_metrics(w.stats_port).error("body_too_large")
    # the body never sent: weir answers from the head alone
    r = c.get("/upload", method="POST", headers=[("content-length", "1001")], end=False)
    assert r["status"] == 413, r
    assert fetch_metrics(w.stats_port).error("body_too_large") == before + 1
    c.close()
    assert len(origin.requests("/upload")) == 1


@pytest.mark.parametrize("crumbs", [
    ["a=1", "", "b=2", "c=3 ; d"],           # joined behind the header records
    ["k%d=%s" % (i, "v" * 1500) for i in range(8)] + ["z=1"],  # past their room: a buffer of their own
], ids=["small", "large"])
def test_cookie_crumbs_arrive_joined_byte_for_byte(weir, origin, crumbs):
    c = H2Client(weir.port)
    hs = [("cookie", v) for v in crumbs[:2]] + [("x-between", "1")] + [("cookie", v) for v in crumbs[2:]]
    r = c.get("/echo", headers=hs)
    assert r["status"] == 200, r
    e = json.loads(r["body"])
    assert header_values(e, "cookie") == ["; ".join(crumbs)]
    assert header_values(e, "x-between") == ["1"]
    c.close()
    assert header_values(origin.requests("/echo")[0], "cookie") == ["; ".join(crumbs)]


def test_the_access_log_has_the_request_line_of_an_http2_request(weir):
    c = H2Client(weir.port)
    assert c.get("/echo/a%2e/../b?x=1", method="HEAD")["status"] == 200
    c.close()
    line = wait_until(lambda: [l for l in weir.access_lines() if "/echo" in l], slack(3), what="log line")
    assert '"HEAD /echo/b?x=1 HTTP/2.0" 200' in line[0], line
