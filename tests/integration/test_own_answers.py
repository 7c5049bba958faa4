"""weir's own answers (a canned error, a gRPC trailers-only status, an
auth refusal, a rate limit's 429, a breaker's 503, a return, the interim
100 Continue) reach the client's codec as a message (the server codecs'
answer and interim ops, worker/h1/h1.h): HTTP/1 clients get the bytes
they always got, HTTP/2 clients HEADERS and DATA made from the message,
the same fields (names lower case, no connection-specific one) and the
same body, and a HEAD its Content-Length without the body."""

import hashlib
import json
import re
import time

import h2.events

from harness import Client, build_request, free_port, render_config
from h2util import H2Client
from test_auth import API_KEY, Keys  # noqa: F401
from test_breaker import block, breaker_weir, state
from test_forward_auth import fa_weir

RETURN = ('return = { status = 302; location = "https://new.example$request_uri"; body = "moved\\n"; '
          'content_type = "text/plain; charset=utf-8"; }; ')


def own_weir(weir_factory, origin, tmp_path, request_id=False):
    """Routes to each kind of answer: /echo proxied, /dead/ to nothing,
    /key/ behind an API key, /rl/ limited to one a minute, /ret a return;
    no route for the rest (404)."""
    (tmp_path / "keys").mkdir()
    k = Keys(tmp_path / "keys")
    dead = "127.0.0.1:%d" % free_port()
    w = weir_factory(start=False, upstreams=[{"name": "a", "servers": [origin.addr]}],
                     routes=[{"path": "/", "upstream": "a"}], workers=1)
    routes = [{"path": p, "upstream": u} for p, u in
              (("/echo", "a"), ("/dead/", "d"), ("/key/", "a"), ("/rl/", "a"), ("/ret", "a"))]
    text = render_config(w.dir, w.port, w.stats_port,
                         [{"name": "a", "servers": [origin.addr]}, {"name": "d", "servers": [dead]}], routes,
                         workers=1, extra="request_id = true;" if request_id else "")
    text = text.replace('log = {', 'rate_limits = ( { name = "one"; key = "route"; rate = "1/m"; burst = 1; '
                        'legacy_headers = true; } );\nlog = {', 1)
    for old, new in (('path = "/key/"; upstream = "a"; }',
                      'path = "/key/"; upstream = "a"; auth = { type = "api_key"; keys_file = "%s"; '
                      'header = "X-Api-Key"; }; }' % k.keys_file),
                     ('path = "/rl/"; upstream = "a"; }', 'path = "/rl/"; upstream = "a"; rate_limits = [ "one" ]; }'),
                     ('path = "/ret"; upstream = "a"; }', 'path = "/ret"; %s}' % RETURN)):
        assert old in text, old
        text = text.replace(old, new, 1)
    w.write_raw_config(text)
    w.start()
    w.wait_workers()
    return w


def h1(w, method, target, headers=()):
    """The raw head, the parsed response and its fields over HTTP/1."""
    with Client(w.port) as c:
        c.send(build_request(method, target, "localhost", list(headers)))
        r = c.read_response(method)
    return r


def h1_fields(r):
    """The fields an HTTP/2 client should get of HTTP/1 answer <r>."""
    return sorted((n.lower(), v) for n, v in r.headers if n.lower() not in ("connection", "keep-alive"))


def h2_fields(r):
    return sorted((n, v) for n, v in r["headers"] if n != ":status")


def same_answer(w, target, status, headers=(), masks=()):
    """<target> answered by weir itself gets the same status, fields and
    body over HTTP/1 and HTTP/2, and a HEAD the same fields, no body.
    <masks>: fields whose value differs per request (a request id)."""
    got = {}
    for method in ("GET", "HEAD"):
        a = h1(w, method, target, headers)
        c = H2Client(w.port)
        b = c.get(target, method=method, headers=[(n.lower(), v) for n, v in headers])
        c.close()
        assert a.status == status and b["status"] == status, (a, b)
        assert b["ended"] and b["reset"] is None, b
        fa = [(n, "*" if n in masks else v) for n, v in h1_fields(a)]
        fb = [(n, "*" if n in masks else v) for n, v in h2_fields(b)]
        assert fa == fb, (method, fa, fb)
        assert all(n == n.lower() for n, _ in b["headers"]), b
        assert b["body"] == (b"" if method == "HEAD" else a.body), (method, a.body, b["body"])
        got[method] = (a, b)
    # a HEAD describes the GET's body it does not carry
    assert got["HEAD"][1]["headers"] and dict(got["HEAD"][1]["headers"]).get("content-length") == \
        dict(got["GET"][1]["headers"]).get("content-length")
    return got["GET"]


