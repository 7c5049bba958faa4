"""Errors weir makes itself about the client's request: their exact shape,
the counters and error-log lines they leave, and the connection handling.
(404 is in test_routing.py, upstream errors in test_upstream_failures.py.)"""

import re
import select
import time

import pytest

from harness import (build_request, chunked, error_response_ok, settle, simple, slack,
                     wait_until)


def counted(w, kind, before, n=1):
    """Asserts weir_errors_total{kind} grew by <n> since the <before> scrape."""
    def grown():
        return w.metrics().error(kind) - before.error(kind) >= n
    wait_until(grown, slack(2), what="weir_errors_total{kind=%r} to grow by %d" % (kind, n))


def logged(w, before_lines):
    wait_until(lambda: len(w.error_lines()) > before_lines, slack(2), what="an error-log line")


def test_a_malformed_request_gets_an_exact_400_and_the_connection_is_closed(weir, origin):
    m0 = weir.metrics()
    n0 = len(weir.error_lines())
    with weir.client() as c:
        c.send(b"GET / HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n")
        r = c.read_response()
        error_response_ok(r, 400, "Bad Request", close=True)
        assert c.closed_by_peer(2)
    counted(weir, "bad_request", m0)
    logged(weir, n0)
    assert origin.entries() == []


def test_garbage_instead_of_a_request_line_gets_400(weir, origin):
    with weir.client() as c:
        c.send(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 40 + b"\r\n\r\n")
        r = c.read_response()
        assert r.status == 400
        assert c.closed_by_peer(2)
    assert origin.entries() == []


def test_an_http11_request_without_host_gets_400(weir, origin):
    with weir.client() as c:
        c.send(b"GET / HTTP/1.1\r\nX-A: 1\r\n\r\n")
        error_response_ok(c.read_response(), 400, "Bad Request", close=True)
        assert c.closed_by_peer(2)
    assert origin.entries() == []


def test_an_http10_request_without_host_is_served(weir, origin):
    with weir.client() as c:
        c.send(b"GET /echo HTTP/1.0\r\n\r\n")
        r = c.read_response()
        assert r.status == 200


def test_an_incomplete_head_gets_408_after_client_header(weir_factory, origin):
    w = simple(weir_factory, origin, timeouts={"client_header": "1s"})
    m0 = w.metrics()
    n0 = len(w.error_lines())
    with w.client() as c:
        t = time.monotonic()
        c.send(b"GET / HTTP/1.1\r\nHost: x\r\n")
        r = c.read_response(timeout=4)
        took = time.monotonic() - t
        error_response_ok(r, 408, "Request Timeout", close=True)
        assert 0.8 <= took <= slack(2.5), took
        assert c.closed_by_peer(2)
    counted(w, "header_timeout", m0)
    logged(w, n0)
    assert origin.entries() == []


def test_a_head_trickled_byte_by_byte_still_gets_408_after_client_header(weir_factory, origin):
    # client_header bounds the whole head, not the gap between bytes
    w = simple(weir_factory, origin, timeouts={"client_header": "1s"})
    with w.client() as c:
        t = time.monotonic()
        data = b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 200
        for i in range(len(data)):
            if select.select([c.sock], [], [], 0.05)[0] or time.monotonic() - t > slack(4):
                break
            try:
                c.send(data[i:i + 1])
            except OSError:
                break
        r = c.read_response(timeout=3)
        took = time.monotonic() - t
        assert r.status == 408, r
        assert took <= slack(2.5), took


def test_a_body_that_stops_arriving_times_out_after_client_body(weir_factory, origin):
    w = simple(weir_factory, origin, timeouts={"client_body": "1s", "upstream_read": "5s"})
    m0 = w.metrics()
    with w.client() as c:
        c.send(build_request("POST", "/upload", headers=[("Content-Length", "100")]) + b"x" * 10)
        t = time.monotonic()
        data = c.read_all(timeout=5)
        took = time.monotonic() - t
        assert took <= slack(3), took
        # nothing of the response was sent yet: a 408, and the close
        assert data.startswith(b"HTTP/1.1 408 Request Timeout\r\n"), data
        assert c.eof
    counted(w, "body_timeout", m0)
    assert origin.requests("/upload") == []


