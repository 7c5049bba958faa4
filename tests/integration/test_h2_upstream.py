"""HTTP/2 to upstreams (worker/up/h2_client.h): groups with protocol =
"h2c" or "h2", against an HTTP/2 origin of our own (tests/origin/
h2_origin.py, python3-h2) that counts the connections and streams it saw:
multiplexing on few sessions under the server's MAX_CONCURRENT_STREAMS,
HTTP/1 and HTTP/2 clients, bodies byte for byte both ways, a GOAWAY
mid-traffic losing no request, a server RST_STREAM giving 502, TLS with
ALPN h2 (and a server that does not pick h2 refused), and `weir -t`."""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading

import pytest

from harness import Client, chunked, fetch_metrics, proc_stat, slack, wait_until, weir_check, render_config, free_port
from h2util import H2Client
from pki import make_ca, make_leaf, san

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "origin"))
from h2_origin import H2Origin, pattern  # noqa: E402

CURL = shutil.which("curl")


@pytest.fixture
def h2o():
    made = []

    def make(**kw):
        o = H2Origin(**kw)
        made.append(o)
        return o
    yield make
    for o in made:
        o.close()


def h2c_weir(weir_factory, o, raw="", keepalive=None, **kw):
    u = {"name": "h2", "servers": [o.addr], "raw": 'protocol = "h2c"; ' + raw}
    if keepalive is not None:
        u["keepalive"] = keepalive
    return weir_factory(upstreams=[u], routes=[{"path": "/", "upstream": "h2"}], **kw)


def get(port, path, method="GET", body=None, headers=(), timeout=10):
    c = Client(port, timeout=timeout)
    try:
        return c.request(method, path, headers=list(headers), body=body)
    finally:
        c.close()


def at_once(port, paths):
    """GETs <paths> on connections of their own at once: [(status, body)]
    in the order of <paths>, or raises the first failure."""
    out, errs = [None] * len(paths), []

    def one(i):
        try:
            r = get(port, paths[i])
            out[i] = (r.status, r.body)
        except Exception as e:  # noqa: BLE001
            errs.append(e)
    ts = [threading.Thread(target=one, args=(i,)) for i in range(len(paths))]
    for t in ts:
        t.start()
    for t in ts:
        t.join(slack(20))
    if errs:
        raise errs[0]
    return out


def test_http1_client_to_an_h2c_upstream(weir_factory, h2o):
    o = h2o()
    w = h2c_weir(weir_factory, o)
    r = get(w.port, "/echo?x=1", headers=[("X-Thing", "One"), ("Connection", "keep-alive")])
    assert r.status == 200, r
    e = json.loads(r.body)
    assert e["method"] == "GET" and e["path"] == "/echo?x=1" and e["scheme"] == "http"
    assert e["authority"] == "localhost"
    names = [n for n, _ in e["headers"]]
    assert names == [n.lower() for n in names]
    assert ("x-thing", "One") in [tuple(h) for h in e["headers"]]
    assert not any(n in ("host", "connection", "keep-alive", "transfer-encoding") for n in names)
    assert r.get("x-origin") == "h2"
    m = fetch_metrics(w.stats_port)
    assert m("weir_h2_upstream_sessions_total") == 1
    assert m("weir_h2_upstream_streams_total") == 1
    wait_until(lambda: fetch_metrics(w.stats_port)("weir_h2_upstream_streams_active") == 0, slack(3),
               what="the stream ended")
    assert o.connections == 1 and o.streams == 1


def test_the_sessions_nghttp2_state_is_in_the_workers_heap(weir_factory, h2o):
    """No malloc per session or stream: nghttp2's memory for upstream
    sessions comes from the worker's HTTP/2 heap, as for clients'."""
    o = h2o()
    w = h2c_weir(weir_factory, o, workers=1)
    assert fetch_metrics(w.stats_port)("weir_h2_memory_bytes_in_use") == 0
    assert get(w.port, "/echo").status == 200  # an HTTP/1 client: only the upstream session is HTTP/2
    wait_until(lambda: fetch_metrics(w.stats_port)("weir_h2_memory_bytes_in_use") > 0, slack(3),
               what="the idle session's state counted")


