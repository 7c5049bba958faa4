"""TLS termination: certificates chosen by SNI (exact and wildcard names
taken from the certificates), ALPN http/1.1, TLS 1.2 and 1.3 only, session
tickets that resume on any worker, `weir -t` naming a bad certificate, a
plain listener beside a TLS one, and X-Forwarded-Proto: https.

Certificates are made per test with the openssl command-line tool: a CA,
an ECDSA leaf for app.test and *.wild.test, an RSA leaf for rsa.test."""

import hashlib
import json
import os
import re
import socket
import ssl
import subprocess
import time

import pytest

from harness import pid_alive, render_config, settle, slack, unread_by_server, wait_until, WEIR_BIN
from pki import make_ca, make_leaf, openssl, san


@pytest.fixture
def certs(tmp_path):
    d = str(tmp_path / "pki")
    os.mkdir(d)
    c = {"dir": d, "ca": make_ca(d)}
    c["ec"] = make_leaf(d, "app.test", "/CN=app.test", [san("app.test", "*.wild.test")])
    c["rsa"] = make_leaf(d, "rsa.test", "/CN=rsa.test", [san("rsa.test")], rsa=True)
    return c


def tls_listener(port, pairs, tls_extra=""):
    """A listener entry; a pair may carry a third item, more settings for
    its certificate entry (ocsp = "...";)."""
    certs = ", ".join('{ cert = "%s"; key = "%s"; %s}' % (p[0], p[1], p[2] if len(p) > 2 else "")
                      for p in pairs)
    return '{ address = "127.0.0.1:%d"; tls = { certificates = ( %s ); %s }; }' % (port, certs, tls_extra)


def start_tls_weir(weir_factory, origin, pairs, plain_port=None, workers=2, extra="", tls_extra="",
                   timeouts=None):
    """weir whose main port speaks TLS with <pairs> [(cert, key)]; with
    <plain_port>, a plain listener beside it; <tls_extra> goes in the tls
    group (client_ca = ...;)."""
    w = weir_factory(start=False, upstreams=[{"name": "a", "servers": [origin.addr]}],
                     routes=[{"path": "/", "upstream": "a"}], workers=workers, extra=extra,
                     timeouts=timeouts)
    text = open(w.conf).read()
    old = 'listeners = ( { address = "127.0.0.1:%d"; } );' % w.port
    assert old in text
    new = "listeners = ( %s%s );" % (
        tls_listener(w.port, pairs, tls_extra),
        ', { address = "127.0.0.1:%d"; }' % plain_port if plain_port else "")
    w.write_raw_config(text.replace(old, new))
    w.start()
    return w


def client_ctx(certs, alpn=("http/1.1",)):
    ctx = ssl.create_default_context(cafile=certs["ca"])
    if alpn:
        ctx.set_alpn_protocols(list(alpn))
    return ctx


def tls_connect(port, ctx, name, session=None):
    raw = socket.create_connection(("127.0.0.1", port), timeout=slack(5))
    try:
        return ctx.wrap_socket(raw, server_hostname=name, session=session)
    except Exception:
        raw.close()
        raise