def test_a_content_length_over_body_size_gets_413_before_any_body_is_read(weir_factory, origin):
    w = simple(weir_factory, origin, limits={"body_size": "1k"})
    m0 = w.metrics()
    n0 = len(w.error_lines())
    with w.client() as c:
        c.send(build_request("POST", "/upload", headers=[("Content-Length", "1025")]))
        r = c.read_response(timeout=3)
        error_response_ok(r, 413, "Payload Too Large", close=True)
        assert c.closed_by_peer(2)
    counted(w, "body_too_large", m0)
    logged(w, n0)
    assert origin.entries() == []


def test_a_content_length_equal_to_body_size_is_accepted(weir_factory, origin):
    w = simple(weir_factory, origin, limits={"body_size": "1k"})
    with w.client() as c:
        r = c.request("POST", "/upload", body=b"y" * 1024)
        assert r.status == 200 and r.json()["body_len"] == 1024


def test_a_chunked_body_growing_over_body_size_gets_413(weir_factory, origin):
    w = simple(weir_factory, origin, limits={"body_size": "1k"})
    m0 = w.metrics()
    with w.client() as c:
        c.send(build_request("POST", "/upload", headers=[("Transfer-Encoding", "chunked")])
               + chunked(b"z" * 3000, 500))
        r = c.read_response(timeout=3)
        error_response_ok(r, 413, "Payload Too Large", close=True)
        assert c.closed_by_peer(2)
    counted(w, "body_too_large", m0)
    assert origin.requests("/upload") == []


def test_expect_100_continue_with_a_body_over_the_limit_gets_413_and_no_100(weir_factory, origin):
    w = simple(weir_factory, origin, limits={"body_size": "1k"})
    with w.client() as c:
        c.send(build_request("POST", "/upload", headers=[("Content-Length", "5000"),
                                                         ("Expect", "100-continue")]))
        r = c.read_response(timeout=3)
        assert r.interim == []
        error_response_ok(r, 413, "Payload Too Large", close=True)
    assert origin.entries() == []


def test_a_target_over_uri_size_gets_414(weir_factory, origin):
    w = simple(weir_factory, origin, limits={"uri_size": "1k", "header_size": "16k"})
    m0 = w.metrics()
    n0 = len(w.error_lines())
    with w.client() as c:
        c.send(build_request("GET", "/" + "a" * 1024))
        r = c.read_response(timeout=3)
        error_response_ok(r, 414, "URI Too Long", close=True)
        assert c.closed_by_peer(2)
    counted(w, "uri_too_long", m0)
    logged(w, n0)
    assert origin.entries() == []


def test_a_target_of_exactly_uri_size_is_served(weir_factory, origin):
    w = simple(weir_factory, origin, limits={"uri_size": "1k", "header_size": "16k"})
    target = "/echo?" + "a" * (1024 - 6)
    assert len(target) == 1024
    r = w.get(target)
    assert r.status == 200 and r.json()["target"] == target


def test_a_head_over_header_size_gets_431(weir_factory, origin):
    w = simple(weir_factory, origin, limits={"header_size": "4k"})
    m0 = w.metrics()
    n0 = len(w.error_lines())
    with w.client() as c:
        c.send(build_request("GET", "/", headers=[("X-Big", "b" * 5000)]))
        r = c.read_response(timeout=3)
        error_response_ok(r, 431, "Request Header Fields Too Large", close=True)
        assert c.closed_by_peer(2)
    counted(w, "headers_too_large", m0)
    logged(w, n0)
    assert origin.entries() == []


def test_a_head_just_under_header_size_is_served(weir_factory, origin):
    w = simple(weir_factory, origin, limits={"header_size": "4k"})
    req = build_request("GET", "/echo", headers=[("X-Big", "")])
    pad = 4096 - len(req) - 64
    r = w.get("/echo", headers=[("X-Big", "b" * pad)])
    assert r.status == 200
    assert ["X-Big", "b" * pad] in r.json()["headers"]


def head_of(size, nheaders, target="/echo"):
    """A GET head of exactly <size> bytes in <nheaders> header lines (Host
    among them), each sent "name:value", without the space weir writes."""
    lines = ["GET %s HTTP/1.1" % target, "Host:localhost"] + ["X-F%04d:" % i for i in range(nheaders - 1)]
    short = size - sum(len(x) + 2 for x in lines) - 2
    assert short >= 0
    lines[-1] += "v" * short
    head = ("\r\n".join(lines) + "\r\n\r\n").encode()
    assert len(head) == size
    return head


