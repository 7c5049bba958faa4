"""PROXY protocol v1 and v2 on a listener (proxy_protocol = true): the
header's source address is the client's in X-Forwarded-For and the access
log; a missing, malformed, cut or late header closes the connection without
an answer and counts weir_errors_total{kind="proxy_protocol"}; a header a
byte at a time, before TLS on a TLS listener (sent in one segment with the
ClientHello), and from HAProxy itself (send-proxy, send-proxy-v2 with a
CRC32C) in TCP mode. A plain listener never reads a PROXY line."""

import os
import shutil
import socket
import ssl
import struct
import subprocess
import time

import pytest

import pki
from harness import (Client, WEIR_BIN, build_request, free_port, proc_stat, settle, slack,
                     wait_until)

V2_SIG = b"\r\n\r\n\x00\r\nQUIT\n"


def v2(src, dst, sport, dport, cmd=0x21, tlvs=b""):
    """A v2 PROXY header for TCP from <src>:<sport> to <dst>:<dport>."""
    if ":" in src:
        fam, addrs = 0x21, socket.inet_pton(socket.AF_INET6, src) + socket.inet_pton(socket.AF_INET6, dst)
    else:
        fam, addrs = 0x11, socket.inet_aton(src) + socket.inet_aton(dst)
    body = addrs + struct.pack("!HH", sport, dport) + tlvs
    return V2_SIG + struct.pack("!BBH", cmd, fam, len(body)) + body


def v1(src, dst, sport, dport):
    return ("PROXY %s %s %s %d %d\r\n" % ("TCP6" if ":" in src else "TCP4", src, dst, sport, dport)).encode()


def start_pp_weir(weir_factory, origin, listener_extra="", plain_port=None, timeouts=None, workers=1):
    """weir whose main port has proxy_protocol = true (<listener_extra>
    more settings in its entry), and with <plain_port> a plain listener."""
    w = weir_factory(start=False, upstreams=[{"name": "a", "servers": [origin.addr]}],
                     routes=[{"path": "/", "upstream": "a"}], workers=workers, timeouts=timeouts)
    text = open(w.conf).read()
    old = 'listeners = ( { address = "127.0.0.1:%d"; } );' % w.port
    assert old in text
    new = 'listeners = ( { address = "127.0.0.1:%d"; proxy_protocol = true; %s}%s );' % (
        w.port, listener_extra, ', { address = "127.0.0.1:%d"; }' % plain_port if plain_port else "")
    w.write_raw_config(text.replace(old, new))
    w.start()
    return w


@pytest.fixture
def ppw(weir_factory, origin):
    return start_pp_weir(weir_factory, origin)


def echo_after(w, header, target="/echo", pieces=None):
    """Sends <header> then a GET of <target> on one connection; returns the
    origin's JSON. <pieces>: send the header that many bytes at a time."""
    with Client(w.port) as c:
        if pieces:
            for i in range(0, len(header), pieces):
                c.send(header[i:i + pieces])
                time.sleep(0.005)
            c.send(build_request("GET", target))
        else:
            c.send(header + build_request("GET", target))
        r = c.read_response()
        assert r.status == 200, r
        return r.json()


def xff(j):
    return [v for n, v in j["headers"] if n.lower() == "x-forwarded-for"]


def access_line_for(w, target):
    return wait_until(lambda: [l for l in w.access_lines() if '"GET %s ' % target in l], slack(3),
                      what="access line for %s" % target)[-1]


