"""A client that leaves while its request waits on the upstream: weir
closes the upstream request (the origin sees its connection close, no work
is done for nobody), logs 499 as nginx does, and counts it
(weir_errors_total{kind="client_aborted"}). abort_on_client_close = false
keeps the request going for clients that half-close after sending (as
HAProxy's default)."""
import socket
import time

from harness import Client, wait_until, slack
from test_tls import certs, start_tls_weir, client_ctx, tls_connect  # noqa: F401  (certs is a fixture)
from test_websocket import RawOrigin


class HoldingOrigin(RawOrigin):
    """Reads each request head and never answers; .closed has the request
    line of each connection once weir closes it."""

    def __init__(self):
        self.closed = []
        super().__init__(self.hold)

    def hold(self, s, head, rest):
        s.settimeout(30)
        while s.recv(4096):
            pass
        self.closed.append(head.split("\r\n")[0].encode())
        return rest


def read_to_eof(s):
    """What <s> gets until the peer closes (a reset ends it too)."""
    data = b""
    while True:
        try:
            b = s.recv(65536)
        except ConnectionResetError:
            break
        if not b:
            break
        data += b
    return data


def start(weir_factory, extra=""):
    o = HoldingOrigin()
    w = weir_factory(upstreams=[{"name": "h", "servers": [o.addr]}],
                     routes=[{"path": "/", "upstream": "h"}],
                     timeouts={"upstream_read": "20s"}, extra=extra)
    return w, o


def send(w, target):
    s = socket.create_connection(("127.0.0.1", w.port))
    s.sendall(b"GET %s HTTP/1.1\r\nHost: t\r\n\r\n" % target.encode())
    return s


def logged_499(w, target, proto="HTTP/1.1", method="GET"):
    wait_until(lambda: any('"%s %s %s" 499' % (method, target, proto) in l for l in w.access_lines()), slack(3),
               what="a 499 access line")


def test_a_client_that_closes_while_waiting_closes_the_upstream_request_logged_499(weir_factory):
    w, o = start(weir_factory)
    before = w.metrics().error("client_aborted")
    s = send(w, "/wait/1")
    wait_until(lambda: o.heads, slack(3), what="the request at the origin")
    s.close()
    wait_until(lambda: o.closed, slack(3), what="the origin's connection closed")
    assert o.closed == [b"GET /wait/1 HTTP/1.1"]
    logged_499(w, "/wait/1")
    assert w.metrics().error("client_aborted") == before + 1
    w.logged(lambda l: "client closed the connection before its answer" in l)
    o.stop()


def test_a_client_reset_while_waiting_is_the_same(weir_factory):
    w, o = start(weir_factory)
    s = send(w, "/wait/2")
    wait_until(lambda: o.heads, slack(3), what="the request at the origin")
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    s.close()  # RST
    wait_until(lambda: o.closed, slack(3), what="the origin's connection closed")
    wait_until(lambda: w.metrics().error("client_aborted") == 1, slack(3), what="the abort counted")
    o.stop()


