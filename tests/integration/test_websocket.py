"""WebSocket and other Upgrade tunnels (worker/core/tunnel.c).

Against a real WebSocket origin (tests/origin/ws_origin.py, Debian's
python3-websockets) for the protocol, and against raw socket origins for
what a library would never send: a 200 or 400 instead of the 101, data in
the same segment as the 101, a 101 nobody asked for.
"""

import asyncio
import os
import select
import socket
import subprocess
import threading
import time

import pytest
import websockets

from harness import (PYTHON, REPO, WEIR_BIN, Client, kill_and_reap, pid_alive, slack,
                     wait_until)

WS_ORIGIN_PY = os.path.join(REPO, "tests", "origin", "ws_origin.py")
KEY = "dGhlIHNhbXBsZSBub25jZQ=="


class WsOrigin:
    def __init__(self, tmpdir):
        self.err = open(os.path.join(str(tmpdir), "ws-origin.err"), "wb")
        self.proc = subprocess.Popen([PYTHON, WS_ORIGIN_PY, "--listen", "127.0.0.1:0"],
                                     stdout=subprocess.PIPE, stderr=self.err,
                                     start_new_session=True)
        r, _, _ = select.select([self.proc.stdout], [], [], slack(10))
        line = self.proc.stdout.readline() if r else b""
        if not line.startswith(b"ready"):
            raise AssertionError("ws origin did not start: %r" % line)
        self.addr = line.split()[1].decode()

    def stop(self):
        kill_and_reap(self.proc)
        self.proc.stdout.close()
        self.err.close()


@pytest.fixture
def ws_origin(tmp_path):
    o = WsOrigin(tmp_path)
    yield o
    o.stop()


def start_weir(weir_factory, addr, upgrade=None, timeouts=None, workers=1):
    route = {"path": "/", "upstream": "ws"}
    if upgrade is not None:
        route["upgrade"] = upgrade
    return weir_factory(upstreams=[{"name": "ws", "servers": [addr]}], routes=[route],
                        timeouts=timeouts, workers=workers)


@pytest.fixture
def wsweir(weir_factory, ws_origin):
    return start_weir(weir_factory, ws_origin.addr)


def url(w, path="/echo"):
    return "ws://127.0.0.1:%d%s" % (w.port, path)


def connect(w, path="/echo", **kw):
    return websockets.connect(url(w, path), max_size=None, compression=None,
                              ping_interval=None, open_timeout=slack(5), close_timeout=slack(5), **kw)


async def echo(ws, msg):
    await ws.send(msg)
    assert await ws.recv() == msg


def run(coro, timeout=30):
    return asyncio.run(asyncio.wait_for(coro, slack(timeout)))


# ---- a raw origin: one thread, a handler per accepted connection ----------

class RawOrigin:
    """Accepts connections; <handler>(sock, head, rest) answers each. Keeps
    what arrived after the request head (and after the handler) in .extra."""

    def __init__(self, handler):
        self.handler = handler
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.addr = "127.0.0.1:%d" % self.sock.getsockname()[1]
        self.heads = []
        self.extra = []
        self.threads = []
        self.stopping = False
        t = threading.Thread(target=self.loop, daemon=True)
        t.start()

    def loop(self):
        while not self.stopping:
            try:
                s, _ = self.sock.accept()
            except OSError:
                return
            t = threading.Thread(target=self.serve, args=(s,), daemon=True)
            t.start()
            self.threads.append(t)

    def serve(self, s):
        s.settimeout(slack(5))
        data = b""
        try:
            while b"\r\n\r\n" not in data:
                got = s.recv(65536)
                if not got:
                    return
                data += got
            head, rest = data.split(b"\r\n\r\n", 1)
            self.heads.append(head.decode("latin-1"))
            rest = self.handler(s, head.decode("latin-1"), rest)
            # whatever else comes: kept, never answered
            s.settimeout(0.5)
            while True:
                try:
                    got = s.recv(65536)
                except socket.timeout:
                    break
                if not got:
                    break
                rest = (rest or b"") + got
            self.extra.append(rest or b"")
        except OSError:
            pass
        finally:
            s.close()

    def stop(self):
        self.stopping = True
        self.sock.close()
        for t in self.threads:
            t.join(slack(3))