def test_v1_and_v2_sources_are_the_client_in_x_forwarded_for_and_the_access_log(ppw):
    before = ppw.metrics()
    cases = [
        (v1("203.0.113.7", "127.0.0.1", 40000, ppw.port), "203.0.113.7", "/echo/v1-4"),
        (v1("2001:db8::7", "2001:db8::1", 40001, 443), "2001:db8::7", "/echo/v1-6"),
        (v2("198.51.100.9", "127.0.0.1", 40002, ppw.port), "198.51.100.9", "/echo/v2-4"),
        (v2("2001:db8:1::9", "::1", 40003, 80), "2001:db8:1::9", "/echo/v2-6"),
        # AWS NLB's VPC endpoint TLV and a NOOP: skipped
        (v2("192.0.2.44", "10.0.0.1", 1, 2, tlvs=b"\xea\x00\x05\x01vpce\x04\x00\x00"), "192.0.2.44",
         "/echo/v2-tlv"),
    ]
    for header, want, target in cases:
        j = echo_after(ppw, header, target)
        assert xff(j) == [want], (target, j["headers"])
        assert access_line_for(ppw, target).startswith(want + " "), target
    after = ppw.metrics()
    assert after.error("proxy_protocol") == before.error("proxy_protocol")
    ok = {"class": "2xx"}
    assert after("weir_responses_total", **ok) == before("weir_responses_total", **ok) + len(cases)


def test_the_source_holds_for_every_request_of_a_kept_alive_connection(ppw):
    with Client(ppw.port) as c:
        c.send(v2("198.51.100.10", "127.0.0.1", 5555, ppw.port))
        for i in range(3):
            r = c.request("GET", "/echo/ka%d" % i)
            assert r.status == 200 and xff(r.json()) == ["198.51.100.10"], r


def test_local_and_unknown_keep_the_socket_address(ppw):
    local = V2_SIG + b"\x20\x00\x00\x00"
    assert xff(echo_after(ppw, local)) == ["127.0.0.1"]
    assert xff(echo_after(ppw, b"PROXY UNKNOWN\r\n")) == ["127.0.0.1"]
    assert xff(echo_after(ppw, b"PROXY UNKNOWN ffff::1 ffff::2 1 2\r\n")) == ["127.0.0.1"]
    # UDP over IPv4: valid, but not what weir serves: the socket's too
    udp = V2_SIG + b"\x21\x12\x00\x0c" + socket.inet_aton("192.0.2.1") * 2 + b"\x00\x01\x00\x02"
    assert xff(echo_after(ppw, udp)) == ["127.0.0.1"]
    assert ppw.metrics().error("proxy_protocol") == 0