def test_each_own_answer_is_the_same_message_over_http1_and_http2(weir_factory, origin, tmp_path):
    w = own_weir(weir_factory, origin, tmp_path, request_id=True)
    a, b = same_answer(w, "/nothing/here", 404, masks=("x-request-id",))
    assert a.body == b"404 Not Found\n" and ("content-type", "text/plain") in b["headers"]
    assert re.match(r"^[0-9a-f]{32}$", dict(b["headers"])["x-request-id"]), b
    a, b = same_answer(w, "/dead/x", 502, masks=("x-request-id",))
    assert a.body == b"502 Bad Gateway\n"
    a, b = same_answer(w, "/key/x", 401, masks=("x-request-id",))
    assert dict(b["headers"])["www-authenticate"].startswith("ApiKey realm="), b
    assert b["body"] == b"401 Unauthorized\n"
    a, b = same_answer(w, "/ret?x=1", 302, masks=("x-request-id",))
    assert dict(b["headers"])["location"] == "https://new.example/ret?x=1", b
    assert dict(b["headers"])["content-type"] == "text/plain; charset=utf-8", b
    assert dict(b["headers"])["content-length"] == "6" and b["body"] == b"moved\n", b
    # a gRPC call with no route: 12 UNIMPLEMENTED, trailers-only (one
    # HEADERS that ends the stream: no DATA, no trailers)
    g = [("Content-Type", "application/grpc"), ("TE", "trailers")]
    a, b = same_answer(w, "/other.Svc/Call", 200, headers=g, masks=("x-request-id",))
    h = dict(b["headers"])
    assert h["grpc-status"] == "12" and "no route" in h["grpc-message"], b
    assert h["content-type"] == "application/grpc" and h["content-length"] == "0", b
    assert b["body"] == b"" and b["trailers"] is None, b


def test_a_rate_limits_429_over_http2_has_its_fields(weir_factory, origin, tmp_path):
    w = own_weir(weir_factory, origin, tmp_path)
    c = H2Client(w.port)
    assert c.get("/rl/x")["status"] == 200
    r = c.get("/rl/x")
    h = dict(r["headers"])
    assert r["status"] == 429 and r["body"] == b"429 Too Many Requests\n", r
    assert 1 <= int(h["retry-after"]) <= 60, h
    assert h["ratelimit-policy"] == '"one";q=1;w=60', h
    assert h["ratelimit"].startswith('"one";r=0;t='), h
    assert h["x-ratelimit-limit"] == "1" and h["x-ratelimit-remaining"] == "0", h
    assert h["content-type"] == "text/plain" and h["content-length"] == "22", h
    assert "connection" not in h
    r = c.get("/rl/x", method="HEAD")
    assert r["status"] == 429 and r["body"] == b"" and dict(r["headers"])["content-length"] == "22", r
    g = c.get("/rl/x", method="POST", headers=[("content-type", "application/grpc"), ("te", "trailers")])
    h = dict(g["headers"])
    assert g["status"] == 200 and h["grpc-status"] == "8" and h["grpc-message"] == "rate limited", g
    assert "retry-after" in h and g["body"] == b"" and h["content-length"] == "0", g
    c.close()
    # and the same over HTTP/1, fields and body
    same = h1(w, "GET", "/rl/x")
    assert same.status == 429 and same.body == b"429 Too Many Requests\n"
    assert same.get("RateLimit-Policy") == '"one";q=1;w=60'


def test_an_open_breakers_503_over_http2_has_its_retry_after(weir_factory, origin):
    w = breaker_weir(weir_factory, [origin.addr], block("breaker", min_requests=3, error_percent=50,
                                                        open_time="20s"), workers=1)
    c = H2Client(w.port)
    for _ in range(3):
        assert c.get("/status/500")["status"] == 500
    deadline = time.monotonic() + 5
    while state(w) != "open" and time.monotonic() < deadline:
        time.sleep(0.05)
    r = c.get("/echo")
    h = dict(r["headers"])
    assert r["status"] == 503 and r["body"] == b"503 Service Unavailable\n", r
    assert 15 <= int(h["retry-after"]) <= 20 and h["content-length"] == "24", h
    a = h1(w, "GET", "/echo")
    assert a.status == 503 and a.body == r["body"]
    assert [f for f in h1_fields(a) if f[0] != "retry-after"] == [f for f in h2_fields(r) if f[0] != "retry-after"]
    c.close()