def test_concurrent_requests_are_multiplexed_on_one_session(weir_factory, h2o):
    o = h2o()
    w = h2c_weir(weir_factory, o, workers=1)
    out = at_once(w.port, ["/slow/300/%d" % i for i in range(20)])
    assert [(s, json.loads(b)["path"]) for s, b in out] == [(200, "/slow/300/%d" % i) for i in range(20)]
    assert o.streams == 20
    assert o.connections <= 2, o.connections
    assert o.max_open > 1  # they overlapped on one connection


def test_max_concurrent_streams_of_the_server_is_never_exceeded(weir_factory, h2o):
    o = h2o(max_streams=5)
    w = h2c_weir(weir_factory, o, keepalive=2, workers=1)
    out = at_once(w.port, ["/slow/200/%d" % i for i in range(20)])
    assert [s for s, _ in out] == [200] * 20
    assert o.max_open <= 5, o.max_open
    assert o.connections <= 2, o.connections  # the group's pool: 2 sessions, the rest waited


def test_bodies_byte_for_byte_both_ways_from_http1_and_h2_clients(weir_factory, h2o, tmp_path):
    o = h2o()
    w = h2c_weir(weir_factory, o)
    data = os.urandom(3 * 1024 * 1024 + 5)
    # HTTP/1 upload, length-framed and chunked
    r = get(w.port, "/upload", method="POST", body=data, timeout=30)
    assert r.status == 200, r
    e = json.loads(r.body)
    assert e["length"] == len(data) and e["sha256"] == hashlib.sha256(data).hexdigest()
    f = tmp_path / "up.bin"
    f.write_bytes(data)
    p = subprocess.run([CURL, "-s", "-H", "Transfer-Encoding: chunked", "--data-binary", "@%s" % f,
                        "http://127.0.0.1:%d/chunked-up" % w.port], capture_output=True, timeout=slack(30))
    e = json.loads(p.stdout)
    assert e["length"] == len(data) and e["sha256"] == hashlib.sha256(data).hexdigest()
    # HTTP/1 download, with and without a length from the server
    n = 4 * 1024 * 1024 + 3
    r = get(w.port, "/bytes/%d" % n, timeout=30)
    assert r.status == 200 and r.body == pattern(n)
    r = get(w.port, "/bytes/%d/nolength" % n, timeout=30)
    assert r.status == 200 and r.body == pattern(n)
    assert r.get("transfer-encoding") == "chunked"
    # an HTTP/2 client, both ways
    c = H2Client(w.port)
    s1 = c.request("/bytes/%d" % n)
    s2 = c.request("/upload2", method="POST", body=data[:1024 * 1024])
    rs = c.wait([s1, s2], slack(30))
    assert rs[0]["status"] == 200 and rs[0]["body"] == pattern(n)
    e = json.loads(rs[1]["body"])
    assert e["length"] == 1024 * 1024 and e["sha256"] == hashlib.sha256(data[:1024 * 1024]).hexdigest()
    c.close()


def test_a_client_that_does_not_read_holds_the_server_at_its_window(weir_factory, h2o):
    """DATA is consumed (WINDOW_UPDATE) only once weir wrote it to the
    client: a client that stops reading stops the server, weir holding a
    bounded amount; then the whole body arrives byte for byte."""
    o = h2o()
    w = h2c_weir(weir_factory, o, workers=1)
    n = 12 * 1024 * 1024
    c = Client(w.port, timeout=slack(20), rcvbuf=16384)
    c.send(b"GET /bytes/%d HTTP/1.1\r\nHost: localhost\r\n\r\n" % n)
    wait_until(lambda: o.sent > 0, slack(3), what="the first DATA")
    __import__("time").sleep(1.0)
    held = o.sent
    assert held < 6 * 1024 * 1024, held  # windows and socket buffers (3.6 MB seen), not the 12 MiB
    r = c.read_response("GET")
    assert r.status == 200 and len(r.body) == n and r.body == pattern(n)
    c.close()
    assert o.sent == n