BAD = [
    ("an HTTP request without a header", b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"),
    ("a TLS ClientHello without a header", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"),
    ("v1 with a leading zero", b"PROXY TCP4 192.0.2.01 127.0.0.1 1 2\r\n"),
    ("v1 with two spaces", b"PROXY TCP4  192.0.2.1 127.0.0.1 1 2\r\n"),
    ("v1 with a bare LF", b"PROXY TCP4 192.0.2.1 127.0.0.1 1 2\n"),
    ("v1 with the wrong family", b"PROXY TCP6 192.0.2.1 127.0.0.1 1 2\r\n"),
    ("v1 without CRLF in 107 bytes", b"PROXY UNKNOWN " + b"x" * 120),
    ("v1 with a port too large", b"PROXY TCP4 192.0.2.1 127.0.0.1 65536 2\r\n"),
    ("v2 version 1", V2_SIG + b"\x11\x11\x00\x0c" + b"\x00" * 12),
    ("v2 command 2", V2_SIG + b"\x22\x11\x00\x0c" + b"\x00" * 12),
    ("v2 family 4", V2_SIG + b"\x21\x41\x00\x0c" + b"\x00" * 12),
    ("v2 address block past the length", V2_SIG + b"\x21\x21\x00\x0c" + b"\x00" * 12),
    ("v2 TLV past the length", v2("192.0.2.1", "127.0.0.1", 1, 2, tlvs=b"\x01\x00\x09h2")),
    ("v2 longer than 4096 bytes", V2_SIG + b"\x21\x11\x10\x00" + b"\x00" * 64),
    ("v2 bad CRC32C", v2("192.0.2.1", "127.0.0.1", 1, 2, tlvs=b"\x03\x00\x04\x00\x00\x00\x01")),
]


@pytest.mark.parametrize("what,data", BAD, ids=[b[0] for b in BAD])
def test_a_bad_header_is_closed_without_an_answer_and_counted(ppw, what, data):
    before = ppw.metrics().error("proxy_protocol")
    with Client(ppw.port) as c:
        c.send(data + build_request("GET", "/echo"))
        assert c.closed_by_peer(2.0), what
    assert ppw.metrics().error("proxy_protocol") == before + 1, what
    wait_until(lambda: any("PROXY protocol header refused" in l for l in ppw.error_lines()), slack(2),
               what="the error line")


def test_failures_are_logged_at_most_ten_times_a_second_from_a_worker(ppw):
    for _ in range(30):
        with Client(ppw.port) as c:
            c.send(b"GET / HTTP/1.1\r\n\r\n")
            assert c.closed_by_peer(2.0)
    assert ppw.metrics().error("proxy_protocol") == 30
    # log.c's per-call-site limit: the worker's tick reports what it left
    # out once the second is over
    lines = wait_until(lambda: (lambda ls: ls if any("more like this" in l and "PROXY protocol header refused" in l
                                                     for l in ls) else None)(ppw.error_lines()),
                       slack(4), what="the left-out line")
    logged = [l for l in lines if "PROXY protocol header refused" in l and "more like this" not in l]
    assert 10 <= len(logged) < 30, lines


@pytest.mark.parametrize("header", [v1("203.0.113.99", "127.0.0.1", 1, 2),
                                    v2("2001:db8::99", "::1", 1, 2,
                                       tlvs=b"\x05\x00\x10" + b"u" * 16)], ids=["v1", "v2"])
def test_a_header_sent_a_byte_at_a_time_is_read(ppw, header):
    want = "203.0.113.99" if header.startswith(b"PROXY") else "2001:db8::99"
    assert xff(echo_after(ppw, header, pieces=1)) == [want]
    assert ppw.metrics().error("proxy_protocol") == 0


def test_a_partial_header_does_not_make_the_worker_spin(ppw):
    (pid,) = ppw.wait_workers(1)
    header = v1("203.0.113.5", "127.0.0.1", 1, 2)
    with Client(ppw.port) as c:
        c.send(header[:20])
        settle(0.2)
        t0 = sum(int(x) for x in proc_stat(pid)[12:14])
        time.sleep(1.5)
        t1 = sum(int(x) for x in proc_stat(pid)[12:14])
        # clock ticks (100 a second): a spinning worker would burn ~150
        assert t1 - t0 < 30, (t0, t1)
        c.send(header[20:] + build_request("GET", "/echo"))
        r = c.read_response()
        assert r.status == 200 and xff(r.json()) == ["203.0.113.5"]


def test_a_late_header_times_out_and_a_silent_connection_closes_quietly(weir_factory, origin):
    w = start_pp_weir(weir_factory, origin, timeouts={"proxy_protocol": "1s"})
    before = w.metrics().error("proxy_protocol")
    t0 = time.monotonic()
    with Client(w.port) as partial, Client(w.port) as silent:
        partial.send(b"PROXY TCP4 192.0.2.1 ")
        assert partial.closed_by_peer(3.0)
        assert silent.closed_by_peer(3.0)
    took = time.monotonic() - t0
    assert 0.8 <= took < slack(3.0), took
    # the partial one is a failure; the silent one is a port probe
    assert w.metrics().error("proxy_protocol") == before + 1
    # the log is written from the worker's buffer a moment later
    wait_until(lambda: any("timed out in the header" in l for l in w.error_lines()), slack(3),
               what="the timed-out line in the error log")


def test_a_balancer_health_check_that_connects_and_closes_is_not_counted(ppw):
    for _ in range(5):
        s = socket.create_connection(("127.0.0.1", ppw.port), timeout=slack(2))
        s.close()
    settle(0.3)
    m = ppw.metrics()
    assert m.error("proxy_protocol") == 0 and m("weir_client_connections_active") == 0


def test_a_plain_listener_beside_answers_a_proxy_line_with_400(weir_factory, origin):
    plain = free_port()
    w = start_pp_weir(weir_factory, origin, plain_port=plain)
    with Client(plain) as c:
        c.send(v1("203.0.113.7", "127.0.0.1", 1, 2) + build_request("GET", "/echo"))
        r = c.read_response()
        assert r.status == 400, r
    with Client(plain) as c:
        r = c.request("GET", "/echo")
        assert r.status == 200 and xff(r.json()) == ["127.0.0.1"]
    assert w.metrics().error("proxy_protocol") == 0


# ---- TLS ----------------------------------------------------------------


@pytest.fixture
def tls_pp(tmp_path, weir_factory, origin):
    d = str(tmp_path / "pki")
    os.mkdir(d)
    ca = pki.make_ca(d)
    cert, key = pki.make_leaf(d, "app", "/CN=app.test", [pki.san("app.test")])
    w = start_pp_weir(weir_factory, origin,
                      listener_extra='tls = { certificates = ( { cert = "%s"; key = "%s"; } ); }; ' % (cert, key))
    ctx = ssl.create_default_context(cafile=ca)
    return w, ctx


def tls_request(port, ctx, header, target):
    """The PROXY <header> and the ClientHello in one write (so they reach
    weir in one segment), then a GET of <target>; returns (head, body)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=slack(5))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    t = ctx.wrap_bio(inc, out, server_hostname="app.test")
    first = header
    try:
        while True:
            try:
                t.do_handshake()
                break
            except ssl.SSLWantReadError:
                s.sendall(first + out.read())
                first = b""
                data = s.recv(65536)
                assert data, "closed during the handshake"
                inc.write(data)
        s.sendall(out.read())
        t.write(build_request("GET", target, host="app.test", headers=[("Connection", "close")]))
        s.sendall(out.read())
        got = b""
        while True:
            try:
                piece = t.read(65536)
                if not piece:
                    break  # close_notify
                got += piece
                continue
            except ssl.SSLWantReadError:
                pass
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                break
            data = s.recv(65536)
            if not data:
                break
            inc.write(data)
        head, _, body = got.partition(b"\r\n\r\n")
        return head.decode("latin-1"), body
    finally:
        s.close()


def test_a_tls_listener_reads_the_header_before_the_handshake(tls_pp):
    import json
    w, ctx = tls_pp
    for header, want in ((v2("198.51.100.77", "127.0.0.1", 1, 443), "198.51.100.77"),
                         (v1("2001:db8::77", "::1", 1, 443), "2001:db8::77")):
        head, body = tls_request(w.port, ctx, header, "/echo/tls")
        assert head.startswith("HTTP/1.1 200"), head
        j = json.loads(body)
        assert xff(j) == [want]
        assert [v for n, v in j["headers"] if n.lower() == "x-forwarded-proto"] == ["https"]
    m = w.metrics()
    assert m.error("proxy_protocol") == 0 and m.error("tls_handshake") == 0
    # a ClientHello without the header is refused as a missing header,
    # not as a failed handshake
    raw = socket.create_connection(("127.0.0.1", w.port), timeout=slack(5))
    with pytest.raises((ssl.SSLError, OSError)):
        ctx.wrap_socket(raw, server_hostname="app.test")
    raw.close()
    wait_until(lambda: w.metrics().error("proxy_protocol") == 1, slack(2), what="counted")


def test_a_partial_header_on_a_tls_listener_does_not_make_the_worker_spin(tls_pp):
    # the header is peeked there: bytes of a header not yet complete must
    # still be taken from the socket, or its readiness never ends
    w, ctx = tls_pp
    (pid,) = w.wait_workers(1)
    with Client(w.port) as c:
        c.send(v2("198.51.100.1", "127.0.0.1", 1, 2)[:20])
        settle(0.2)
        t0 = sum(int(x) for x in proc_stat(pid)[12:14])
        time.sleep(1.5)
        t1 = sum(int(x) for x in proc_stat(pid)[12:14])
        assert t1 - t0 < 30, (t0, t1)
    head, _ = tls_request(w.port, ctx, v2("198.51.100.1", "127.0.0.1", 1, 2), "/echo/after")
    assert head.startswith("HTTP/1.1 200"), head


# ---- HAProxy as the balancer --------------------------------------------


@pytest.mark.skipif(not shutil.which("haproxy"), reason="haproxy is not installed")
@pytest.mark.parametrize("opts,kind", [("send-proxy", "v1"), ("send-proxy-v2", "v2"),
                                       ("send-proxy-v2 proxy-v2-options crc32c", "v2 crc32c")],
                         ids=["send-proxy", "send-proxy-v2", "send-proxy-v2-crc32c"])
def test_haproxy_in_tcp_mode_in_front_passes_the_client_address(tmp_path, ppw, opts, kind):
    front = free_port()
    cfg = tmp_path / "haproxy.cfg"
    cfg.write_text("""global
    maxconn 100
defaults
    mode tcp
    timeout connect 2s
    timeout client 5s
    timeout server 5s
frontend fe
    bind 127.0.0.1:%d
    default_backend be
backend be
    server weir 127.0.0.1:%d %s source 127.0.0.3 check inter 200ms
""" % (front, ppw.port, opts))
    subprocess.run(["haproxy", "-c", "-f", str(cfg)], check=True, capture_output=True, timeout=slack(10))
    out = open(str(tmp_path / "haproxy.out"), "wb")
    hp = subprocess.Popen(["haproxy", "-db", "-f", str(cfg)], stdout=out, stderr=out,
                          stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_until(lambda: hp.poll() is None and _connects(front), slack(5), what="haproxy listening")
        time.sleep(slack(0.5))  # a few health checks
        for i in range(3):
            s = socket.socket()
            s.settimeout(slack(5))
            s.bind(("127.0.0.2", 0))  # the client, not the balancer (127.0.0.3)
            s.connect(("127.0.0.1", front))
            s.sendall(build_request("GET", "/echo/hap%d" % i, headers=[("Connection", "close")]))
            data = b""
            while True:
                d = s.recv(65536)
                if not d:
                    break
                data += d
            s.close()
            assert data.startswith(b"HTTP/1.1 200"), data[:300]
            import json
            j = json.loads(data.partition(b"\r\n\r\n")[2])
            assert xff(j) == ["127.0.0.2"], (kind, j["headers"])
            assert access_line_for(ppw, "/echo/hap%d" % i).startswith("127.0.0.2 ")
        # HAProxy's TCP checks connect and close without a byte: not errors
        m = ppw.metrics()
        assert m.error("proxy_protocol") == 0, kind
    finally:
        hp.terminate()
        try:
            hp.wait(slack(5))
        except subprocess.TimeoutExpired:
            hp.kill()
            hp.wait(5)
        out.close()


def _connects(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        return True
    except OSError:
        return False


# ---- configuration --------------------------------------------------------


def _check(tmp_path, text):
    p = tmp_path / "pp.conf"
    p.write_text(text)
    r = subprocess.run([WEIR_BIN, "-t", "-c", str(p)], capture_output=True, timeout=slack(10),
                       cwd=str(tmp_path), stdin=subprocess.DEVNULL)
    return r.returncode, r.stderr.decode(errors="replace"), str(p)


def test_t_refuses_bad_values_with_their_line(tmp_path):
    base = ('upstreams = ( { name = "a"; servers = ( { address = "127.0.0.1:9"; } ); } );\n'
            'routes = ( { path = "/"; upstream = "a"; } );\n')
    rc, err, p = _check(tmp_path, base + 'listeners = ( { address = "127.0.0.1:%d"; proxy_protocol = true; } );\n'
                        'timeouts = { proxy_protocol = "2s"; };\n' % free_port())
    assert rc == 0, err
    rc, err, p = _check(tmp_path, base + 'listeners = ( { address = "127.0.0.1:%d";\n proxy_protocol = "yes"; } );\n'
                        % free_port())
    assert rc == 1 and ("%s:4: " % p) in err and "proxy_protocol" in err, err
    rc, err, p = _check(tmp_path, base + 'listeners = ( { address = "127.0.0.1:%d"; } );\n'
                        'timeouts = { proxy_protocol = "0s"; };\n' % free_port())
    assert rc == 1 and ("%s:4: " % p) in err and "proxy_protocol" in err, err