def read_response(s):
    """One HTTP/1.1 response with Content-Length from TLS socket <s>."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        assert d, "closed before the head: %r" % buf
        buf += d
    head, body = buf.split(b"\r\n\r\n", 1)
    m = re.search(rb"(?im)^content-length:\s*(\d+)", head)
    assert m, head
    n = int(m.group(1))
    while len(body) < n:
        d = s.recv(65536)
        assert d, "closed in the body"
        body += d
    return head.decode("latin-1"), body[:n]


def https_get(s, target, host="app.test", extra=""):
    s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\n%s\r\n" % (target, host, extra)).encode())
    return read_response(s)


def s_client(port, *args, stdin=b"", timeout=10):
    r = subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % port] + list(args),
                       input=stdin, capture_output=True, timeout=slack(timeout))
    return r.stdout.decode(errors="replace") + r.stderr.decode(errors="replace")


def worker_of(w, sock):
    """Pid of the worker holding the server end of client socket <sock>
    (from /proc: the TCP entry's inode, then the worker's fds)."""
    cport = sock.getsockname()[1]
    want_local = "0100007F:%04X" % w.port
    want_rem = "0100007F:%04X" % cport
    inode = None
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            p = line.split()
            if p[1] == want_local and p[2] == want_rem:
                inode = p[9]
    assert inode, "no server socket for client port %d" % cport
    for pid in w.worker_pids():
        try:
            for fd in os.listdir("/proc/%d/fd" % pid):
                if os.readlink("/proc/%d/fd/%s" % (pid, fd)) == "socket:[%s]" % inode:
                    return pid
        except OSError:
            continue
    raise AssertionError("no worker holds socket inode %s" % inode)


# ---------------------------------------------------------------------------


def test_curl_gets_the_origins_body_over_tls(weir_factory, origin, certs):
    w = start_tls_weir(weir_factory, origin, [certs["ec"]])
    r = subprocess.run(["curl", "-sS", "--cacert", certs["ca"], "--resolve",
                        "app.test:%d:127.0.0.1" % w.port, "https://app.test:%d/" % w.port],
                       capture_output=True, timeout=slack(10))
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"hello from origin\n"


def test_sni_picks_the_certificate_by_exact_and_wildcard_name(weir_factory, origin, certs):
    w = start_tls_weir(weir_factory, origin, [certs["ec"], certs["rsa"]])
    for name, subject in [("app.test", "CN = app.test"), ("rsa.test", "CN = rsa.test"),
                          ("x.wild.test", "CN = app.test"), ("RSA.Test", "CN = rsa.test"),
                          ("unknown.test", "CN = app.test")]:
        out = s_client(w.port, "-servername", name, "-CAfile", certs["ca"], stdin=b"")
        assert "subject=" + subject in out, (name, out)
    # the RSA certificate is served with an RSA key, the ECDSA one with ECDSA
    ctx = client_ctx(certs)
    with tls_connect(w.port, ctx, "rsa.test") as s:
        assert s.getpeercert()["subject"] == ((("commonName", "rsa.test"),),)
    with tls_connect(w.port, ctx, "a.wild.test") as s:
        assert s.getpeercert()["subject"] == ((("commonName", "app.test"),),)
    # a wildcard covers one label only: b.a.wild.test gets the default,
    # which is app.test's certificate and does not name it
    with pytest.raises(ssl.SSLCertVerificationError):
        tls_connect(w.port, ctx, "b.a.wild.test").close()


def test_alpn_offers_h2_then_http11_and_tls_alpn_narrows_it(weir_factory, origin, certs):
    w = start_tls_weir(weir_factory, origin, [certs["ec"]])
    with tls_connect(w.port, client_ctx(certs, ("http/1.1", "h2")), "app.test") as s:
        assert s.selected_alpn_protocol() == "h2"  # the server's preference
    with tls_connect(w.port, client_ctx(certs, ("http/1.1",)), "app.test") as s:
        assert s.selected_alpn_protocol() == "http/1.1"
        head, body = https_get(s, "/")
        assert body == b"hello from origin\n"
    out = s_client(w.port, "-servername", "app.test", "-alpn", "http/1.1")
    assert "ALPN protocol: http/1.1" in out, out
    w2 = start_tls_weir(weir_factory, origin, [certs["ec"]], tls_extra='alpn = "http/1.1";')
    with tls_connect(w2.port, client_ctx(certs, ("h2",)), "app.test") as s:
        assert s.selected_alpn_protocol() is None
        head, body = https_get(s, "/")
        assert body == b"hello from origin\n"


def test_tls12_and_tls13_are_served_and_tls11_is_refused(weir_factory, origin, certs):
    w = start_tls_weir(weir_factory, origin, [certs["ec"], certs["rsa"]])
    before = w.metrics().error("tls_handshake")
    for v, name in [(ssl.TLSVersion.TLSv1_2, "app.test"), (ssl.TLSVersion.TLSv1_2, "rsa.test"),
                    (ssl.TLSVersion.TLSv1_3, "app.test")]:
        ctx = client_ctx(certs)
        ctx.minimum_version = ctx.maximum_version = v
        with tls_connect(w.port, ctx, name) as s:
            assert s.version() == {ssl.TLSVersion.TLSv1_2: "TLSv1.2", ssl.TLSVersion.TLSv1_3: "TLSv1.3"}[v]
            assert https_get(s, "/", host=name)[1] == b"hello from origin\n"
            if v == ssl.TLSVersion.TLSv1_2:  # the key type shows in the 1.2 suite
                assert s.cipher()[0].startswith("ECDHE-RSA-" if name == "rsa.test" else "ECDHE-ECDSA-"), s.cipher()
    out = s_client(w.port, "-tls1_1", "-cipher", "DEFAULT:@SECLEVEL=0", "-servername", "app.test")
    assert re.search(r"alert protocol version|no protocols available|unsupported protocol", out, re.I), out
    settle()
    m = w.metrics()
    assert m.error("tls_handshake") >= before + 1
    w.logged(lambda l: "TLS handshake failed" in l)


def test_a_session_resumes_on_a_connection_another_worker_accepted(weir_factory, origin, certs):
    w = start_tls_weir(weir_factory, origin, [certs["ec"]], workers=2)
    w.wait_workers(2)
    ctx = client_ctx(certs)
    with tls_connect(w.port, ctx, "app.test") as s:
        first = worker_of(w, s)
        https_get(s, "/")  # the TLS 1.3 ticket comes after the handshake
        session = s.session
    assert session is not None
    before = w.metrics()("weir_tls_handshakes_total", resumed="true")
    other = None
    resumed = 0
    for _ in range(40):
        with tls_connect(w.port, ctx, "app.test", session=session) as s:
            assert s.session_reused, "ticket not accepted"
            resumed += 1
            assert https_get(s, "/")[1] == b"hello from origin\n"
            if worker_of(w, s) != first:
                other = worker_of(w, s)
                break
    assert other is not None, "40 connections all landed on worker %d" % first
    settle()
    assert w.metrics()("weir_tls_handshakes_total", resumed="true") >= before + resumed
    # and openssl s_client says the same
    # (a request, and -ign_eof to wait for the answer: the TLS 1.3 ticket
    # comes after the handshake, and s_client saves what it has at exit)
    sess = os.path.join(certs["dir"], "sess.pem")
    req = b"GET / HTTP/1.0\r\nHost: app.test\r\n\r\n"
    out = s_client(w.port, "-servername", "app.test", "-ign_eof", "-sess_out", sess, stdin=req)
    assert "hello from origin" in out, out
    reused = sum("Reused, TLS" in s_client(w.port, "-servername", "app.test", "-ign_eof", "-sess_in", sess,
                                           stdin=req)
                 for _ in range(10))
    assert reused == 10


def test_a_ticket_from_before_a_rotation_still_resumes(weir_factory, origin, certs):
    w = start_tls_weir(weir_factory, origin, [certs["ec"]], extra='tls_ticket_rotate = "2s";')
    ctx = client_ctx(certs)
    with tls_connect(w.port, ctx, "app.test") as s:
        https_get(s, "/")
        session = s.session
    wait_until(lambda: sum("new session ticket key made" in l for l in w.error_lines()) >= 2,
               slack(6), what="a key rotation")
    with tls_connect(w.port, ctx, "app.test", session=session) as s:
        assert s.session_reused
        https_get(s, "/")


def tickets_seen(port, *args):
    """NewSessionTicket messages one s_client connection with a request
    receives (they come after the handshake; -ign_eof waits for the
    answer), and whether it resumed."""
    out = s_client(port, "-servername", "app.test", "-msg", "-ign_eof", *args,
                   stdin=b"GET / HTTP/1.0\r\nHost: app.test\r\n\r\n")
    assert "hello from origin" in out, out
    return out.count(", NewSessionTicket"), "Reused, TLS" in out


@pytest.mark.parametrize("setting, per_handshake", [("", 1), ("session_tickets = 3;", 3),
                                                    ("session_tickets = 0;", 0)])
def test_session_tickets_sets_the_tickets_sent_after_each_handshake(weir_factory, origin, certs, setting,
                                                                     per_handshake):
    w = start_tls_weir(weir_factory, origin, [certs["ec"]], workers=1, tls_extra=setting)
    sess = os.path.join(certs["dir"], "sess.pem")
    assert tickets_seen(w.port, "-sess_out", sess) == (per_handshake, False)
    # a resumed handshake gets as many again; with none, s_client has no
    # session to offer (it saves only a resumable one)
    assert os.path.exists(sess) == (per_handshake > 0)
    for _ in range(3):
        assert tickets_seen(w.port, *(("-sess_in", sess) if per_handshake else ())) == \
            (per_handshake, per_handshake > 0)
    settle()
    m = w.metrics()
    assert m("weir_tls_tickets_total") == 4 * per_handshake
    assert m("weir_tls_handshakes_total", resumed="true") == (3 if per_handshake else 0)
    if per_handshake == 0:
        # nor does TLS 1.2 get a ticket, or a session to resume
        out = s_client(w.port, "-servername", "app.test", "-tls1_2", "-sess_out", sess, stdin=b"")
        assert "TLS session ticket:" not in out, out
        assert "Reused, TLS" not in s_client(w.port, "-servername", "app.test", "-tls1_2", "-sess_in", sess,
                                             stdin=b"")


def test_a_plain_listener_beside_a_tls_one_keeps_working(weir_factory, origin, certs):
    from harness import free_port, get
    plain = free_port()
    w = start_tls_weir(weir_factory, origin, [certs["ec"]], plain_port=plain)
    r = get(plain, "/echo")
    assert r.status == 200
    assert [v for n, v in r.json()["headers"] if n.lower() == "x-forwarded-proto"] == ["http"]
    with tls_connect(w.port, client_ctx(certs), "app.test") as s:
        assert https_get(s, "/")[1] == b"hello from origin\n"


def test_x_forwarded_proto_https_reaches_the_origin(weir_factory, origin, certs):
    w = start_tls_weir(weir_factory, origin, [certs["ec"]])
    with tls_connect(w.port, client_ctx(certs), "app.test") as s:
        head, body = https_get(s, "/echo", extra="X-Forwarded-Proto: http\r\n")
    j = json.loads(body)
    assert [v for n, v in j["headers"] if n.lower() == "x-forwarded-proto"] == ["https"]


def test_bodies_flow_both_ways_over_tls_on_one_connection(weir_factory, origin, certs):
    w = start_tls_weir(weir_factory, origin, [certs["ec"]])
    with tls_connect(w.port, client_ctx(certs), "app.test") as s:
        for n in (0, 1, 16383, 16384, 16385, 1000000):
            head, body = https_get(s, "/bytes/%d" % n)
            assert body == b"x" * n, n
        data = os.urandom(3 * 1024 * 1024 + 17)
        s.sendall(b"POST /upload HTTP/1.1\r\nHost: app.test\r\nContent-Length: %d\r\n\r\n" % len(data) + data)
        head, body = read_response(s)
        j = json.loads(body)
        assert j["body_len"] == len(data)
        assert j["body_sha256"] == hashlib.sha256(data).hexdigest()
        # chunked answers are re-framed through the same path
        s.sendall(b"GET /chunked/50000 HTTP/1.1\r\nHost: app.test\r\nConnection: close\r\n\r\n")
        buf = b""
        while True:
            d = s.recv(65536)
            if not d:
                break
            buf += d
        assert b"Transfer-Encoding: chunked" in buf and buf.endswith(b"0\r\n\r\n")


def test_records_read_ahead_together_are_all_answered(weir_factory, origin, certs):
    """Twenty pipelined requests, each its own TLS record, reach weir in
    one TCP segment (the client corks its socket): weir reads them in one
    read(2) and must answer every one, though no readiness event follows
    the first."""
    w = start_tls_weir(weir_factory, origin, [certs["ec"]], workers=1)
    with tls_connect(w.port, client_ctx(certs), "app.test") as s:
        s.settimeout(slack(5))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
        for i in range(20):
            s.write(b"GET /bytes/%d HTTP/1.1\r\nHost: app.test\r\n\r\n" % i)  # a record each
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 0)
        buf = b""
        for i in range(20):
            while b"\r\n\r\n" not in buf:
                d = s.recv(65536)
                assert d, "closed after %d responses" % i
                buf += d
            head, buf = buf.split(b"\r\n\r\n", 1)
            assert head.startswith(b"HTTP/1.1 200"), head
            n = int(re.search(rb"(?im)^content-length:\s*(\d+)", head).group(1))
            assert n == i
            while len(buf) < n:
                buf += s.recv(65536)
            assert buf[:n] == b"x" * n
            buf = buf[n:]
        assert buf == b""


def test_tls_bytes_arriving_in_pieces_are_put_together(weir_factory, origin, certs):
    """The handshake and a request reach weir in pieces (every TLS record
    header in two, 3 bytes and 2, and its body in pieces of 64 bytes), and
    each piece is sent only once weir has read the one before (its receive
    queue is empty), so records really are read in pieces however busy the
    machine (sleeping between sends does not ensure it: a worker scheduled
    late reads many at once). The answer is the same as for a whole
    request, and the handshake is counted, not failed. Each wait reads
    /proc/net/tcp (milliseconds on a busy machine): the head timeout is
    generous."""
    w = start_tls_weir(weir_factory, origin, [certs["ec"]], workers=1, timeouts={"client_header": "30s"})
    before = w.metrics()
    ctx = client_ctx(certs)
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ctx.wrap_bio(inc, out, server_hostname="app.test")
    raw = socket.create_connection(("127.0.0.1", w.port), timeout=slack(5))
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    pieces = [0]

    def send_piece(p):
        raw.sendall(p)
        pieces[0] += 1
        wait_until(lambda: unread_by_server(w.port, raw) == 0, slack(5), interval=0.001,
                   what="weir to read piece %d" % pieces[0])

    def flush():
        data = out.read()
        while data:
            n = 5 + int.from_bytes(data[3:5], "big")  # one record
            send_piece(data[:3])
            send_piece(data[3:5])
            for i in range(5, n, 64):
                send_piece(data[i:min(i + 64, n)])
            data = data[n:]

    def pump(op):
        while True:
            try:
                return op()
            except ssl.SSLWantReadError:
                flush()
                d = raw.recv(65536)
                assert d, "weir closed the connection"
                inc.write(d)

    try:
        pump(tls.do_handshake)
        handshake_pieces = pieces[0]
        tls.write(b"GET /bytes/300 HTTP/1.1\r\nHost: app.test\r\nConnection: close\r\n\r\n")
        flush()
        buf = b""
        while True:
            try:
                d = pump(lambda: tls.read(65536))
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError, AssertionError):
                break
            if not d:
                break
            buf += d
        head, body = buf.split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 200"), head
        assert body == b"x" * 300
        # the ClientHello alone (a few hundred bytes) makes several pieces
        assert handshake_pieces >= 6, handshake_pieces
    finally:
        raw.close()
    m = w.metrics()
    assert m("weir_tls_handshakes_total", resumed="false") - before("weir_tls_handshakes_total", resumed="false") == 1
    assert sum(m("weir_tls_handshake_failures_total", reason=r) for r in
               ("protocol", "plain_http", "client_certificate", "timeout", "closed", "other")) == \
        sum(before("weir_tls_handshake_failures_total", reason=r) for r in
            ("protocol", "plain_http", "client_certificate", "timeout", "closed", "other"))


def test_a_stalled_handshake_is_cut_by_the_header_timeout_and_counted(weir_factory, origin, certs):
    w = start_tls_weir(weir_factory, origin, [certs["ec"]])
    before = w.metrics().error("tls_handshake")
    s = socket.create_connection(("127.0.0.1", w.port), timeout=slack(5))
    s.sendall(b"\x16\x03\x01\x00\x80")  # a ClientHello record header, then nothing
    s.settimeout(slack(6))
    t0 = time.monotonic()
    assert s.recv(100) == b""  # client_header is 2s in the harness
    assert time.monotonic() - t0 < slack(5)
    s.close()
    # a connection that sends nothing is closed quietly, uncounted
    s = socket.create_connection(("127.0.0.1", w.port), timeout=slack(5))
    s.close()
    settle(0.5)
    assert w.metrics().error("tls_handshake") == before + 1
    w.logged(lambda l: "TLS handshake failed: timed out" in l)


def test_handshake_failure_lines_are_rate_limited(weir_factory, origin, certs):
    w = start_tls_weir(weir_factory, origin, [certs["ec"]], workers=1)
    before = w.metrics().error("tls_handshake")
    for _ in range(40):
        s = socket.create_connection(("127.0.0.1", w.port), timeout=slack(5))
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")  # plain HTTP on the TLS port
        try:
            s.recv(100)
        except OSError:
            pass
        s.close()
    wait_until(lambda: w.metrics().error("tls_handshake") >= before + 40, slack(3), what="40 failures")
    wait_until(lambda: any("more TLS handshake failure(s) not logged" in l for l in w.error_lines()),
               slack(3), what="the suppressed line")
    lines = [l for l in w.error_lines() if "TLS handshake failed" in l]
    assert 10 <= len(lines) < 40


def check_conf(tmp_path, text):
    p = tmp_path / "check.conf"
    p.write_text(text)
    r = subprocess.run([WEIR_BIN, "-t", "-c", str(p)], capture_output=True, timeout=slack(10),
                       stdin=subprocess.DEVNULL)
    return r.returncode, r.stderr.decode(errors="replace"), str(p)


def conf_with(tmp_path, pairs, tls_extra=""):
    text = render_config(str(tmp_path), 18443, 18444, upstreams=[{"name": "a", "servers": ["127.0.0.1:9"]}],
                         routes=[{"path": "/", "upstream": "a"}])
    old = 'listeners = ( { address = "127.0.0.1:18443"; } );'
    return text.replace(old, "listeners = (\n  %s\n);" % tls_listener(18443, pairs, tls_extra))


def test_weir_t_accepts_good_certificates(tmp_path, certs):
    rc, err, _ = check_conf(tmp_path, conf_with(tmp_path, [certs["ec"], certs["rsa"]]))
    assert rc == 0, err


@pytest.mark.parametrize("case", ["missing cert", "missing key", "bad pem", "key mismatch"])
def test_weir_t_names_a_bad_certificate_file(tmp_path, certs, case):
    cert, key = certs["ec"]
    if case == "missing cert":
        cert = os.path.join(certs["dir"], "nope.pem")
        why = "cannot read it: No such file"
    elif case == "missing key":
        key = os.path.join(certs["dir"], "nope.key")
        why = "cannot read the key %s" % key
    elif case == "bad pem":
        cert = os.path.join(certs["dir"], "bad.pem")
        with open(cert, "w") as f:
            f.write("-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n")
        why = "no PEM certificate"
    else:
        key = certs["rsa"][1]
        why = "does not match"
    rc, err, path = check_conf(tmp_path, conf_with(tmp_path, [certs["rsa"], (cert, key)]))
    assert rc == 1
    m = re.search(r"^%s:(\d+): certificate (\S+): (.*)$" % re.escape(path), err, re.M)
    assert m, err
    assert m.group(2) == cert and why in m.group(3), err
    assert int(m.group(1)) == 4 + 1  # the listener entry's line


def test_a_reload_serves_the_certificate_files_as_they_are_now(weir_factory, origin, certs):
    import shutil
    import signal
    w = start_tls_weir(weir_factory, origin, [certs["ec"]])
    ctx = client_ctx(certs)
    with tls_connect(w.port, ctx, "app.test") as s:
        assert s.getpeercert()["subject"] == ((("commonName", "app.test"),),)
    # the same paths now hold rsa.test's certificate and key
    shutil.copy(certs["rsa"][0], certs["ec"][0])
    shutil.copy(certs["rsa"][1], certs["ec"][1])
    old = w.wait_workers()
    before = w.metrics()("weir_reloads_total", result="ok")
    w.signal(signal.SIGHUP)
    wait_until(lambda: w.metrics()("weir_reloads_total", result="ok") > before, slack(5), what="the reload")
    # an old worker accepts (with the certificate it read at its start)
    # until it takes its drain signal; with no connection open it then
    # exits: once the old ones are gone every worker is of the new config
    wait_until(lambda: not any(pid_alive(p) for p in old), slack(10), what="the old workers to exit")
    with tls_connect(w.port, client_ctx(certs), "rsa.test") as s:
        assert s.getpeercert()["subject"] == ((("commonName", "rsa.test"),),)


def test_a_reload_with_a_broken_key_changes_nothing(weir_factory, origin, certs):
    import signal
    w = start_tls_weir(weir_factory, origin, [certs["ec"]])
    with open(certs["ec"][1], "w") as f:
        f.write("not a key\n")
    before = w.metrics()("weir_reloads_total", result="failed")
    w.signal(signal.SIGHUP)
    wait_until(lambda: w.metrics()("weir_reloads_total", result="failed") > before, slack(5), what="the refusal")
    w.logged(lambda l: "is not a PEM private key" in l)
    with tls_connect(w.port, client_ctx(certs), "app.test") as s:
        assert https_get(s, "/")[1] == b"hello from origin\n"


# ---- client certificates (mTLS) -------------------------------------------


def make_client(d, name, ca="ca"):
    """A client certificate for CN=<name>, O=Weir Tests signed by <ca>."""
    return make_leaf(d, name, "/O=Weir Tests/CN=%s" % name, ["extendedKeyUsage=clientAuth"], ca=ca)


def curl_tls(w, certs, target="/echo", client=None, headers=()):
    args = ["curl", "-sS", "--max-time", "10", "--cacert", certs["ca"], "--resolve",
            "app.test:%d:127.0.0.1" % w.port]
    if client:
        args += ["--cert", client[0], "--key", client[1]]
    for h in headers:
        args += ["-H", h]
    return subprocess.run(args + ["https://app.test:%d%s" % (w.port, target)], capture_output=True,
                          timeout=slack(15))


def echoed(r, name):
    assert r.returncode == 0, r.stderr
    return [v for n, v in json.loads(r.stdout)["headers"] if n.lower() == name.lower()]


def mtls(certs, verify="required"):
    return 'client_ca = "%s"; client_verify = "%s"; client_header = "X-Client-Subject";' % (certs["ca"], verify)


def test_required_client_cert_refuses_a_client_without_one_and_counts_it(weir_factory, origin, certs):
    w = start_tls_weir(weir_factory, origin, [certs["ec"]], tls_extra=mtls(certs))
    before = w.metrics().error("tls_handshake")
    r = curl_tls(w, certs)
    assert r.returncode != 0, r.stdout
    # TLS 1.2 as well, where the refusal comes inside the handshake
    r = subprocess.run(["curl", "-sS", "--max-time", "10", "--tlsv1.2", "--tls-max", "1.2", "--cacert", certs["ca"],
                        "--resolve", "app.test:%d:127.0.0.1" % w.port, "https://app.test:%d/" % w.port],
                       capture_output=True, timeout=slack(15))
    assert r.returncode != 0, r.stdout
    wait_until(lambda: w.metrics().error("tls_handshake") >= before + 2, slack(3), what="two counted failures")
    w.logged(lambda l: "TLS handshake failed" in l and "CERTIFICATE" in l.upper())
    assert origin.requests() == []


def test_required_client_cert_passes_and_the_origin_gets_the_verified_subject(weir_factory, origin, certs):
    client = make_client(certs["dir"], "alice")
    w = start_tls_weir(weir_factory, origin, [certs["ec"], certs["rsa"]], tls_extra=mtls(certs))
    # both versions, and a name that moves the handshake to the second
    # certificate's context (which must verify client certificates too)
    for tls, name in (("1.2", "app.test"), ("1.3", "app.test"), ("1.3", "rsa.test"), ("1.2", "rsa.test")):
        r = subprocess.run(["curl", "-sS", "--max-time", "10", "--tlsv" + tls, "--tls-max", tls,
                            "--cacert", certs["ca"], "--cert", client[0], "--key", client[1],
                            "--resolve", "%s:%d:127.0.0.1" % (name, w.port), "https://%s:%d/echo" % (name, w.port)],
                           capture_output=True, timeout=slack(15))
        assert echoed(r, "X-Client-Subject") == ["CN=alice,O=Weir Tests"], (tls, name)
    r = curl_tls(w, certs)
    assert r.returncode != 0, r.stdout


def test_a_client_sent_subject_header_never_reaches_the_origin(weir_factory, origin, certs):
    client = make_client(certs["dir"], "bob")
    w = start_tls_weir(weir_factory, origin, [certs["ec"]], tls_extra=mtls(certs, "optional"))
    forged = ["X-Client-Subject: CN=admin", "x-client-subject: CN=root"]
    # with a certificate: weir's line alone, whatever the client's case
    r = curl_tls(w, certs, client=client, headers=forged)
    assert echoed(r, "X-Client-Subject") == ["CN=bob,O=Weir Tests"]
    # without one: none at all
    r = curl_tls(w, certs, headers=forged)
    assert echoed(r, "X-Client-Subject") == []
    # a name that only starts the same goes through
    r = curl_tls(w, certs, headers=["X-Client-Subject-Extra: kept"])
    assert echoed(r, "X-Client-Subject-Extra") == ["kept"]


FORGED_SUBJECTS = ["X-Client-Subject: CN=admin", "x-client-subject: CN=root", "X_Client_Subject: CN=root",
                   "X-CLIENT_subject: CN=root"]


def subject_like(r):
    """Every header the origin got whose name a CGI backend reads as
    HTTP_X_CLIENT_SUBJECT."""
    assert r.returncode == 0, r.stderr
    return [(n, v) for n, v in json.loads(r.stdout)["headers"] if n.lower().replace("_", "-") == "x-client-subject"]


def test_a_forged_subject_in_any_spelling_is_dropped_on_every_listener_and_counted(weir_factory, origin, certs):
    from harness import free_port, get
    client = make_client(certs["dir"], "carol")
    plain = free_port()
    w = start_tls_weir(weir_factory, origin, [certs["ec"]], plain_port=plain, tls_extra=mtls(certs, "optional"))
    before = w.metrics().error("forged_header")
    # the TLS listener, with a certificate: weir's line alone
    r = curl_tls(w, certs, client=client, headers=FORGED_SUBJECTS)
    assert subject_like(r) == [("X-Client-Subject", "CN=carol,O=Weir Tests")]
    # without one: none at all
    r = curl_tls(w, certs, headers=FORGED_SUBJECTS)
    assert subject_like(r) == []
    # a plain listener routed to the same upstream has no certificate to vouch for
    r = get(plain, "/echo", host="app.test", headers=[tuple(h.split(": ", 1)) for h in FORGED_SUBJECTS])
    assert r.status == 200, r
    assert [(n, v) for n, v in r.json()["headers"] if n.lower().replace("_", "-") == "x-client-subject"] == []
    assert w.metrics().error("forged_header") == before + 3 * len(FORGED_SUBJECTS)


def test_optional_client_cert_serves_a_client_without_one_and_sends_no_header(weir_factory, origin, certs):
    w = start_tls_weir(weir_factory, origin, [certs["ec"]], tls_extra=mtls(certs, "optional"))
    before = w.metrics().error("tls_handshake")
    r = curl_tls(w, certs)
    assert echoed(r, "X-Client-Subject") == []
    assert w.metrics().error("tls_handshake") == before


def test_a_client_cert_from_another_ca_is_refused_even_when_optional(weir_factory, origin, certs):
    d = certs["dir"]
    make_ca(d, "other", "other CA")
    mallory = make_client(d, "mallory", ca="other")
    w = start_tls_weir(weir_factory, origin, [certs["ec"]], tls_extra=mtls(certs, "optional"))
    r = curl_tls(w, certs, client=mallory)
    assert r.returncode != 0, r.stdout


def test_a_session_resumed_with_a_client_cert_keeps_its_subject(weir_factory, origin, certs):
    client = make_client(certs["dir"], "carol")
    w = start_tls_weir(weir_factory, origin, [certs["ec"]], tls_extra=mtls(certs))
    ctx = client_ctx(certs)
    ctx.load_cert_chain(*client)
    with tls_connect(w.port, ctx, "app.test") as s:
        https_get(s, "/")
        session = s.session
    with tls_connect(w.port, ctx, "app.test", session=session) as s:
        assert s.session_reused
        head, body = https_get(s, "/echo")
    assert [v for n, v in json.loads(body)["headers"] if n.lower() == "x-client-subject"] == ["CN=carol,O=Weir Tests"]


@pytest.mark.parametrize("case", ["missing", "not pem"])
def test_weir_t_names_a_bad_client_ca(tmp_path, certs, case):
    ca = os.path.join(certs["dir"], "nope.pem")
    if case == "not pem":
        with open(ca, "w") as f:
            f.write("hello\n")
        why = "no PEM certificate in it"
    else:
        why = "cannot read it: No such file"
    text = conf_with(tmp_path, [certs["ec"]], tls_extra='\n  client_ca = "%s";' % ca)
    rc, err, path = check_conf(tmp_path, text)
    assert rc == 1
    m = re.search(r"^%s:(\d+): client_ca (\S+): (.*)$" % re.escape(path), err, re.M)
    assert m, err
    assert m.group(2) == ca and why in m.group(3), err
    assert int(m.group(1)) == 4 + 2  # the client_ca line


def test_weir_t_refuses_client_header_without_client_ca_and_a_bad_verify(tmp_path, certs):
    rc, err, _ = check_conf(tmp_path, conf_with(tmp_path, [certs["ec"]], 'client_header = "X-Client-Subject";'))
    assert rc == 1 and "need client_ca" in err, err
    rc, err, _ = check_conf(tmp_path, conf_with(tmp_path, [certs["ec"]],
                                                'client_ca = "%s"; client_verify = "maybe";' % certs["ca"]))
    assert rc == 1 and 'client_verify "maybe"' in err, err
    rc, err, _ = check_conf(tmp_path, conf_with(tmp_path, [certs["ec"]],
                                                'client_ca = "%s"; client_header = "Host";' % certs["ca"]))
    assert rc == 1 and 'client_header "Host"' in err, err
    # in any spelling a backend reads as the same variable
    for name in ("X_Forwarded_For", "x-forwarded_proto", "Content_Length"):
        rc, err, _ = check_conf(tmp_path, conf_with(tmp_path, [certs["ec"]],
                                                    'client_ca = "%s"; client_header = "%s";' % (certs["ca"], name)))
        assert rc == 1 and 'client_header "%s"' % name in err, err
    rc, err, _ = check_conf(tmp_path, conf_with(tmp_path, [certs["ec"]], mtls(certs)))
    assert rc == 0, err


# ---- OCSP stapling ---------------------------------------------------------


def make_ocsp(certs, leaf, out, revoked=False):
    """A DER OCSP response for <leaf> signed by the test CA itself, made
    with `openssl ocsp` in responder mode from an index file."""
    d = certs["dir"]
    serial = subprocess.run(["openssl", "x509", "-in", leaf, "-noout", "-serial"], capture_output=True,
                            check=True, text=True).stdout.strip().split("=")[1]
    status = "R\t%s\t%s" % ("301231000000Z", "260101000000Z") if revoked else "V\t301231000000Z\t"
    with open(os.path.join(d, "index.txt"), "w") as f:
        f.write("%s\t%s\tunknown\t/CN=app.test\n" % (status, serial))
    openssl("ocsp", "-index", "index.txt", "-rsigner", "ca.pem", "-rkey", "ca.key", "-CA", "ca.pem",
            "-issuer", "ca.pem", "-cert", leaf, "-no_nonce", "-ndays", "1", "-respout", out, cwd=d)
    return out


def test_an_ocsp_response_is_stapled_and_a_reload_reads_the_file_anew(weir_factory, origin, certs):
    import shutil
    import signal
    d = certs["dir"]
    resp = make_ocsp(certs, certs["ec"][0], os.path.join(d, "app.ocsp"))
    cert, key = certs["ec"]
    w = start_tls_weir(weir_factory, origin, [(cert, key, 'ocsp = "%s";' % resp), certs["rsa"]])
    out = s_client(w.port, "-servername", "app.test", "-status", "-CAfile", certs["ca"])
    assert "OCSP Response Status: successful" in out, out
    assert "Cert Status: good" in out, out
    # the other certificate has none: nothing stapled for it
    out = s_client(w.port, "-servername", "rsa.test", "-status", "-CAfile", certs["ca"])
    assert "OCSP response: no response sent" in out, out
    # TLS 1.2 staples it too (in CertificateStatus rather than the
    # certificate's extensions)
    out = s_client(w.port, "-servername", "app.test", "-status", "-tls1_2", "-CAfile", certs["ca"])
    assert "OCSP Response Status: successful" in out, out
    # a new response in the same file, then a reload: new workers staple it
    make_ocsp(certs, cert, os.path.join(d, "new.ocsp"), revoked=True)
    shutil.copy(os.path.join(d, "new.ocsp"), resp)
    before = w.metrics()("weir_reloads_total", result="ok")
    w.signal(signal.SIGHUP)
    wait_until(lambda: w.metrics()("weir_reloads_total", result="ok") > before, slack(5), what="the reload")
    wait_until(lambda: "Cert Status: revoked" in s_client(w.port, "-servername", "app.test", "-status"),
               slack(5), what="the new response stapled")


@pytest.mark.parametrize("case", ["missing", "not der", "not successful"])
def test_weir_t_names_a_bad_ocsp_file(tmp_path, certs, case):
    d = certs["dir"]
    resp = os.path.join(d, "bad.ocsp")
    if case == "not der":
        with open(resp, "wb") as f:
            f.write(b"-----BEGIN nothing-----\n")
        why = "not a DER OCSP response"
    elif case == "not successful":
        with open(resp, "wb") as f:
            f.write(bytes([0x30, 0x03, 0x0a, 0x01, 0x03]))  # tryLater
        why = "its status is 3"
    else:
        resp = os.path.join(d, "nope.ocsp")
        why = "cannot read it: No such file"
    cert, key = certs["ec"]
    rc, err, path = check_conf(tmp_path, conf_with(tmp_path, [(cert, key, '\n  ocsp = "%s";' % resp)]))
    assert rc == 1
    m = re.search(r"^%s:(\d+): OCSP response (\S+): (.*)$" % re.escape(path), err, re.M)
    assert m, err
    assert m.group(2) == resp and why in m.group(3), err
    assert int(m.group(1)) == 4 + 2  # the ocsp line


def test_a_subject_with_commas_and_non_ascii_arrives_escaped_on_one_line(weir_factory, origin, certs):
    d = certs["dir"]
    dave = make_leaf(d, "dave", "/O=Wéir, Inc./CN=dave+OU=ops", utf8=True)
    w = start_tls_weir(weir_factory, origin, [certs["ec"]], tls_extra=mtls(certs))
    r = curl_tls(w, certs, client=dave)
    assert echoed(r, "X-Client-Subject") == [r"CN=dave+OU=ops,O=W\C3\A9ir\, Inc."]