def test_expect_100_continue_over_http2_gets_an_interim_headers(weir_factory, origin, tmp_path):
    w = own_weir(weir_factory, origin, tmp_path)
    c = H2Client(w.port)
    sid = c.request("/echo", method="POST", headers=[("expect", "100-continue"), ("content-length", "5")],
                    end=False)
    interim = []
    deadline = time.monotonic() + 5
    while not interim and time.monotonic() < deadline:
        c.sock.settimeout(0.2)
        try:
            data = c.sock.recv(65536)
        except OSError:
            continue
        for ev in c.conn.receive_data(data):
            if isinstance(ev, h2.events.InformationalResponseReceived):
                interim.append(dict((n.decode(), v.decode()) for n, v in ev.headers))
        c.flush()
    assert interim == [{":status": "100"}], interim
    c.send_body(sid, b"hello")
    r = c.wait([sid])[0]
    assert r["status"] == 200 and json.loads(r["body"])["body_sha256"] == hashlib.sha256(b"hello").hexdigest(), r
    c.close()
    # HTTP/1: the same 25 bytes as ever
    with Client(w.port) as k:
        k.send(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
        k._fill(time.monotonic() + 5)
        assert bytes(k.buf).startswith(b"HTTP/1.1 100 Continue\r\n\r\n"), bytes(k.buf)
        k.send(b"hello")
        r = k.read_response("POST")
        assert r.status == 200


def test_forward_auths_denials_over_http2_carry_the_services_fields_and_body(weir_factory, origin):
    w = fa_weir(weir_factory, origin, auth_extra='cache = "10s"; ')
    c = H2Client(w.port)
    for _ in range(2):  # asked, then from the cache
        r = c.get("/echo/x")
        assert r["status"] == 401 and r["body"] == b"who are you?\n", r
        assert h2_fields(r) == [("content-length", "13"), ("content-type", "text/plain"),
                                ("www-authenticate", 'Bearer realm="svc"')], r
        r = c.get("/echo/x", headers=[("authorization", "Bearer forbidden")])
        assert r["status"] == 403 and r["body"] == b"not yours\n", r
        assert h2_fields(r) == [("content-length", "10"), ("content-type", "text/plain")], r
    r = c.get("/echo/x", method="HEAD")
    assert r["status"] == 401 and r["body"] == b"" and dict(r["headers"])["content-length"] == "13", r
    c.close()


def test_http1_answers_keep_their_bytes(weir_factory, origin, tmp_path):
    """The answers whose text is now written from a struct answer."""
    w = own_weir(weir_factory, origin, tmp_path)
    with Client(w.port) as c:
        c.send(build_request("GET", "/key/x", "x", []))
        r = c.read_response()
        assert r.raw_head + r.body == (b'HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: ApiKey realm="weir"\r\n'
                                       b"Content-Type: text/plain\r\nContent-Length: 17\r\n\r\n401 Unauthorized\n")
        c.send(build_request("HEAD", "/rl/x", "x", []))
        assert c.read_response("HEAD").status == 200
        c.send(build_request("HEAD", "/rl/x", "x", [("Connection", "close")]))
        r = c.read_response("HEAD")
        assert re.fullmatch(rb'HTTP/1\.1 429 Too Many Requests\r\nContent-Type: text/plain\r\nContent-Length: 22\r\n'
                            rb'Retry-After: (\d+)\r\nRateLimit-Policy: "one";q=1;w=60\r\nRateLimit: "one";r=0;t=\1\r\n'
                            rb'X-RateLimit-Limit: 1\r\nX-RateLimit-Remaining: 0\r\nX-RateLimit-Reset: \1\r\n'
                            rb'Connection: close\r\n\r\n', r.raw_head), r.raw_head
    with Client(w.port) as c:  # its body unread: the connection closes after
        c.send(build_request("POST", "/other.Svc/Call", "x", [("Content-Type", "application/grpc")], body=b"\0" * 5))
        r = c.read_response("POST")
        assert r.raw_head + r.body == (b"HTTP/1.1 200 OK\r\nContent-Type: application/grpc\r\ngrpc-status: 12\r\n"
                                       b"grpc-message: no route for host and path\r\nContent-Length: 0\r\n"
                                       b"Connection: close\r\n\r\n")