def test_a_server_goaway_mid_traffic_loses_no_replayable_request(weir_factory, h2o):
    o = h2o(goaway_after=5)
    w = h2c_weir(weir_factory, o, workers=1)
    out = at_once(w.port, ["/slow/300/%d" % i for i in range(12)])
    assert [s for s, _ in out] == [200] * 12, out
    assert o.connections >= 2
    m = fetch_metrics(w.stats_port)
    assert m("weir_h2_upstream_goaways_total", code="NO_ERROR") >= 1


def test_a_reload_under_traffic_loses_no_request(weir_factory, h2o):
    """Requests in flight on an old worker's sessions finish there; the
    new workers open sessions of their own."""
    import time
    from test_reload import hup_and_wait
    o = h2o()
    w = h2c_weir(weir_factory, o, workers=1)
    out, errs = [], []

    def client(k):
        end = time.monotonic() + 3
        while time.monotonic() < end:
            try:
                out.append(get(w.port, "/slow/150/%d" % k).status)
            except Exception as e:  # noqa: BLE001
                errs.append(e)
    ts = [threading.Thread(target=client, args=(k,)) for k in range(8)]
    for t in ts:
        t.start()
    time.sleep(0.7)
    hup_and_wait(w)
    time.sleep(0.7)
    hup_and_wait(w)
    for t in ts:
        t.join(slack(20))
    assert not errs and out and set(out) == {200}, (errs[:3], set(out))
    assert o.connections >= 2  # the new workers' own sessions


def test_a_server_rst_stream_gives_502_and_the_session_lives_on(weir_factory, h2o):
    o = h2o()
    w = h2c_weir(weir_factory, o, workers=1)
    before = fetch_metrics(w.stats_port)
    r = get(w.port, "/rst")
    assert r.status == 502
    r = get(w.port, "/echo")
    assert r.status == 200
    m = fetch_metrics(w.stats_port)
    assert m("weir_h2_upstream_resets_total", direction="received", code="INTERNAL_ERROR") == 1
    assert m("weir_errors_total", kind="upstream_reset") == before("weir_errors_total", kind="upstream_reset") + 1
    assert o.connections == 1


def test_a_server_reset_mid_answer_resets_the_h2_clients_stream(weir_factory, h2o):
    # cancellation the other way: the server's RST_STREAM after the answer
    # began reaches an HTTP/2 client as a reset, never as a clean end
    o = h2o()
    w = h2c_weir(weir_factory, o, workers=1)
    c = H2Client(w.port)
    r = c.wait([c.request("/midrst", method="POST", body=b"\0\0\0\0\0",
                          headers=[("content-type", "application/grpc"), ("te", "trailers")])], timeout=5)[0]
    assert r["status"] == 200 and r["reset"] is not None and not r["ended"], r
    assert c.get("/echo")["status"] == 200  # the client's connection lives on
    c.close()
    assert fetch_metrics(w.stats_port)("weir_h2_upstream_resets_total", direction="received",
                                       code="INTERNAL_ERROR") == 1


def test_an_admin_drain_closes_the_servers_idle_sessions(weir_factory, h2o):
    # as the idle HTTP/1 connections of a drained server are closed by the
    # worker's sweep, not kept until upstream_keepalive
    from test_metrics import admin
    o = h2o()
    w = h2c_weir(weir_factory, o, workers=1, timeouts={"upstream_keepalive": "60s"})
    assert get(w.port, "/echo").status == 200
    active = lambda: fetch_metrics(w.stats_port)("weir_h2_upstream_sessions_active")  # noqa: E731
    assert active() == 1
    admin(w, "h2", o.addr, state="drain")
    wait_until(lambda: active() == 0, slack(5), what="the idle session closed")


