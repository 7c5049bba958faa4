"""TLS to upstream servers, per upstream group: weir in front of a real TLS
origin (Debian's nginx, one process, on a free loopback port), with the
certificate checked against the group's CA and the sni name, the name sent
as SNI, sessions offered again on new connections, kept-alive TLS
connections reused, and a failed verification answered 502 upstream_tls.

Certificates are made per test with the openssl command-line tool: a CA
and a leaf for api.internal; a second, unrelated CA for the wrong-CA
cases."""

import os
import random
import shutil
import signal
import socket
import subprocess
import threading
import time

import pytest

from harness import (Client, can_connect, free_port, settle, slack, wait_until, WEIR_BIN)
from pki import make_ca, make_leaf, san

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
BIG = random.Random(7).randbytes(1000000)  # the TLS origin's /big

pytestmark = pytest.mark.skipif(not os.path.exists(NGINX), reason="nginx is not installed")


@pytest.fixture
def pki(tmp_path):
    d = str(tmp_path / "pki")
    os.mkdir(d)
    ca = make_ca(d, "ca", "ca")
    other = make_ca(d, "otherca", "otherca")
    cert, key = make_leaf(d, "leaf", "/CN=api.internal", [san("api.internal")])
    return {"ca": ca, "other": other, "cert": cert, "key": key}


class TlsOrigin:
    """nginx answering every request with what it saw of the TLS session."""

    def __init__(self, d, pki):
        self.dir = d
        os.makedirs(d, exist_ok=True)
        self.port = free_port()
        self.errlog = os.path.join(d, "nginx-error.log")
        with open(os.path.join(d, "big.bin"), "wb") as f:
            f.write(BIG)
        conf = os.path.join(d, "nginx.conf")
        with open(conf, "w") as f:
            f.write("""
daemon off;
master_process off;
pid %(d)s/nginx.pid;
error_log %(d)s/nginx-error.log info;
events { worker_connections 256; }
http {
    access_log off;
    client_body_temp_path %(d)s/body;
    proxy_temp_path %(d)s/proxy;
    fastcgi_temp_path %(d)s/fastcgi;
    uwsgi_temp_path %(d)s/uwsgi;
    scgi_temp_path %(d)s/scgi;
    keepalive_requests 10000;
    server {
        listen 127.0.0.1:%(port)d ssl;
        ssl_certificate %(cert)s;
        ssl_certificate_key %(key)s;
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_session_cache shared:weirtest:1m;
        location / {
            default_type text/plain;
            return 200 "hello tls sni=$ssl_server_name reused=$ssl_session_reused alpn=$ssl_alpn_protocol\\n";
        }
        location = /big { alias %(d)s/big.bin; }
    }
}
""" % {"d": d, "port": self.port, "cert": pki["cert"], "key": pki["key"]})
        self.proc = subprocess.Popen([NGINX, "-p", d, "-e", self.errlog, "-c", conf],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=open(os.path.join(d, "nginx.stderr"), "ab"),
                                     start_new_session=True)
        wait_until(lambda: self.proc.poll() is not None or can_connect(self.port, 0.2),
                   slack(10), what="nginx to listen")
        assert self.proc.poll() is None, open(os.path.join(d, "nginx.stderr")).read()

    @property
    def addr(self):
        return "127.0.0.1:%d" % self.port

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(slack(5))
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


@pytest.fixture
def tls_origin(tmp_path, pki):
    o = TlsOrigin(str(tmp_path / "nginx"), pki)
    yield o
    o.stop()


def tls_weir(weir_factory, origin, tls, keepalive=None, workers=1, start=True):
    """weir with one upstream "api" = <origin>, whose tls group is <tls>."""
    up = {"name": "api", "servers": [origin.addr]}
    if keepalive is not None:
        up["keepalive"] = keepalive
    w = weir_factory(start=False, upstreams=[up], routes=[{"path": "/", "upstream": "api"}],
                     workers=workers)
    text = open(w.conf).read()
    old = '{ name = "api"; '
    assert old in text
    w.write_raw_config(text.replace(old, '{ name = "api"; tls = { %s }; ' % tls))
    if start:
        w.start()
    return w


def verified(pki, sni="api.internal"):
    return 'ca = "%s"; sni = "%s";' % (pki["ca"], sni)


def test_a_tls_origin_answers_through_weir_with_the_configured_sni_and_alpn(weir_factory, tls_origin, pki):
    w = tls_weir(weir_factory, tls_origin, verified(pki))
    r = w.get("/")
    assert r.status == 200, r
    assert r.body.startswith(b"hello tls "), r
    assert b"sni=api.internal " in r.body, r
    assert b"alpn=http/1.1" in r.body, r
    settle()
    m = w.metrics()
    assert m("weir_upstream_tls_handshakes_total", resumed="false") == 1
    assert m.error("upstream_tls") == 0