def upgrade_request(path="/raw", extra_headers=""):
    return ("GET %s HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n%s\r\n" % (path, KEY, extra_headers)).encode()


def read_until_close(s, timeout=3.0):
    s.settimeout(slack(timeout))
    out = b""
    while True:
        try:
            got = s.recv(65536)
        except socket.timeout:
            return out, False
        except ConnectionResetError:
            return out, True
        if not got:
            return out, True
        out += got


# ---- against a real WebSocket origin ----------------------------------------

SIZES = [1, 125, 126, 65535, 65536, 1 << 20]


def test_messages_of_every_size_go_through_byte_for_byte(wsweir):
    m0 = wsweir.metrics()

    async def go():
        async with connect(wsweir) as ws:
            for n in SIZES:
                text = "".join(chr(0x41 + i % 26) for i in range(n))
                await ws.send(text)
                assert await ws.recv() == text
                blob = os.urandom(n)
                await ws.send(blob)
                assert await ws.recv() == blob
            pong = await ws.ping(b"are you there")
            await asyncio.wait_for(pong, slack(5))

    run(go())
    wait_until(lambda: wsweir.metrics()("weir_tunnels_active") == 0, slack(5), what="tunnel closed")
    m1 = wsweir.metrics()
    assert m1("weir_tunnels_opened_total") - m0("weir_tunnels_opened_total") == 1
    payload = 2 * sum(SIZES)
    # frame headers and the client's masks ride on top of the payload
    assert m1("weir_tunnel_bytes_total", direction="upstream") >= payload
    assert m1("weir_tunnel_bytes_total", direction="client") >= payload
    # RFC 6455 7.1.1: after the close handshake the server closes first
    assert m1("weir_tunnels_closed_total", by="upstream") - m0("weir_tunnels_closed_total", by="upstream") == 1
    assert m1("weir_responses_total", **{"class": "1xx"}) - m0("weir_responses_total", **{"class": "1xx"}) == 1
    wait_until(lambda: '"GET /echo HTTP/1.1" 101 ' in wsweir.read(wsweir.access_log), slack(5),
               what="the tunnel's access log line")


def test_a_16_mib_message_each_way(wsweir):
    async def go():
        async with connect(wsweir) as ws:
            blob = os.urandom(16 << 20)
            await ws.send(blob)
            assert await ws.recv() == blob
            text = "z" * (16 << 20)
            await ws.send(text)
            assert await ws.recv() == text

    run(go(), timeout=60)


def test_close_codes_go_through_both_ways(wsweir):
    async def go():
        ws = await connect(wsweir)
        await echo(ws, "x")
        await ws.close(4001, "client bye")
        assert ws.close_code == 4001  # echoed back by the origin's close frame
        assert ws.close_reason == "client bye"
        ws = await connect(wsweir, "/close/4002")
        with pytest.raises(websockets.ConnectionClosed) as e:
            await ws.recv()
        assert e.value.rcvd.code == 4002 and e.value.rcvd.reason == "bye"
        await ws.wait_closed()

    run(go())


def test_a_thousand_sockets_at_once(weir_factory, ws_origin):
    # one Python origin answers a thousand handshakes: slow on a loaded machine
    # and a client of a thousand tasks may send a handshake seconds after
    # its connection was accepted
    w = start_weir(weir_factory, ws_origin.addr, workers=2,
                   timeouts={"client_header": "10s", "upstream_connect": "10s", "upstream_read": "20s"})
    n = 1000

    async def one(i, opened, go_on):
        async with connect(w) as ws:
            opened.append(1)
            await go_on.wait()
            msg = "socket %d" % i
            await ws.send(msg)
            assert await ws.recv() == msg

    async def go():
        opened, go_on = [], asyncio.Event()
        sem = asyncio.Semaphore(200)  # bounded opening rate, all kept open

        async def gated(i):
            async with sem:
                pass
            await one(i, opened, go_on)

        tasks = [asyncio.ensure_future(gated(i)) for i in range(n)]
        while len(opened) < n:
            await asyncio.sleep(0.05)
            for t in tasks:
                if t.done() and t.exception():
                    raise t.exception()
        assert w.metrics()("weir_tunnels_active") == n
        go_on.set()
        await asyncio.gather(*tasks)

    # the client's thousand tasks are the slow part: beside the sanitizer
    # suite on a loaded machine they took more than 50 s
    run(go(), timeout=120)
    wait_until(lambda: w.metrics()("weir_tunnels_active") == 0, slack(10), what="tunnels closed")
    assert w.metrics()("weir_tunnels_opened_total") == n