def test_a_session_that_cannot_connect_sends_its_requests_to_the_next_server(weir_factory, h2o):
    o = h2o()
    dead = "127.0.0.1:%d" % free_port()  # nothing listens there
    w = weir_factory(upstreams=[{"name": "h2", "servers": [dead, o.addr], "raw": 'protocol = "h2c";'},
                                {"name": "d", "servers": [dead], "raw": 'protocol = "h2c";'}],
                     routes=[{"path": "/dead/", "upstream": "d"}, {"path": "/", "upstream": "h2"}], workers=1)
    out = at_once(w.port, ["/slow/100/%d" % i for i in range(6)])
    assert [st for st, _ in out] == [200] * 6
    assert o.streams == 6
    r = get(w.port, "/dead/x")
    assert r.status == 502
    m = fetch_metrics(w.stats_port)
    assert m("weir_h2_upstream_streams_active") == 0 and m("weir_errors_total", kind="upstream_refused") >= 1
    # a gRPC client is told UNAVAILABLE
    grpc = pytest.importorskip("grpc")
    with grpc.insecure_channel("127.0.0.1:%d" % w.port) as ch:
        with pytest.raises(grpc.RpcError) as e:
            ch.unary_unary("/dead/x", request_serializer=lambda b: b, response_deserializer=lambda b: b)(
                b"x", timeout=slack(5))
        assert e.value.code() == grpc.StatusCode.UNAVAILABLE


def test_an_answer_before_the_body_reaches_the_client(weir_factory, h2o):
    """The server answers at the head and resets the rest (NO_ERROR):
    the client gets that answer, not a 502."""
    o = h2o()
    w = h2c_weir(weir_factory, o, workers=1, limits={"body_buffer": 0})
    r = get(w.port, "/early", method="POST", body=os.urandom(2 * 1024 * 1024))
    assert r.status == 413 and r.body == b"too big\n", r
    assert get(w.port, "/echo").status == 200


def test_a_client_gone_resets_the_upstream_stream(weir_factory, h2o):
    o = h2o()
    w = h2c_weir(weir_factory, o, workers=1)
    c = Client(w.port, timeout=slack(5))
    c.send(b"GET /slow/3000/x HTTP/1.1\r\nHost: localhost\r\n\r\n")
    wait_until(lambda: o.streams == 1, slack(3), what="the stream at the server")
    c.close()
    wait_until(lambda: o.resets == 1, slack(3), what="RST_STREAM at the server")
    m = fetch_metrics(w.stats_port)
    assert m("weir_h2_upstream_resets_total", direction="sent", code="CANCEL") == 1


def test_trailers_cross_both_ways_between_http1_chunked_and_h2(weir_factory, h2o):
    o = h2o()
    w = h2c_weir(weir_factory, o, workers=1)
    c = Client(w.port, timeout=slack(10))
    body = chunked(b"y" * 5000)[:-2] + b"X-Sum: 42\r\n\r\n"  # the last chunk, then a trailer
    c.send(b"POST /trailers HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\nTE: trailers\r\n\r\n" + body)
    r = c.read_response("POST")
    c.close()
    assert r.status == 200 and r.chunked, r
    e = json.loads(r.body)
    assert e["length"] == 5000 and [tuple(x) for x in e["trailers"]] == [("x-sum", "42")], e
    assert ("te", "trailers") in [tuple(x) for x in e["headers"]]
    assert dict(r.trailers) == {"x-checksum": hashlib.sha256(r.body).hexdigest(), "x-more": "yes"}, r.trailers
    # and to an HTTP/2 client, a trailing HEADERS
    h = H2Client(w.port)
    rs = h.wait([h.request("/trailers")], slack(10))
    assert ("x-more", "yes") in (rs[0]["trailers"] or []), rs[0]
    h.close()


