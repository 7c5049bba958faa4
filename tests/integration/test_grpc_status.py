"""weir's own answers to a gRPC request (content-type application/grpc*)
go out as gRPC status (worker/core/grpc.h): HTTP 200, content-type
application/grpc, grpc-status and grpc-message in the head, no body; a
plain client still gets the text answer. Over HTTP/1 (the HTTP/2 codec is
written beside this and reuses the mapping)."""

import socket
import threading
import time

from harness import Client, free_port, slack, wait_until
from test_auth import API_KEY, gate, keys  # noqa: F401 (fixtures)
from test_breaker import block, breaker_weir
from test_rate_limit import start

def call(port, target, ctype="application/grpc", extra=()):
    with Client(port) as c:
        hs = [("Content-Type", ctype), ("TE", "trailers")] if ctype else []
        return c.request("POST", target, headers=hs + list(extra), body=b"\0\0\0\0\0")


def assert_grpc(r, code, words=None):
    assert r.status == 200, r
    assert r.get("Content-Type") == "application/grpc", r
    assert r.get("grpc-status") == str(code), r
    assert r.get("Content-Length") == "0" and r.body == b"", r
    if words:
        assert words in r.get("grpc-message"), r


def test_no_route_is_unimplemented_and_a_plain_client_keeps_the_404(weir_factory, origin):
    w = weir_factory(upstreams=[{"name": "a", "servers": [origin.addr]}],
                     routes=[{"path": "/svc.Echo/", "upstream": "a"}])
    r = call(w.port, "/other.Svc/Call")
    assert_grpc(r, 12, "no route")
    assert_grpc(call(w.port, "/other.Svc/Call", "application/grpc+proto"), 12)
    assert_grpc(call(w.port, "/other.Svc/Call", "application/grpc; charset=utf-8"), 12)
    for ctype in (None, "application/grpcx", "text/plain"):
        r = call(w.port, "/other.Svc/Call", ctype)
        assert r.status == 404 and r.get("grpc-status") is None and r.body == b"404 Not Found\n", (ctype, r)
    assert w.metrics().error("no_route") == 6  # counted as the 404 it stands for


def test_connect_failure_is_unavailable_and_a_timeout_deadline_exceeded(weir_factory, origin):
    dead = "127.0.0.1:%d" % free_port()  # nothing listens there
    w = weir_factory(upstreams=[{"name": "a", "servers": [origin.addr]}, {"name": "d", "servers": [dead]}],
                     routes=[{"path": "/dead/", "upstream": "d"}, {"path": "/", "upstream": "a"}],
                     timeouts={"upstream_read": "300ms"})
    assert_grpc(call(w.port, "/dead/x"), 14)
    assert_grpc(call(w.port, "/slow/2000"), 4)
    r = call(w.port, "/echo")  # the upstream's own answer passes as it is
    assert r.status == 200 and r.get("grpc-status") is None


def test_limits_and_rate_limits_are_resource_exhausted(weir_factory, origin):
    w = breaker_weir(weir_factory, [origin.addr], block("limits", max_requests=1), workers=1)
    got = []
    t = threading.Thread(target=lambda: got.append(call(w.port, "/slow/800")))
    t.start()
    time.sleep(0.3)  # the slow call holds the one place
    assert_grpc(call(w.port, "/echo"), 8, "limits")
    t.join(10)
    assert got[0].status == 200

    w = start(weir_factory, origin, ['name = "one"; key = "route"; rate = "1/m"; burst = 1;'], [("/echo", ["one"])])
    assert call(w.port, "/echo").status == 200
    r = call(w.port, "/echo")
    assert_grpc(r, 8, "rate limited")
    assert r.get("Retry-After") is not None and r.get("RateLimit-Policy") is not None, r


def test_auth_is_unauthenticated_or_permission_denied(gate):  # noqa: F811
    assert_grpc(call(gate.port, "/echo/key"), 16)
    assert_grpc(call(gate.port, "/echo/only", extra=[("X-Api-Key", API_KEY)]), 7)
    r = call(gate.port, "/echo/key", None)
    assert r.status == 401 and r.get("WWW-Authenticate") is not None