def reload_with_a_tunnel(weir_factory, ws_origin, drain, tunnel_drain, then):
    """One worker, a tunnel opened and used, SIGHUP, then <then>(w, ws,
    old pids) with the tunnel still open; afterwards the old worker must
    exit. Returns weir's metrics."""
    import signal
    w = start_weir(weir_factory, ws_origin.addr, timeouts={"drain": drain, "tunnel_drain": tunnel_drain})
    old = w.wait_workers(1)

    async def go():
        async with connect(w) as ws:
            await echo(ws, "before")
            w.signal(signal.SIGHUP)
            await then(w, ws, old)

    run(go())
    wait_until(lambda: not any(pid_alive(p) for p in old), slack(5), what="old worker exits")
    return w.metrics()


def test_an_open_tunnel_survives_a_reload_on_its_draining_worker(weir_factory, ws_origin):
    async def then(w, ws, old):
        wait_until(lambda: [p for p in w.worker_pids() if p not in old], slack(10), what="new worker")
        # past timeouts.drain: the old worker stays for its tunnel
        await asyncio.sleep(1.5)
        assert all(pid_alive(p) for p in old)
        await echo(ws, "after")
        # a new tunnel: only the new worker accepts now
        async with connect(w) as ws2:
            await echo(ws2, "new")

    m = reload_with_a_tunnel(weir_factory, ws_origin, "1s", "30s", then)
    assert m("weir_tunnels_opened_total") == 2
    assert m("weir_tunnels_closed_total", by="drain") == 0


def test_a_draining_worker_cuts_its_tunnels_at_tunnel_drain(weir_factory, ws_origin):
    async def then(w, ws, old):
        with pytest.raises(websockets.ConnectionClosed):
            await asyncio.wait_for(ws.recv(), slack(10))

    m = reload_with_a_tunnel(weir_factory, ws_origin, "300ms", "1s", then)
    assert m("weir_tunnels_closed_total", by="drain") == 1
    assert m.error("drain_cut") >= 1
    assert m("weir_tunnels_active") == 0


def test_tunnels_on_draining_workers_do_not_use_up_the_route_generations(weir_factory, ws_origin):
    """Nine reloads in a row, each leaving a draining worker that keeps a
    tunnel: a tunnel holds no generation, and once only tunnels are left
    the worker no longer holds its last one either, so the eight route
    generations never run out."""
    import signal
    w = start_weir(weir_factory, ws_origin.addr, timeouts={"drain": "200ms", "tunnel_drain": "60s"})

    async def go():
        socks = []
        for i in range(9):
            ok = w.metrics()("weir_reloads_total", result="ok")
            ws = await connect(w)
            await echo(ws, "gen %d" % i)
            socks.append(ws)
            w.signal(signal.SIGHUP)
            wait_until(lambda: w.metrics()("weir_reloads_total", result="ok") > ok
                       or w.metrics()("weir_reloads_total", result="failed") > 0, slack(10), what="reload")
            assert w.metrics()("weir_reloads_total", result="failed") == 0, "reload %d failed" % i
            await asyncio.sleep(0.4)  # past timeouts.drain: only the tunnel is left
        for i, ws in enumerate(socks):
            await echo(ws, "still %d" % i)
            await ws.close()

    run(go(), timeout=50)


def test_the_idle_timeout_closes_a_tunnel_and_counts(weir_factory, ws_origin):
    w = start_weir(weir_factory, ws_origin.addr, timeouts={"tunnel": "500ms"})

    async def go():
        async with connect(w) as ws:
            await echo(ws, "x")
            t0 = time.monotonic()
            with pytest.raises(websockets.ConnectionClosed):
                await asyncio.wait_for(ws.recv(), slack(10))
            return time.monotonic() - t0

    took = run(go())
    assert took >= 0.4
    wait_until(lambda: w.metrics()("weir_tunnels_closed_total", by="idle_timeout") == 1, slack(5),
               what="idle close counted")