# A head within the limits is forwarded even when what weir writes on is
# longer than what it read: a space after each ':', its own X-Forwarded-*
# and Via lines. One byte more than the limit is 431 (or 502 for a
# response), as before.
@pytest.mark.parametrize("limits,nheaders", [
    ({}, 100),                                              # 16k, 100 headers: the defaults
    ({"header_size": "64k", "headers": 1000}, 1000),        # the largest allowed
])
def test_a_head_of_exactly_header_size_is_forwarded(weir_factory, origin, limits, nheaders):
    w = simple(weir_factory, origin, workers=1, limits=limits)
    size = parse_size(limits.get("header_size", "16k"))
    with w.client() as c:
        c.send(head_of(size, nheaders))
        r = c.read_response(timeout=slack(5))
        assert r.status == 200, r.body[:200]
        got = r.json()["headers"]
        mine = [h for h in got if re.match(r"X-F\d{4}$", h[0])]
        assert len(mine) == nheaders - 1 and mine[-1][1].startswith("vvv")
    with w.client() as c:
        c.send(head_of(size + 1, nheaders))
        error_response_ok(c.read_response(timeout=slack(5)), 431, "Request Header Fields Too Large", close=True)


@pytest.mark.parametrize("limits,nheaders", [
    ({}, 100),
    ({"response_header_size": "64k", "headers": 1000}, 1000),
])
def test_a_response_head_of_exactly_response_header_size_is_relayed(weir_factory, origin, limits, nheaders):
    w = simple(weir_factory, origin, workers=1, limits=limits)
    size = parse_size(limits.get("response_header_size", "16k"))
    r = w.get("/headsize/%d/%d" % (size, nheaders))
    assert r.status == 200 and r.body == b"ok", (r.status, r.body[:200])
    assert w.get("/headsize/%d/%d" % (size + 1, nheaders)).status == 502


def parse_size(text):
    return int(text[:-1]) << 10 if text.endswith("k") else int(text)


def test_more_than_the_allowed_number_of_headers_gets_431(weir_factory, origin):
    w = simple(weir_factory, origin, limits={"headers": 20})
    m0 = w.metrics()
    with w.client() as c:
        c.send(build_request("GET", "/", headers=[("X-H%d" % i, "v") for i in range(21)]))
        r = c.read_response(timeout=3)
        error_response_ok(r, 431, "Request Header Fields Too Large", close=True)
    counted(w, "headers_too_large", m0)
    assert origin.entries() == []


def test_exactly_the_allowed_number_of_headers_is_served(weir_factory, origin):
    w = simple(weir_factory, origin, limits={"headers": 20})
    # Host plus 19 more = 20 headers
    r = w.get("/echo", headers=[("X-H%d" % i, "v") for i in range(19)])
    assert r.status == 200


def test_an_error_answer_counts_in_the_responses_by_class(weir_factory, origin):
    w = simple(weir_factory, origin, limits={"uri_size": "1k"})
    m0 = w.metrics()
    with w.client() as c:
        c.send(build_request("GET", "/" + "a" * 2000))
        assert c.read_response().status == 414
    assert w.get("/").status == 200
    settle()
    m1 = w.metrics()
    assert m1("weir_responses_total", **{"class": "4xx"}) - m0("weir_responses_total", **{"class": "4xx"}) == 1
    assert m1("weir_responses_total", **{"class": "2xx"}) - m0("weir_responses_total", **{"class": "2xx"}) == 1


def test_a_connection_that_sends_nothing_is_closed_after_client_header(weir_factory, origin):
    w = simple(weir_factory, origin, timeouts={"client_header": "1s"})
    with w.client() as c:
        t = time.monotonic()
        data = c.read_all(timeout=4)
        took = time.monotonic() - t
        assert c.eof
        assert 0.8 <= took <= slack(2.5), took
        # not one byte of a request: closed without a word, as idle
        assert data == b"", data


def test_a_control_byte_in_the_target_gets_400(weir, origin):
    with weir.client() as c:
        c.send(b"GET /a\x01b HTTP/1.1\r\nHost: x\r\n\r\n")
        assert c.read_response().status == 400
        assert c.closed_by_peer(2)
    assert origin.entries() == []