def test_refused_trailer_fields_from_an_h2_server_are_dropped_and_counted_for_both_clients(weir_factory, h2o):
    # the HTTP/2 client codec filters the server's trailing HEADERS once,
    # on the list it hands up: neither an HTTP/1 chunked client nor an
    # HTTP/2 one gets the refused fields, each response counts its own
    o = h2o()
    w = h2c_weir(weir_factory, o, workers=1)
    target = "/trailers?t=set-cookie:a%3Db&t=x-after:1&t=cache-control:no-store"
    before = fetch_metrics(w.stats_port).error("trailer_dropped")
    c = Client(w.port, timeout=slack(10))
    r = c.request("GET", target)
    c.close()
    assert r.status == 200 and r.chunked, r
    assert [n.lower() for n, _ in r.trailers] == ["x-checksum", "x-more", "x-after"], r.trailers
    assert fetch_metrics(w.stats_port).error("trailer_dropped") == before + 2
    h = H2Client(w.port)
    rs = h.wait([h.request(target)], slack(10))
    h.close()
    assert [n for n, _ in rs[0]["trailers"]] == ["x-checksum", "x-more", "x-after"], rs[0]
    assert fetch_metrics(w.stats_port).error("trailer_dropped") == before + 4


def test_trailer_fields_past_64_from_an_h2_server_are_dropped_and_counted(weir_factory, h2o):
    # the HTTP/2 client codec keeps a trailing HEADERS as a list of at
    # most 64 fields: x-checksum, x-more and 62 of the 70 asked for
    o = h2o()
    w = h2c_weir(weir_factory, o, workers=1)
    before = fetch_metrics(w.stats_port).error("trailer_dropped")
    c = Client(w.port, timeout=slack(10))
    r = c.request("GET", "/trailers?" + "&".join("t=x-f%d:%d" % (i, i) for i in range(70)))
    c.close()
    assert r.status == 200 and r.chunked, r
    assert [n.lower() for n, _ in r.trailers] == ["x-checksum", "x-more"] + ["x-f%d" % i for i in range(62)]
    assert fetch_metrics(w.stats_port).error("trailer_dropped") == before + 8


@pytest.mark.normal_only
def test_an_upload_the_server_stops_taking_waits_without_spinning(weir_factory, h2o):
    """The server gives no window back: weir stops framing the body (the
    client's bytes stay in the client's socket) and burns no CPU while it
    waits; timeouts.upstream_send ends it."""
    o = h2o()
    w = h2c_weir(weir_factory, o, workers=1, timeouts={"upstream_send": "3s", "client_body": "10s"})
    pid = w.worker_pids()[0]
    c = Client(w.port, timeout=slack(10))
    c.send(b"POST /stall HTTP/1.1\r\nHost: localhost\r\nContent-Length: 4000000\r\n\r\n")
    def push():
        try:
            c.sock.sendall(b"x" * 4000000)
        except OSError:
            pass  # weir gave up on the request
    threading.Thread(target=push, daemon=True).start()
    wait_until(lambda: o.streams == 1, slack(3), what="the stream at the server")
    __import__("time").sleep(0.5)
    cpu0 = sum(int(x) for x in proc_stat(pid)[11:13])
    __import__("time").sleep(1.5)
    cpu1 = sum(int(x) for x in proc_stat(pid)[11:13])
    assert cpu1 - cpu0 < 50, (cpu0, cpu1)  # clock ticks: under a third of 1.5 s
    r = c.read_response("POST")
    assert r.status == 504
    c.close()


@pytest.fixture
def pki(tmp_path):
    d = str(tmp_path / "pki")
    os.mkdir(d)
    ca = make_ca(d, "ca", "ca")
    cert, key = make_leaf(d, "leaf", "/CN=api.internal", [san("api.internal")])
    return {"ca": ca, "cert": cert, "key": key}


def tls_weir(weir_factory, o, pki):
    raw = 'protocol = "h2"; tls = { ca = "%s"; sni = "api.internal"; };' % pki["ca"]
    return weir_factory(upstreams=[{"name": "h2", "servers": [o.addr], "raw": raw}],
                        routes=[{"path": "/", "upstream": "h2"}], workers=1)


