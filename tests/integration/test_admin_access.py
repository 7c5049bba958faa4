"""Who may reach the stats socket's admin commands (issue 10, item 9): over
TCP only with the token; nothing a web page can make a browser send (an
Origin header, a Host that is not the stats socket: DNS rebinding); and
idle or half-sent connections cannot lock scrapes out."""

import socket
import time

from harness import STATS_TOKEN, Client, fetch_metrics, simple, slack

BAD_HOSTS = ("evil.example", "evil.example:%d", "127.0.0.1.nip.io:%d", "localhost:1", "127.0.0.1:1")


def stats(w, method, target, host=None, headers=(), token=None):
    hs = [("Connection", "close")] + list(headers)
    if method == "POST":
        hs.append(("Content-Length", "0"))
    if token:
        hs.append(("Authorization", "Bearer " + token))
    with Client(w.stats_port, timeout=5) as c:
        r = c.request(method, target, host=host or "127.0.0.1:%d" % w.stats_port, headers=hs)
    return r.status, r.body.decode()


def unix_post(path, target):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect(path)
    s.sendall(("POST %s HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
               % target).encode())
    out = b""
    while True:
        d = s.recv(65536)
        if not d:
            break
        out += d
    s.close()
    return int(out.split(b" ", 2)[1]), out.decode("utf-8", "replace")


def state_of(w, server):
    _, text = stats(w, "GET", "/upstreams")
    for line in text.splitlines():
        parts = line.split()
        if len(parts) > 2 and parts[0] == "server" and parts[1] == server:
            return dict(p.split("=", 1) for p in parts[2:] if "=" in p)["state"]
    raise AssertionError(text)


def with_stats_block(w, block):
    with open(w.conf) as f:
        text = f.read()
    old = 'stats = { listen = "127.0.0.1:%d"; admin_token = "%s"; };' % (w.stats_port, STATS_TOKEN)
    assert old in text
    with open(w.conf, "w") as f:
        f.write(text.replace(old, block))


def test_admin_posts_over_loopback_tcp_without_a_token_are_refused(weir_factory, origin, tmp_path):
    w = simple(weir_factory, origin, start=False, workers=1)
    sock = str(tmp_path / "stats.sock")
    with_stats_block(w, 'stats = { listen = "127.0.0.1:%d"; unix = "%s"; mode = "0600"; };' % (w.stats_port, sock))
    w.start()
    down = "/upstreams/a/%s?state=down" % origin.addr
    status, text = stats(w, "POST", down)
    assert status == 403, (status, text)
    assert "stats.admin_token" in text and "unix socket" in text, text
    assert state_of(w, origin.addr) == "up"
    assert w.get("/").status == 200
    # reading over TCP stays open, and the unix socket takes the command
    assert stats(w, "GET", "/metrics")[0] == 200
    status, text = unix_post(sock, down)
    assert status == 200 and "state=down" in text, text
    assert state_of(w, origin.addr) == "down"


def test_admin_posts_with_the_token_work_and_without_it_get_401(weir_factory, origin):
    w = simple(weir_factory, origin, workers=1)
    down = "/upstreams/a/%s?state=down" % origin.addr
    assert stats(w, "POST", down)[0] == 401
    assert state_of(w, origin.addr) == "up"
    status, text = stats(w, "POST", down, token=STATS_TOKEN)
    assert status == 200 and "state=down" in text, text
    assert state_of(w, origin.addr) == "down"


def test_requests_with_an_origin_header_are_refused(weir_factory, origin):
    """A cross-site form POST from a browser carries Origin (and cannot
    carry the token, but a fetch from a page that learnt it could)."""
    w = simple(weir_factory, origin, workers=1)
    down = "/upstreams/a/%s?state=down" % origin.addr
    for o in ("http://evil.example", "null", "http://127.0.0.1:%d" % w.stats_port):
        status, text = stats(w, "POST", down, headers=[("Origin", o)], token=STATS_TOKEN)
        assert status == 403 and "Origin" in text, (o, status, text)
        status, text = stats(w, "GET", "/metrics", headers=[("Origin", o)])
        assert status == 403, (o, status, text)
    assert state_of(w, origin.addr) == "up"
    assert stats(w, "GET", "/metrics")[0] == 200


def test_a_host_that_is_not_the_stats_socket_is_refused(weir_factory, origin):
    """DNS rebinding: a page on evil.example whose name now resolves to
    127.0.0.1 reaches the socket, but its requests say Host: evil.example."""
    w = simple(weir_factory, origin, workers=1)
    port = w.stats_port
    down = "/upstreams/a/%s?state=down" % origin.addr
    for h in BAD_HOSTS:
        h = h % port if "%d" in h else h
        status, text = stats(w, "GET", "/metrics", host=h)
        assert status == 403 and "is not this stats socket" in text, (h, status, text)
        assert stats(w, "POST", down, host=h, token=STATS_TOKEN)[0] == 403, h
    assert state_of(w, origin.addr) == "up"
    for h in ("127.0.0.1:%d" % port, "localhost:%d" % port, "LOCALHOST:%d" % port, "127.0.0.1", "localhost",
              "[::1]:%d" % port):
        status, text = stats(w, "GET", "/metrics", host=h)
        assert status == 200 and "weir_requests_total" in text, (h, status, text[:200])


def test_idle_and_half_sent_connections_do_not_stall_scrapes(weir_factory, origin):
    w = simple(weir_factory, origin, workers=1)
    held = []
    try:
        for _ in range(50):
            held.append(socket.create_connection(("127.0.0.1", w.stats_port), timeout=5))
        for _ in range(5):
            s = socket.create_connection(("127.0.0.1", w.stats_port), timeout=5)
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            held.append(s)
        time.sleep(0.2)
        for i in range(5):
            t0 = time.monotonic()
            m = fetch_metrics(w.stats_port, timeout=slack(3))
            assert m("weir_requests_total") >= 0
            assert time.monotonic() - t0 < slack(3), "scrape %d took %.1f s" % (i, time.monotonic() - t0)
    finally:
        for s in held:
            s.close()