def test_a_half_close_keeps_the_request_when_abort_on_client_close_is_off(weir_factory, origin):
    w = weir_factory(upstreams=[{"name": "a", "servers": [origin.addr]}],
                     routes=[{"path": "/", "upstream": "a"}], extra="abort_on_client_close = false;")
    s = socket.create_connection(("127.0.0.1", w.port))
    s.settimeout(slack(5))
    s.sendall(b"GET /slow/300 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    s.shutdown(socket.SHUT_WR)
    data = read_to_eof(s)
    assert data.startswith(b"HTTP/1.1 200 ")
    assert w.metrics().error("client_aborted") == 0


def test_a_half_close_is_an_abort_by_default(weir_factory):
    w, o = start(weir_factory)
    s = send(w, "/wait/3")
    wait_until(lambda: o.heads, slack(3), what="the request at the origin")
    s.shutdown(socket.SHUT_WR)
    wait_until(lambda: o.closed, slack(3), what="the origin's connection closed")
    s.settimeout(slack(3))
    assert s.recv(4096) == b""  # closed, no answer: nobody reads one
    s.close()
    o.stop()


def stream_half_closed(w):
    """An event stream (six ticks 200 ms apart) whose client half-closes
    once the first tick came: what it got."""
    s = socket.create_connection(("127.0.0.1", w.port))
    s.settimeout(slack(10))
    s.sendall(b"GET /drip/6/200 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    data = b""
    while b"tick 0" not in data:
        data += s.recv(65536)
    s.shutdown(socket.SHUT_WR)
    data += read_to_eof(s)
    s.close()
    return data


def test_a_half_close_during_a_stream_cuts_it_unless_abort_on_client_close_is_off(weir_factory, origin):
    # nginx's way: the client said it is gone; a long poll or event stream
    # would otherwise hold its upstream until the next byte fails
    w = weir_factory(upstreams=[{"name": "a", "servers": [origin.addr]}], routes=[{"path": "/", "upstream": "a"}])
    data = stream_half_closed(w)
    assert b"tick 0" in data and b"tick 5" not in data
    wait_until(lambda: w.metrics().error("client_aborted") == 1, slack(3), what="the abort counted")
    # its head went out: logged with the status sent, as nginx does
    wait_until(lambda: any('"GET /drip/6/200 HTTP/1.1" 200' in l for l in w.access_lines()), slack(3),
               what="the access line")
    w2 = weir_factory(upstreams=[{"name": "a", "servers": [origin.addr]}], routes=[{"path": "/", "upstream": "a"}],
                      extra="abort_on_client_close = false;")
    data = stream_half_closed(w2)
    assert data.endswith(b"tick 5\n\r\n0\r\n\r\n")
    assert w2.metrics().error("client_aborted") == 0


def test_an_http2_cancel_closes_the_upstream_request_logged_499(weir_factory):
    from h2util import H2Client
    w, o = start(weir_factory)
    c = H2Client(w.port)
    sid = c.request("/wait/h2")
    wait_until(lambda: o.heads, slack(3), what="the request at the origin")
    c.conn.reset_stream(sid, 8)  # CANCEL
    c.flush()
    wait_until(lambda: o.closed, slack(3), what="the origin's connection closed")
    logged_499(w, "/wait/h2", "HTTP/2.0")
    c.close()
    o.stop()


def test_a_tls_client_that_closes_while_waiting_is_the_same(weir_factory, certs):
    o = HoldingOrigin()
    w = start_tls_weir(weir_factory, o, [certs["ec"]], timeouts={"upstream_read": "20s"})
    s = tls_connect(w.port, client_ctx(certs), "app.test")
    s.sendall(b"GET /wait/tls HTTP/1.1\r\nHost: app.test\r\n\r\n")
    wait_until(lambda: o.heads, slack(3), what="the request at the origin")
    s.unwrap()  # close_notify
    s.close()
    wait_until(lambda: o.closed, slack(3), what="the origin's connection closed")
    logged_499(w, "/wait/tls")
    o.stop()


def test_requests_pipelined_before_a_half_close_are_all_answered(weir_factory, origin):
    # as nginx: bytes still to be read say the client waits for answers
    w = weir_factory(upstreams=[{"name": "a", "servers": [origin.addr]}], routes=[{"path": "/", "upstream": "a"}])
    s = socket.create_connection(("127.0.0.1", w.port))
    s.settimeout(slack(5))
    s.sendall(b"GET /slow/300 HTTP/1.1\r\nHost: t\r\n\r\nGET /slow/100 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    s.shutdown(socket.SHUT_WR)
    data = read_to_eof(s)
    assert data.count(b"HTTP/1.1 200 ") == 2 and data.endswith(b"slow\n")
    assert w.metrics().error("client_aborted") == 0


def test_a_pipelined_request_cut_by_the_close_is_dropped_at_once(weir_factory, origin):
    w = weir_factory(upstreams=[{"name": "a", "servers": [origin.addr]}], routes=[{"path": "/", "upstream": "a"}],
                     timeouts={"client_header": "10s"})
    s = socket.create_connection(("127.0.0.1", w.port))
    s.settimeout(slack(5))
    s.sendall(b"GET /slow/100 HTTP/1.1\r\nHost: t\r\n\r\nGET /slow/100 HTT")
    s.shutdown(socket.SHUT_WR)
    t0 = time.monotonic()
    data = read_to_eof(s)
    assert data.count(b"HTTP/1.1 ") == 1 and data.endswith(b"slow\n")
    assert time.monotonic() - t0 < 5  # not held to client_header


def test_a_route_says_otherwise_than_the_top_level_both_ways(weir_factory, origin):
    def half_closed_get(w, path):
        s = socket.create_connection(("127.0.0.1", w.port))
        s.settimeout(slack(5))
        s.sendall(b"GET %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n" % path)
        s.shutdown(socket.SHUT_WR)
        data = read_to_eof(s)
        s.close()
        return data
    ups = [{"name": "a", "servers": [origin.addr]}]
    # /echo/slow/MS and /slow/MS: both answer after MS
    w = weir_factory(upstreams=ups, routes=[{"path": "/echo/", "upstream": "a", "extra": "abort_on_client_close = false; "},
                                            {"path": "/", "upstream": "a"}])
    assert half_closed_get(w, b"/echo/slow/300").startswith(b"HTTP/1.1 200 ")
    assert half_closed_get(w, b"/slow/300") == b""
    wait_until(lambda: w.metrics().error("client_aborted") == 1, slack(3), what="the abort counted")
    w2 = weir_factory(upstreams=ups, routes=[{"path": "/echo/", "upstream": "a", "extra": "abort_on_client_close = true; "},
                                             {"path": "/", "upstream": "a"}], extra="abort_on_client_close = false;")
    assert half_closed_get(w2, b"/echo/slow/300") == b""
    assert half_closed_get(w2, b"/slow/300").startswith(b"HTTP/1.1 200 ")


# ---- a client that leaves while its request waits on a control -----------
# (a rate limit's delay, a place in the upstream's queue, a retry's
# backoff, a forward auth answer): the wait ends at once, logged 499 and
# counted as during a wait on the upstream, and what it held goes back

def aborted_at_once(w, target, why, method="GET"):
    logged_499(w, target, method=method)
    assert w.metrics().error("client_aborted") == 1
    w.logged(lambda l: "client closed the connection before its answer; " + why in l)


def delay_weir(weir_factory, origin):
    """A route whose limit, from rest, lets one request through at once
    and delays the next a minute."""
    return weir_factory(upstreams=[{"name": "a", "servers": [origin.addr]}],
                        routes=[{"path": "/", "upstream": "a", "extra": 'rate_limits = [ "d" ]; '}],
                        extra='rate_limits = ( { name = "d"; key = "client_ip"; rate = "1/m"; burst = 1; '
                              'mode = "delay"; } );')


def wait_delayed(w):
    wait_until(lambda: w.metrics()("weir_rate_limit_decisions_total", limit="d", result="delayed") == 1,
               slack(3), what="the request delayed")


def test_a_client_that_leaves_during_a_rate_limit_delay_is_gone_at_once(weir_factory, origin):
    w = delay_weir(weir_factory, origin)
    with w.client() as c:
        assert c.request("GET", "/echo/first").status == 200  # from rest: at once
    s = send(w, "/echo/delayed")  # its turn is a minute away
    wait_delayed(w)
    s.close()
    aborted_at_once(w, "/echo/delayed", "its rate limit delay ended")
    assert not origin.requests("/echo/delayed")


def post_head(w, target, length, first=b""):
    """A POST of a <length>-byte body whose head and <first> bytes of it are
    sent, the rest not yet."""
    s = socket.create_connection(("127.0.0.1", w.port))
    s.sendall(b"POST %s HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % (target.encode(), length) + first)
    return s


def test_a_client_that_leaves_mid_body_during_a_rate_limit_delay_is_gone_at_once(weir_factory, origin):
    """Its body still to come: the close is seen during the delay all the
    same (the body's bytes are read into the room of its buffer), not a
    minute later when the delay would end."""
    w = delay_weir(weir_factory, origin)
    with w.client() as c:
        assert c.request("GET", "/echo/first").status == 200
    s = post_head(w, "/upload", 100000, b"x" * 10)
    wait_delayed(w)
    s.sendall(b"y" * 2000)  # read while it waits
    s.close()
    aborted_at_once(w, "/upload", "its rate limit delay ended", method="POST")
    assert not origin.requests("/upload")


def test_an_http2_cancel_during_a_rate_limit_delay_is_logged_499(weir_factory, origin):
    from h2util import H2Client
    w = delay_weir(weir_factory, origin)
    c = H2Client(w.port)
    c.request("/echo/first")
    sid = c.request("/echo/delayed")
    wait_delayed(w)
    c.conn.reset_stream(sid, 8)  # CANCEL
    c.flush()
    logged_499(w, "/echo/delayed", "HTTP/2.0")
    c.close()
    assert not origin.requests("/echo/delayed")


def queue_weir(weir_factory, servers):
    raw = 'limits = { max_requests = 1; max_pending = 2; queue_timeout = "20s"; };'
    return weir_factory(upstreams=[{"name": "g", "servers": servers, "max_fails": 0, "raw": raw}],
                        routes=[{"path": "/", "upstream": "g"}], timeouts={"upstream_read": "20s"}, workers=1)


def queue_depth(w):
    return w.metrics()("weir_upstream_queue_depth", upstream="g")


def test_a_client_that_leaves_the_upstream_queue_gives_its_place_up_at_once(weir_factory):
    o = HoldingOrigin()
    w = queue_weir(weir_factory, [o.addr])
    first = send(w, "/first")
    wait_until(lambda: o.heads, slack(3), what="the first request at the origin")
    s = send(w, "/queued")
    wait_until(lambda: queue_depth(w) == 1, slack(3), what="the second request queued")
    s.close()
    wait_until(lambda: queue_depth(w) == 0, slack(3), what="the queue emptied")
    aborted_at_once(w, "/queued", "its place in the upstream's queue given up")
    first.close()
    wait_until(lambda: o.closed, slack(3), what="the first request's connection closed")
    assert o.closed == [b"GET /first HTTP/1.1"]
    o.stop()


def test_a_client_that_leaves_mid_body_gives_its_queue_place_up_at_once(weir_factory):
    o = HoldingOrigin()
    w = queue_weir(weir_factory, [o.addr])
    first = send(w, "/first")
    wait_until(lambda: o.heads, slack(3), what="the first request at the origin")
    s = post_head(w, "/queued", 100000, b"z" * 100)  # past body_buffer: it streams
    wait_until(lambda: queue_depth(w) == 1, slack(3), what="the second request queued")
    s.close()
    wait_until(lambda: queue_depth(w) == 0, slack(3), what="the queue emptied")
    aborted_at_once(w, "/queued", "its place in the upstream's queue given up", method="POST")
    first.close()
    wait_until(lambda: o.closed, slack(3), what="the first request's connection closed")
    assert o.closed == [b"GET /first HTTP/1.1"]
    o.stop()


def test_a_body_sent_during_a_queue_wait_reaches_the_upstream_whole(weir_factory, origin):
    """What is read of the body while the request waits stays for its
    body phase: the upstream gets every byte, in order, and a body larger
    than the buffer's room goes on from the socket once the wait is over."""
    import hashlib
    import os
    w = queue_weir(weir_factory, [origin.addr])
    for i, (n, early) in enumerate(((100000, 5000), (300000, 40000))):  # past body_buffer: they stream
        first = send(w, "/slow/1000?%d" % i)  # holds the group's one place for a second
        wait_until(lambda: origin.requests("/slow/1000?%d" % i), slack(3), what="the slow request at the origin")
        body = os.urandom(n)
        with Client(w.port, timeout=10) as c:
            c.send(b"POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % n + body[:7])
            wait_until(lambda: queue_depth(w) == 1, slack(3), what="the upload queued")
            c.send(body[7:early])  # during the wait: 5000 fit the buffer's room, 40000 do not
            wait_until(lambda: queue_depth(w) == 0, slack(5), what="the upload on its way")
            c.send(body[early:])
            r = c.read_response()
        assert r.status == 200, r
        assert r.json() == {"body_len": n, "body_sha256": hashlib.sha256(body).hexdigest()}, (n, r.json())
        first.close()
    assert w.metrics().error("client_aborted") == 0


def test_requests_pipelined_during_a_wait_are_kept_and_answered(weir_factory, origin):
    # read while it waits in the queue, with the client's half-close
    # behind them: bytes still to be answered, so no abort
    w = queue_weir(weir_factory, [origin.addr])
    first = send(w, "/slow/1000")
    wait_until(lambda: origin.requests("/slow/1000"), slack(3), what="the first request at the origin")
    s = socket.create_connection(("127.0.0.1", w.port))
    s.settimeout(slack(10))
    s.sendall(b"GET /slow/100 HTTP/1.1\r\nHost: t\r\n\r\n")
    wait_until(lambda: queue_depth(w) == 1, slack(3), what="the second request queued")
    s.sendall(b"GET /echo/third HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    s.shutdown(socket.SHUT_WR)
    data = read_to_eof(s)
    assert data.count(b"HTTP/1.1 200 ") == 2 and b"/echo/third" in data, data
    assert w.metrics().error("client_aborted") == 0
    first.close()


def test_a_client_that_leaves_during_a_retry_backoff_cancels_the_retry(weir_factory, origin_factory):
    a = origin_factory("A")
    raw = 'retry = { on = [ "503" ]; attempts = 2; retry_after_max = "10s"; };'
    w = weir_factory(upstreams=[{"name": "g", "servers": [a.addr], "max_fails": 0, "raw": raw}],
                     routes=[{"path": "/", "upstream": "g"}], workers=1)
    s = send(w, "/retry-after/503/5")  # 503 and Retry-After: 5, the wait before the retry
    wait_until(lambda: a.requests("/retry-after"), slack(3), what="the first try at the origin")
    time.sleep(0.2)
    s.close()
    aborted_at_once(w, "/retry-after/503/5", "its retry cancelled")
    assert len(a.requests("/retry-after")) == 1


def test_a_client_that_leaves_while_forward_auth_decides_abandons_the_subrequest(weir_factory, origin):
    o = HoldingOrigin()
    auth = 'auth = { type = "forward"; upstream = "authsvc"; path = "/auth"; };'
    w = weir_factory(upstreams=[{"name": "a", "servers": [origin.addr]}, {"name": "authsvc", "servers": [o.addr]}],
                     routes=[{"path": "/", "upstream": "a", "extra": auth}])
    s = send(w, "/echo/guarded")
    wait_until(lambda: o.heads, slack(3), what="the subrequest at the auth service")
    s.close()
    wait_until(lambda: o.closed, slack(3), what="the subrequest's connection closed")
    assert o.closed == [b"GET /auth HTTP/1.1"]
    aborted_at_once(w, "/echo/guarded", "its forward auth subrequest abandoned")
    assert not origin.requests("/echo/guarded")
    o.stop()