def test_a_long_body_from_a_tls_origin_arrives_whole_through_the_stream_buffer(weir_factory, tls_origin, pki):
    """1 MB from the TLS origin, read record by record into a stream buffer
    (limits.stream_buffer): byte for byte to a fast and a slow client, on
    one kept upstream connection."""
    w = tls_weir(weir_factory, tls_origin, verified(pki))
    with Client(w.port, timeout=20) as c:
        for _ in range(3):
            r = c.request("GET", "/big")
            assert r.status == 200 and r.body == BIG
    got = bytearray()
    with Client(w.port, timeout=30, rcvbuf=4096) as c:
        c.send(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
        time.sleep(0.3)  # weir fills what the window takes, then waits on it
        r = c.read_response(sink=got.extend, timeout=30)
    assert r.status == 200 and bytes(got) == BIG
    m = w.metrics()
    assert m.total("weir_stream_buffers_total", result="taken") >= 4, m.text
    assert m.get("weir_stream_buffers_total", kind="tls_read", result="taken") >= 1, m.text
    assert m.get("weir_upstream_tls_handshakes_total", resumed="false") == 1


@pytest.mark.skipif(not shutil.which("strace"), reason="needs strace")
def test_records_read_together_from_a_tls_origin_go_on_in_few_writes(weir_factory, tls_origin, pki):
    """The records one read(2) brings are decrypted into the stream buffer
    one after the other and go on to the client together, not a write per
    16 KiB record."""
    from test_bodies import writes_during

    w = tls_weir(weir_factory, tls_origin, verified(pki))
    (worker,) = w.worker_pids()
    with Client(w.port, timeout=slack(20)) as c:
        assert c.request("GET", "/").status == 200  # the handshake first

        def download():
            return c.request("GET", "/big", timeout=slack(20))

        r, writes = writes_during(worker, download)
    assert r.status == 200 and r.body == BIG
    # 62 records: a write each before; about one per 64 KiB now, and a few
    # more when a read finds fewer records waiting
    assert writes < 40, "%d writes for %d bytes from a TLS origin" % (writes, len(BIG))


@pytest.mark.skipif(not shutil.which("strace"), reason="needs strace")
def test_a_long_upload_to_a_tls_origin_goes_in_few_writes(weir_factory, pki):
    """An upload read in stream buffers goes on sealed into several records
    a write, not a write per 16 KiB record. The origin reads the whole body
    before it answers with the body's digest."""
    import hashlib
    import ssl
    from test_bodies import writes_during

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(pki["cert"], pki["key"])
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(4)

    def serve():
        try:
            raw, _ = lsock.accept()
        except OSError:
            return
        raw.settimeout(slack(20))
        with ctx.wrap_socket(raw, server_side=True) as s:
            buf = b""
            while True:
                while b"\r\n\r\n" not in buf:
                    d = s.recv(65536)
                    if not d:
                        return
                    buf += d
                head, buf = buf.split(b"\r\n\r\n", 1)
                m = [l for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")]
                n = int(m[0].split(b":")[1]) if m else 0
                while len(buf) < n:
                    d = s.recv(65536)
                    if not d:
                        return
                    buf += d
                body, buf = buf[:n], buf[n:]
                out = hashlib.sha256(body).hexdigest().encode()
                s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(out), out))

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    origin = type("O", (), {"addr": "127.0.0.1:%d" % lsock.getsockname()[1]})()
    try:
        w = tls_weir(weir_factory, origin, verified(pki))
        (worker,) = w.worker_pids()
        data = random.Random(3).randbytes(1 << 20)
        with Client(w.port, timeout=slack(20)) as c:
            r = c.request("POST", "/", body=b"x", timeout=slack(20))  # the handshake first
            assert r.body == hashlib.sha256(b"x").hexdigest().encode(), r

            def upload():
                return c.request("POST", "/", body=data, timeout=slack(20))

            r, writes = writes_during(worker, upload)
        assert r.status == 200 and r.body == hashlib.sha256(data).hexdigest().encode(), r
        # 64 records: a write each before
        assert writes < 40, "%d writes for %d bytes to a TLS origin" % (writes, len(data))
    finally:
        lsock.close()