def test_an_empty_upgrade_list_turns_upgrades_off(weir_factory, ws_origin):
    w = start_weir(weir_factory, ws_origin.addr, upgrade=[])

    async def go():
        with pytest.raises(websockets.InvalidStatusCode):
            async with connect(w):
                pass

    run(go())
    assert w.metrics()("weir_tunnels_opened_total") == 0


# ---- raw origins --------------------------------------------------------------

@pytest.mark.parametrize("status", [200, 400])
def test_no_tunnel_without_a_101(weir_factory, status):
    """The upstream declines the upgrade: an ordinary response, the client
    connection closes after it, and neither the client's bytes after its
    head nor the upstream's after its response go anywhere as tunnel data
    or as a request."""
    def answer(s, head, rest):
        s.sendall(b"HTTP/1.1 %d X\r\nContent-Length: 2\r\n\r\nokUPSTREAM-TUNNEL-BYTES" % status)
        return rest

    o = RawOrigin(answer)
    try:
        w = start_weir(weir_factory, o.addr)
        m0 = w.metrics()
        s = socket.create_connection(("127.0.0.1", w.port))
        smuggled = b"GET /smuggled HTTP/1.1\r\nHost: localhost\r\n\r\n"
        s.sendall(upgrade_request() + smuggled)
        out, closed = read_until_close(s)
        s.close()
        assert out.startswith(b"HTTP/1.1 %d" % status), out
        head, body = out.split(b"\r\n\r\n", 1)
        assert body == b"ok", out
        assert b"connection: close" in head.lower()
        assert closed
        wait_until(lambda: len(o.extra) >= 1, slack(3), what="origin connection done")
        assert len(o.heads) == 1, o.heads
        assert b"/smuggled" not in b"".join(o.extra)
        assert "upgrade: websocket" in o.heads[0].lower()
        m1 = w.metrics()
        assert m1("weir_tunnels_opened_total") == m0("weir_tunnels_opened_total")
    finally:
        o.stop()


def test_bytes_with_either_head_are_forwarded_and_half_close_works(weir_factory):
    def answer(s, head, rest):
        s.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  b"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\nFROM-ORIGIN-AT-ONCE")
        got = rest
        s.settimeout(slack(5))
        while True:  # until the client's EOF comes through as ours
            b = s.recv(65536)
            if not b:
                break
            got += b
        s.sendall(b"BYE:" + got)
        s.shutdown(socket.SHUT_WR)
        return b""

    o = RawOrigin(answer)
    try:
        w = start_weir(weir_factory, o.addr)
        m0 = w.metrics()
        s = socket.create_connection(("127.0.0.1", w.port))
        s.sendall(upgrade_request() + b"CLIENT-EARLY")
        s.settimeout(slack(5))
        out = b""
        while b"FROM-ORIGIN-AT-ONCE" not in out:
            b = s.recv(65536)
            assert b, out
            out += b
        head, after = out.split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 101"), head
        low = head.lower()
        assert b"upgrade: websocket" in low and b"connection: upgrade" in low
        assert b"sec-websocket-accept: s3pplmbitxaq9kygzzhzrbk+xoo=" in low
        assert after == b"FROM-ORIGIN-AT-ONCE"
        s.sendall(b"-MORE")
        time.sleep(0.1)
        s.shutdown(socket.SHUT_WR)
        rest, closed = read_until_close(s)
        s.close()
        assert rest == b"BYE:CLIENT-EARLY-MORE"
        assert closed
        wait_until(lambda: w.metrics()("weir_tunnels_active") == 0, slack(5), what="tunnel ended")
        m1 = w.metrics()
        assert m1("weir_tunnels_closed_total", by="client") - m0("weir_tunnels_closed_total", by="client") == 1
        assert m1("weir_tunnel_bytes_total", direction="upstream") - \
            m0("weir_tunnel_bytes_total", direction="upstream") == len(b"CLIENT-EARLY-MORE")
        assert m1("weir_tunnel_bytes_total", direction="client") - \
            m0("weir_tunnel_bytes_total", direction="client") >= len(b"FROM-ORIGIN-AT-ONCE" + rest)
    finally:
        o.stop()


