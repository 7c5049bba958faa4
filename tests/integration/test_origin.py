"""The test origin itself, without weir: if these fail, fix the origin or the
harness before reading anything into the other tests."""

import hashlib
import json
import time

from harness import Client, build_request, chunked, settle


def test_origin_answers_hello_on_root_and_unknown_paths(origin):
    with Client(origin.port) as c:
        r = c.request("GET", "/")
        assert (r.status, r.body) == (200, b"hello from origin\n")
        r = c.request("GET", "/no/such/thing")
        assert (r.status, r.body) == (200, b"hello from origin\n")
        assert r.get("X-Origin") == "A"


def test_origin_echo_reports_headers_in_received_order(origin):
    with Client(origin.port) as c:
        r = c.request("POST", "/echo?x=1", headers=[("X-B", "2"), ("X-A", "1")], body=b"abc")
    j = r.json()
    assert j["method"] == "POST" and j["target"] == "/echo?x=1"
    assert j["headers"][1:] == [["X-B", "2"], ["X-A", "1"], ["Content-Length", "3"]]
    assert j["body_len"] == 3 and j["body_sha256"] == hashlib.sha256(b"abc").hexdigest()
    assert origin.requests()[-1]["target"] == "/echo?x=1"


def test_origin_reads_chunked_bodies_with_extensions_and_trailers(origin):
    data = bytes(range(256)) * 40
    body = chunked(data, 777, ";ext=1")[:-2] + b"X-Trailer: t\r\n\r\n"
    with Client(origin.port) as c:
        r = c.request("POST", "/upload", headers=[("Transfer-Encoding", "chunked")], body=body)
    assert r.json() == {"body_len": len(data), "body_sha256": hashlib.sha256(data).hexdigest()}


def test_origin_rejects_smuggling_shapes_and_logs_them_as_errors(origin):
    bad = [
        b"GET / HTTP/1.1\nHost: x\n\n",
        b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost : x\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: x\r\nX: a\r\n b\r\n\r\n",
        b"GET / HTTP/1.1\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n",
    ]
    for raw in bad:
        with Client(origin.port) as c:
            c.send(raw)
            r = c.read_response()
            assert r.status == 400, raw
    settle()
    assert origin.requests() == []
    assert len(origin.entries()) == len(bad)


def test_origin_framing_endpoints_produce_what_they_promise(origin):
    with Client(origin.port) as c:
        r = c.request("GET", "/bytes/5000")
        assert r.body == b"x" * 5000 and r.get("Content-Length") == "5000"
        r = c.request("GET", "/chunked/2500")
        assert r.chunked and r.body == b"x" * 2500
        r = c.request("HEAD", "/head-test")
        assert r.get("Content-Length") == "5" and r.body == b""
        r = c.request("GET", "/status/204")
        assert r.status == 204
        r = c.request("GET", "/status/103")
        assert r.status == 200 and [i.status for i in r.interim] == [103]
        r = c.request("GET", "/close/3000")
        assert r.body == b"x" * 3000 and not r.has("Content-Length")
        assert c.closed_by_peer(1)


def test_origin_bad_trailing_sends_an_unrequested_second_response(origin):
    with Client(origin.port) as c:
        r = c.request("GET", "/bad/trailing")
        assert r.body == b"ok\n"
        r2 = c.read_response()
        assert r2.body == b"injected\n"


def test_origin_close_on_next_drops_the_following_request(origin):
    with Client(origin.port) as c:
        assert c.request("GET", "/close-on-next").status == 200
        c.send(build_request("GET", "/after"))
        assert c.closed_by_peer(2)
    assert origin.requests("/after")[0]["dropped"] is True


def test_origin_stall_keeps_the_socket_without_answering(origin):
    with Client(origin.port) as c:
        c.send(build_request("GET", "/stall"))
        assert not c.closed_by_peer(0.5)


def test_origin_slow_waits_before_answering(origin):
    t = time.monotonic()
    with Client(origin.port) as c:
        assert c.request("GET", "/slow/300").body == b"slow\n"
    assert time.monotonic() - t >= 0.3
    assert json.loads(json.dumps(origin.requests()[-1]))["target"] == "/slow/300"