def test_a_certificate_from_another_ca_is_refused_with_502_counted_and_logged(weir_factory, tls_origin, pki):
    w = tls_weir(weir_factory, tls_origin, 'ca = "%s"; sni = "api.internal";' % pki["other"])
    r = w.get("/")
    assert r.status == 502, r
    settle()
    assert w.metrics().error("upstream_tls") == 1
    log = "\n".join(w.error_lines())
    assert "TLS handshake failed" in log and "issuer" in log, log


def test_a_certificate_without_the_sni_name_is_refused(weir_factory, tls_origin, pki):
    w = tls_weir(weir_factory, tls_origin, verified(pki, sni="other.internal"))
    r = w.get("/")
    assert r.status == 502, r
    settle()
    assert w.metrics().error("upstream_tls") == 1
    w.logged(lambda l: "TLS handshake failed" in l)


def test_verify_false_accepts_any_certificate_and_warns_at_start(weir_factory, tls_origin, pki):
    w = tls_weir(weir_factory, tls_origin, 'ca = "%s"; verify = false;' % pki["other"])
    r = w.get("/")
    assert r.status == 200, r
    assert b"hello tls sni= " in r.body, r  # no sni configured: none sent
    wait_until(lambda: any("not verified" in l for l in w.error_lines()), slack(3),
               what="the verify = false warning")


def test_sessions_are_offered_again_on_new_upstream_connections(weir_factory, tls_origin, pki):
    w = tls_weir(weir_factory, tls_origin, verified(pki), keepalive=0)
    bodies = []
    for _ in range(4):
        r = w.get("/")
        assert r.status == 200, r
        bodies.append(r.body)
    assert b"reused=." in bodies[0], bodies
    assert any(b"reused=r" in b for b in bodies[1:]), bodies
    settle()
    m = w.metrics()
    assert m("weir_upstream_connects_total") == 4
    assert m("weir_upstream_tls_handshakes_total", resumed="true") >= 1


def test_a_kept_alive_tls_connection_carries_the_next_requests(weir_factory, tls_origin, pki):
    w = tls_weir(weir_factory, tls_origin, verified(pki))
    before = w.metrics()("weir_upstream_reuses_total")
    with w.client() as c:
        for _ in range(5):
            r = c.request("GET", "/")
            assert r.status == 200 and r.body.startswith(b"hello tls"), r
    settle()
    m = w.metrics()
    assert m("weir_upstream_reuses_total") - before == 4
    assert m("weir_upstream_connects_total") == 1
    assert m("weir_upstream_tls_handshakes_total", resumed="false") == 1


def test_a_tls_connection_the_origin_closed_while_pooled_is_not_used(weir_factory, tls_origin, pki, tmp_path):
    w = tls_weir(weir_factory, tls_origin, verified(pki))
    assert w.get("/").status == 200
    tls_origin.stop()  # its close_notify or FIN reaches the pooled connection
    wait_until(lambda: w.metrics()("weir_upstream_connections_active") == 0, slack(3),
               what="the pooled connection to be closed")
    again = TlsOrigin(str(tmp_path / "nginx2"), pki)
    try:
        w2 = tls_weir(weir_factory, again, verified(pki))
        assert w2.get("/").status == 200
    finally:
        again.stop()


def test_a_server_that_never_completes_the_handshake_times_out_within_upstream_connect(weir_factory, pki):
    # listening, so the kernel completes the TCP handshake, but never read
    mute = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    mute.bind(("127.0.0.1", 0))
    mute.listen(8)
    try:
        class Mute:
            addr = "127.0.0.1:%d" % mute.getsockname()[1]
        w = tls_weir(weir_factory, Mute, verified(pki))
        t0 = time.monotonic()
        r = w.get("/", timeout=slack(5))
        assert r.status == 504, r
        assert time.monotonic() - t0 < slack(3)  # upstream_connect is 1s in the suite
        # a worker writes its error lines after the pass that answered
        wait_until(lambda: any("TLS handshake timed out" in l for l in w.error_lines()), slack(3),
                   what="the handshake timeout logged")
    finally:
        mute.close()


def test_a_server_answering_in_plain_http_fails_the_handshake_with_502(weir_factory, pki):
    # answers whatever comes with a plain HTTP response, as a server that
    # does not speak TLS on that port would
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.settimeout(slack(5))

    def answer():
        try:
            c, _ = srv.accept()
            with c:
                c.recv(4096)
                c.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        except OSError:
            pass

    t = threading.Thread(target=answer, daemon=True)
    t.start()
    try:
        class Plain:
            addr = "127.0.0.1:%d" % srv.getsockname()[1]
        w = tls_weir(weir_factory, Plain, verified(pki))
        r = w.get("/")
        assert r.status == 502, r
        settle()
        assert w.metrics().error("upstream_tls") == 1
        w.logged(lambda l: "TLS handshake failed" in l)
    finally:
        t.join(slack(5))
        srv.close()