def test_a_grpcio_client_over_h2c_gets_the_codes_from_weir_itself(weir_factory, origin):
    """A real gRPC client (python3-grpcio) over h2c: weir's own refusals
    arrive as gRPC status codes with their messages, not as HTTP errors."""
    grpc = __import__("pytest").importorskip("grpc")
    dead = "127.0.0.1:%d" % free_port()  # nothing listens there
    w = weir_factory(start=False, upstreams=[{"name": "a", "servers": [origin.addr]}, {"name": "d", "servers": [dead]}],
                     routes=[{"path": "/svc.Echo/Limited", "upstream": "a"}, {"path": "/svc.Echo/Down", "upstream": "d"},
                             {"path": "/svc.Echo/", "upstream": "a"}])
    text = open(w.conf).read()
    text = text.replace('log = {', 'rate_limits = ( { name = "one"; key = "route"; rate = "1/m"; burst = 1; } );\nlog = {', 1)
    text = text.replace('path = "/svc.Echo/Limited"; upstream = "a"; }',
                        'path = "/svc.Echo/Limited"; upstream = "a"; rate_limits = [ "one" ]; }', 1)
    assert 'rate_limits = [ "one" ]' in text
    w.write_raw_config(text)
    w.start()
    w.wait_workers()
    got = {}
    with grpc.insecure_channel("127.0.0.1:%d" % w.port) as ch:
        for name, method in (("limited1", "/svc.Echo/Limited"), ("limited2", "/svc.Echo/Limited"),
                             ("no_route", "/other.Svc/Call"), ("down", "/svc.Echo/Down")):
            call_ = ch.unary_unary(method, request_serializer=lambda b: b, response_deserializer=lambda b: b)
            try:
                call_(b"hi", timeout=5)
                got[name] = None
            except grpc.RpcError as e:
                got[name] = (e.code(), e.details())
    # the first call reached the origin, which is no gRPC server: whatever
    # it said, it was not weir's limit
    assert got["limited1"] is None or got["limited1"][0] != grpc.StatusCode.RESOURCE_EXHAUSTED, got
    assert got["limited2"] == (grpc.StatusCode.RESOURCE_EXHAUSTED, "rate limited"), got
    assert got["no_route"][0] == grpc.StatusCode.UNIMPLEMENTED and "no route" in got["no_route"][1], got
    assert got["down"][0] == grpc.StatusCode.UNAVAILABLE, got
    # logged as the HTTP/2 requests they were (the log is written a beat later)
    wait_until(lambda: sum("HTTP/2.0" in l for l in w.access_lines()) >= 4, slack(5), what="4 HTTP/2 log lines")


def test_grpc_timeout_is_the_calls_deadline_bounded_by_timeouts_request(weir_factory, origin):
    # the call's own grpc-timeout (the spec's 1-8 digits and a unit) is
    # weir's deadline for it: DEADLINE_EXCEEDED, counted grpc_deadline;
    # timeouts.request still bounds a longer one; junk is ignored
    w = weir_factory(upstreams=[{"name": "a", "servers": [origin.addr]}], routes=[{"path": "/", "upstream": "a"}],
                     timeouts={"upstream_read": "20s", "request": "1500ms"})
    for value in ("300m", "300000u", "1S"):
        t0 = time.monotonic()
        assert_grpc(call(w.port, "/slow/5000", extra=[("grpc-timeout", value)]), 4, "grpc-timeout")
        took = time.monotonic() - t0
        assert took < slack(1.4), (value, took)
    assert w.metrics().error("grpc_deadline") == 3
    t0 = time.monotonic()
    assert_grpc(call(w.port, "/slow/5000", extra=[("grpc-timeout", "10S")]), 4)  # timeouts.request's 1.5 s
    assert 1.4 < time.monotonic() - t0 < slack(4)
    assert w.metrics().error("grpc_deadline") == 3
    for junk in ("10", "123456789S", "1x", "-1S"):
        r = call(w.port, "/slow/100", extra=[("grpc-timeout", junk)])
        assert r.status == 200 and r.get("grpc-status") is None, (junk, r)
    # a plain request's header of that name is no deadline
    with Client(w.port) as c:
        r = c.request("GET", "/slow/800", headers=[("grpc-timeout", "100m")])
    assert r.status == 200 and r.body == b"slow\n"


def test_a_call_whose_upstream_head_had_begun_still_gets_a_grpc_status(weir_factory, origin):
    # weir drops the request's header list once the upstream's response
    # head begins; an answer of weir's own after that (its head bad, or the
    # call's deadline passed while it came) is still a gRPC status. Seen
    # when a grpcio server's own DEADLINE_EXCEEDED arrived as weir's
    # deadline passed: the client got a text/plain 504 (UNAVAILABLE)
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.bind(("127.0.0.1", 0))
    ls.listen(4)
    held = []

    def half_head():  # the head's first lines, then nothing
        try:
            s, _ = ls.accept()
        except OSError:
            return
        held.append(s)
        s.recv(65536)
        s.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/grpc\r\n")

    t = threading.Thread(target=half_head, daemon=True)
    t.start()
    try:
        w = weir_factory(upstreams=[{"name": "a", "servers": [origin.addr]},
                                    {"name": "h", "servers": ["127.0.0.1:%d" % ls.getsockname()[1]]}],
                         routes=[{"path": "/half/", "upstream": "h"}, {"path": "/", "upstream": "a"}],
                         timeouts={"upstream_read": "20s"})
        assert_grpc(call(w.port, "/garbage"), 14)  # upstream_bad_response, a 502
        assert_grpc(call(w.port, "/half/x", extra=[("grpc-timeout", "300m")]), 4, "grpc-timeout")
        assert w.metrics().error("grpc_deadline") == 1
    finally:
        ls.close()
        t.join(slack(5))
        for s in held:
            s.close()