def test_h2_over_tls_with_alpn(weir_factory, h2o, pki):
    o = h2o(tls=(pki["cert"], pki["key"]))
    w = tls_weir(weir_factory, o, pki)
    r = get(w.port, "/echo")
    assert r.status == 200, r
    e = json.loads(r.body)
    assert e["scheme"] == "https"
    c = H2Client(w.port)
    rs = c.wait([c.request("/bytes/100000"), c.request("/echo")], slack(10))
    assert rs[0]["body"] == pattern(100000) and rs[1]["status"] == 200
    c.close()
    assert o.connections == 1


def test_a_tls_server_that_does_not_pick_h2_is_a_connect_failure(weir_factory, h2o, pki):
    o = h2o(tls=(pki["cert"], pki["key"]), alpn=("http/1.1",))
    w = tls_weir(weir_factory, o, pki)
    r = get(w.port, "/echo")
    assert r.status == 502
    m = fetch_metrics(w.stats_port)
    assert m("weir_errors_total", kind="upstream_alpn") == 1  # once, with the answer
    w.logged(lambda l: "did not pick h2" in l)


def test_weir_t_rejects_bad_protocols_and_combinations(tmp_path):
    def check(raw, needle, want):
        text = render_config(str(tmp_path), free_port(), free_port(),
                             [{"name": "u", "servers": ["127.0.0.1:1"], "raw": raw}],
                             [{"path": "/", "upstream": "u"}])
        text = text.replace(raw, "\n" + raw.replace("; ", ";\n") + "\n")
        rc, err, where = weir_check(tmp_path, text, needle)
        assert rc != 0 and where + "" in err and want in err, err
    check('protocol = "h3";', 'protocol = "h3"', "protocol")
    check('protocol = "h2";', 'protocol = "h2"', "needs the group's tls")
    check('protocol = "h2c"; tls = { verify = false; };', 'protocol = "h2c"', "without TLS")
    check('protocol = "h2c"; proxy_protocol = "v1";', 'protocol = "h2c"', "PROXY header")
    check('protocol = "h2c"; health = { type = "http"; };', 'health = {', "speaks HTTP/1.1")


def test_weir_t_rejects_an_h2_group_as_a_mirror_or_forward_auth_group(tmp_path):
    ups = [{"name": "u", "servers": ["127.0.0.1:1"]},
           {"name": "h", "servers": ["127.0.0.1:2"], "raw": 'protocol = "h2c";'}]
    for extra, want in (('mirror = { upstream = "h"; percent = 100; };', "a shadow group is plain HTTP"),
                        ('auth = { type = "forward"; upstream = "h"; path = "/auth"; };',
                         "must be a plain HTTP group")):
        text = render_config(str(tmp_path), free_port(), free_port(), ups,
                             [{"path": "/", "upstream": "u", "extra": extra}])
        rc, err, where = weir_check(tmp_path, text, extra)
        assert rc != 0 and want in err, err


# ---- gRPC end to end (item 5): python3-grpcio on both sides of weir ----