def test_a_reload_keeps_tls_to_the_upstream_working(weir_factory, tls_origin, pki):
    w = tls_weir(weir_factory, tls_origin, verified(pki), workers=2)
    assert w.get("/").status == 200
    w.signal(signal.SIGHUP)
    wait_until(lambda: w.metrics()("weir_reloads_total", result="ok") == 1, slack(5), what="the reload")
    for _ in range(4):
        r = w.get("/")
        assert r.status == 200 and b"sni=api.internal" in r.body, r


def test_a_reload_that_keeps_the_server_keeps_its_tls_session(weir_factory, tls_origin, pki):
    """The session is kept in the server's state, by identity: a worker
    that meets the new table (a draining one, serving a request whose head
    was arriving at the HUP) still offers it to the same server."""
    w = tls_weir(weir_factory, tls_origin, verified(pki), keepalive=0)
    for _ in range(2):
        assert w.get("/").status == 200
    # a first answer on the connection proves the worker took it: one still
    # in the accept queue at the HUP would go to the new worker instead
    c = Client(w.port, timeout=10)
    c.send("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
    assert c.read_response().status == 200
    m0 = w.metrics()
    c.send("GET / HTTP/1.1\r\nHost: localhost\r\n")
    w.signal(signal.SIGHUP)
    wait_until(lambda: w.metrics()("weir_reloads_total", result="ok") == 1, slack(5), what="the reload")
    c.send("\r\n")
    r = c.read_response()
    c.close()
    assert r.status == 200 and b"reused=r" in r.body, r
    m1 = w.metrics()
    assert m1("weir_upstream_tls_handshakes_total", resumed="true") - m0(
        "weir_upstream_tls_handshakes_total", resumed="true") == 1


@pytest.mark.parametrize("tls,message", [
    ('sni = "api.internal";', "upstreams.tls.ca is required"),
    ('ca = "CA";', "upstreams.tls.sni is required"),
    ('ca = "/nonexistent/ca.pem"; sni = "api.internal";', "upstreams.tls.ca /nonexistent/ca.pem"),
    ('ca = "CA"; sni = "bad name";', "must be a host name"),
    ('ca = "CA"; sni = "a"; ciphers = "x";', "ciphers"),
])
def test_weir_t_refuses_an_incomplete_or_bad_tls_group(weir_factory, tls_origin, pki, tls, message):
    w = tls_weir(weir_factory, tls_origin, tls.replace('"CA"', '"%s"' % pki["ca"]), start=False)
    r = subprocess.run([WEIR_BIN, "-t", "-c", w.conf], capture_output=True, timeout=slack(10),
                       stdin=subprocess.DEVNULL)
    out = (r.stdout + r.stderr).decode()
    assert r.returncode != 0, out
    assert message in out, out


def test_a_close_notify_read_with_the_response_keeps_the_connection_out_of_the_pool(weir_factory, pki):
    """An origin that sends its response and, in the same segment, a
    close_notify (but leaves TCP open): weir reads both at once, so no
    event will ever announce the close. The connection must not be pooled:
    the next request goes on a new connection at once, not on the dead one
    and then again (weir_upstream_retries_total stays 0)."""
    import ssl
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(pki["cert"], pki["key"])
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(16)
    accepted = []
    held = []

    def serve():
        while True:
            try:
                raw, _ = lsock.accept()
            except OSError:
                return
            accepted.append(1)
            try:
                raw.settimeout(slack(5))
                s = ctx.wrap_socket(raw, server_side=True)
                req = b""
                while b"\r\n\r\n" not in req:
                    d = s.recv(65536)
                    if not d:
                        break
                    req += d
                body = b"once\n"
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)  # s owns the fd now
                s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
                s.settimeout(0.0)  # unwrap sends close_notify and does not wait
                try:
                    s.unwrap()
                except (ssl.SSLError, OSError):
                    pass
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 0)
                held.append(s)  # TCP stays open: no FIN follows
            except (ssl.SSLError, OSError):
                raw.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    origin = type("O", (), {"addr": "127.0.0.1:%d" % lsock.getsockname()[1]})()
    try:
        w = tls_weir(weir_factory, origin, verified(pki))
        for i in range(3):
            r = w.get("/")
            assert r.status == 200 and r.body == b"once\n", r
        assert len(accepted) == 3
        assert w.metrics()("weir_upstream_retries_total") == 0
    finally:
        lsock.close()
        for s in held:
            s.close()