@pytest.mark.parametrize("asked", [False, True])
def test_a_101_not_matching_the_request_is_a_502(weir_factory, asked):
    def answer(s, head, rest):
        s.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: other\r\nConnection: Upgrade\r\n\r\n"
                  b"TUNNEL-BYTES")
        return rest

    o = RawOrigin(answer)
    try:
        w = start_weir(weir_factory, o.addr)
        s = socket.create_connection(("127.0.0.1", w.port))
        # what follows an upgrade request is never read as a request, even
        # when the answer is weir's own 502
        smuggled = b"GET /smuggled HTTP/1.1\r\nHost: localhost\r\n\r\n"
        s.sendall((upgrade_request() + smuggled) if asked else b"GET /plain HTTP/1.1\r\nHost: localhost\r\n\r\n")
        out, closed = read_until_close(s, timeout=2.0 if asked else 0.5)
        s.close()
        assert out.startswith(b"HTTP/1.1 502"), out
        assert out.count(b"HTTP/1.1") == 1 and b"TUNNEL-BYTES" not in out, out
        if asked:
            assert closed, out
            assert b"connection: close" in out.lower()
        assert len(o.heads) == 1 and "/smuggled" not in o.heads[0]
        m = w.metrics()
        assert m.error("upstream_bad_upgrade") == 1
        assert m("weir_tunnels_opened_total") == 0
    finally:
        o.stop()


def test_h2c_never_reaches_the_origin(weir_factory, origin):
    w = weir_factory(upstreams=[{"name": "a", "servers": [origin.addr]}],
                     routes=[{"path": "/", "upstream": "a", "upgrade": ["websocket"]}])
    with Client(w.port) as c:
        c.send(b"GET /echo HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade, HTTP2-Settings\r\n"
               b"Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n")
        r = c.read_response()
        assert r.status == 200
        # a protocol the route does not list is dropped as before, and the
        # connection goes on as an ordinary one
        c.send(b"GET /echo/other HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\n"
               b"Upgrade: foo/1\r\n\r\n")
        assert c.read_response().status == 200
        assert c.is_open()
    for j in origin.requests("/echo"):
        names = [n.lower() for n, _ in j["headers"]]
        assert "upgrade" not in names and "http2-settings" not in names, j["headers"]
        for n, v in j["headers"]:
            if n.lower() == "connection":
                assert "upgrade" not in v.lower()
    assert len(origin.requests("/echo")) == 2


def test_weir_t_refuses_h2c_and_bad_upgrade_tokens(tmp_path):
    for bad, why in (('[ "h2c" ]', "h2c"), ('[ "web socket" ]', "protocol tokens"), ('"websocket"', "list")):
        conf = tmp_path / "w.conf"
        conf.write_text('listeners = ( { address = "127.0.0.1:1"; } );\n'
                        'upstreams = ( { name = "a"; servers = ( { address = "127.0.0.1:2"; } ); } );\n'
                        'routes = ( { path = "/"; upstream = "a";\n  upgrade = %s; } );\n' % bad)
        p = subprocess.run([WEIR_BIN, "-t", "-c", str(conf)], capture_output=True, text=True)
        assert p.returncode != 0
        assert "w.conf:4:" in p.stderr and why in p.stderr, p.stderr


def test_wss_on_a_tls_listener(weir_factory, ws_origin, tmp_path):
    from test_tls import client_ctx, start_tls_weir
    from pki import make_ca, make_leaf, san
    d = str(tmp_path / "pki")
    os.mkdir(d)
    ca = make_ca(d)
    w = start_tls_weir(weir_factory, ws_origin, [make_leaf(d, "app.test", "/CN=app.test", [san("app.test")])])
    ctx = client_ctx({"ca": ca})

    async def go():
        async with websockets.connect("wss://127.0.0.1:%d/echo" % w.port, ssl=ctx, server_hostname="app.test",
                                      max_size=None, compression=None, ping_interval=None,
                                      open_timeout=slack(5)) as ws:
            for n in (1, 70000, 1 << 20):
                blob = os.urandom(n)
                await echo(ws, blob)
            await ws.close(4003, "tls bye")
            assert ws.close_code == 4003

    run(go())
    wait_until(lambda: w.metrics()("weir_tunnels_closed_total", by="upstream") == 1, slack(5),
               what="tunnel closed")