class GrpcEcho:
    """A grpcio server with generic handlers: /e.Echo/Unary,
    /e.Echo/ClientStream (the messages joined), /e.Echo/ServerStream (the
    request's bytes back in 4 messages), /e.Echo/Bidi (each message back),
    /e.Echo/NotFound (aborts NOT_FOUND), /e.Echo/Sleep (3 s; notes the
    cancel)."""

    def __init__(self):
        import grpc
        from concurrent import futures
        self.cancelled = threading.Event()
        ident = dict(request_deserializer=lambda b: b, response_serializer=lambda b: b)

        def unary(req, ctx):
            return req

        def client_stream(it, ctx):
            return b"".join(it)

        def server_stream(req, ctx):
            q = max(1, len(req) // 4)
            for i in range(0, len(req), q):
                yield req[i:i + q]

        def bidi(it, ctx):
            for m in it:
                yield m

        def not_found(req, ctx):
            ctx.abort(grpc.StatusCode.NOT_FOUND, "no such thing: %d bytes" % len(req))

        def sleep(req, ctx):
            ctx.add_callback(self.cancelled.set)
            for _ in range(30):
                if not ctx.is_active():
                    break
                __import__("time").sleep(0.1)
            return req

        handlers = {
            "Unary": grpc.unary_unary_rpc_method_handler(unary, **ident),
            "ClientStream": grpc.stream_unary_rpc_method_handler(client_stream, **ident),
            "ServerStream": grpc.unary_stream_rpc_method_handler(server_stream, **ident),
            "Bidi": grpc.stream_stream_rpc_method_handler(bidi, **ident),
            "NotFound": grpc.unary_unary_rpc_method_handler(not_found, **ident),
            "Sleep": grpc.unary_unary_rpc_method_handler(sleep, **ident),
        }
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        self.server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("e.Echo", handlers),))
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.addr = "127.0.0.1:%d" % self.port
        self.server.start()

    def stop(self):
        self.server.stop(0)


@pytest.fixture
def grpc_through_weir(weir_factory):
    grpc = pytest.importorskip("grpc")
    srv = GrpcEcho()
    w = weir_factory(upstreams=[{"name": "g", "servers": [srv.addr], "raw": 'protocol = "h2c";'}],
                     routes=[{"path": "/", "upstream": "g"}], workers=1)
    ch = grpc.insecure_channel("127.0.0.1:%d" % w.port)
    yield grpc, ch, srv, w
    ch.close()
    srv.stop()


def ident(ch, kind, name):
    return getattr(ch, kind)("/e.Echo/" + name, request_serializer=lambda b: b, response_deserializer=lambda b: b)


def test_grpc_unary_and_streaming_echo_byte_for_byte(grpc_through_weir):
    grpc, ch, srv, w = grpc_through_weir
    data = os.urandom(200000)
    assert ident(ch, "unary_unary", "Unary")(data, timeout=slack(10)) == data
    parts = [os.urandom(5000 + i) for i in range(20)]
    assert ident(ch, "stream_unary", "ClientStream")(iter(parts), timeout=slack(10)) == b"".join(parts)
    assert b"".join(ident(ch, "unary_stream", "ServerStream")(data, timeout=slack(10))) == data
    assert list(ident(ch, "stream_stream", "Bidi")(iter(parts), timeout=slack(10))) == parts


def test_grpc_bidi_is_full_duplex_ping_pong(grpc_through_weir):
    """Each message is answered before the next is sent: nothing of the
    request may wait for its end (no buffering of a gRPC body)."""
    import queue
    grpc, ch, srv, w = grpc_through_weir
    q = queue.Queue()
    first = os.urandom(100)

    def gen():
        yield first
        for _ in range(4):
            m = q.get(timeout=slack(5))
            if m is None:
                return
            yield m[::-1]
    got = []
    for m in ident(ch, "stream_stream", "Bidi")(gen(), timeout=slack(10)):
        got.append(m)
        q.put(m if len(got) < 5 else None)
    assert got[0] == first and len(got) == 5
    for a, b in zip(got, got[1:]):
        assert b == a[::-1]


def test_grpc_abort_not_found_arrives_with_status_and_details(grpc_through_weir):
    grpc, ch, srv, w = grpc_through_weir
    with pytest.raises(grpc.RpcError) as e:
        ident(ch, "unary_unary", "NotFound")(b"abc", timeout=slack(10))
    assert e.value.code() == grpc.StatusCode.NOT_FOUND
    assert e.value.details() == "no such thing: 3 bytes"


def test_grpc_deadline_is_deadline_exceeded_and_the_upstream_sees_the_cancel(grpc_through_weir):
    grpc, ch, srv, w = grpc_through_weir
    with pytest.raises(grpc.RpcError) as e:
        ident(ch, "unary_unary", "Sleep")(b"x", timeout=0.5)
    assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert srv.cancelled.wait(slack(3))
