"""Real client addresses (trusted_proxies, real_ip_depth), request ids
(request_id = true) and the PROXY protocol towards an upstream group: X-Forwarded-For believed from the right through
trusted hops, the client in the access log and in the X-Forwarded-For sent
upstream (the believed entries and the peer, nothing a client wrote left of
them), garbage counted as bad_forwarded_for, PROXY protocol sources judged
the same way, X-Request-Id kept from a trusted peer or made, and the
config errors with their lines."""

import re
import socket
import subprocess

import pytest

from harness import (Client, WEIR_BIN, build_request, closed_port, free_port, render_config, simple, slack,
                     wait_until)
from test_proxy_protocol import v1, v2

ID = re.compile(r"^[0-9a-f]{32}$")


def xff(j):
    return [v for n, v in j["headers"] if n.lower() == "x-forwarded-for"]


def hdr(j, name):
    return [v for n, v in j["headers"] if n.lower() == name.lower()]


def echo(w, target, headers=()):
    with w.client() as c:
        r = c.request("GET", target, headers=list(headers))
    assert r.status == 200, r
    return r, r.json()


def line_for(w, target):
    return wait_until(lambda: [l for l in w.access_lines() if '"GET %s ' % target in l], slack(3),
                      what="access line for %s" % target)[-1]


def trusting(weir_factory, origin, trusted, depth=None, extra="", **kw):
    text = "trusted_proxies = [ %s ];" % ", ".join('"%s"' % t for t in trusted)
    if depth:
        text += " real_ip_depth = %d;" % depth
    return simple(weir_factory, origin, extra=text + " " + extra, **kw)


@pytest.mark.parametrize("depth,sent,client,upstream", [
    # one trusted hop (the test's own 127.0.0.1): the rightmost entry
    (1, ["203.0.113.5"], "203.0.113.5", "203.0.113.5, 127.0.0.1"),
    # a spoofed entry left of the real client is not passed on
    (3, ["6.6.6.6, 203.0.113.5, 10.0.0.2"], "203.0.113.5", "203.0.113.5, 10.0.0.2, 127.0.0.1"),
    # the same over two header lines, and with IPv6
    (3, ["6.6.6.6, 2001:db8::5", "10.0.0.2"], "2001:db8::5", "2001:db8::5, 10.0.0.2, 127.0.0.1"),
    # depth 1: only the hop next to us is read, even though it is trusted
    (1, ["203.0.113.5, 10.0.0.2"], "10.0.0.2", "10.0.0.2, 127.0.0.1"),
    # every entry trusted: the leftmost one read
    (4, ["10.9.9.9, 10.0.0.2"], "10.9.9.9", "10.9.9.9, 10.0.0.2, 127.0.0.1"),
    # no X-Forwarded-For at all: the peer
    (2, [], "127.0.0.1", "127.0.0.1"),
])
def test_a_trusted_chain_is_walked_from_the_right_to_the_first_untrusted_hop(weir_factory, origin, depth, sent,
                                                                             client, upstream):
    w = trusting(weir_factory, origin, ["127.0.0.0/8", "10.0.0.0/8"], depth)
    target = "/echo/chain"
    r, j = echo(w, target, [("X-Forwarded-For", v) for v in sent])
    assert xff(j) == [upstream], j["headers"]
    assert line_for(w, target).startswith(client + " "), w.access_lines()


def test_a_request_refused_after_its_head_is_logged_with_its_real_client(weir_factory, origin):
    w = trusting(weir_factory, origin, ["127.0.0.0/8"])
    with Client(w.port) as c:
        c.send(b"GET /dup HTTP/1.1\r\nHost: a\r\nHost: b\r\nX-Forwarded-For: 203.0.113.5\r\n\r\n")
        assert c.read_response().status == 400
    assert line_for(w, "/dup").startswith("203.0.113.5 "), w.access_lines()


def test_an_untrusted_peer_is_the_client_and_its_x_forwarded_for_is_dropped(weir_factory, origin):
    w = trusting(weir_factory, origin, ["10.0.0.0/8"], 3)
    r, j = echo(w, "/echo/untrusted", [("X-Forwarded-For", "10.0.0.7, 203.0.113.5")])
    assert xff(j) == ["127.0.0.1"], j["headers"]
    assert line_for(w, "/echo/untrusted").startswith("127.0.0.1 ")


def test_without_trusted_proxies_x_forwarded_for_is_appended_to_as_before(weir_factory, origin):
    w = simple(weir_factory, origin)
    r, j = echo(w, "/echo/plain", [("X-Forwarded-For", "203.0.113.5")])
    assert xff(j) == ["203.0.113.5, 127.0.0.1"]
    assert line_for(w, "/echo/plain").startswith("127.0.0.1 ")


@pytest.mark.parametrize("sent,client,upstream", [
    (["203.0.113.5, not-an-address"], "127.0.0.1", "127.0.0.1"),
    (["203.0.113.5, 10.0.0.2:8080"], "127.0.0.1", "127.0.0.1"),
    (["garbage, 203.0.113.5"], "203.0.113.5", "203.0.113.5, 127.0.0.1"),
    (["10.0.0.3, unknown, 10.0.0.2"], "10.0.0.2", "10.0.0.2, 127.0.0.1"),
])
def test_garbage_from_a_trusted_hop_stops_the_walk_and_is_counted(weir_factory, origin, sent, client, upstream):
    w = trusting(weir_factory, origin, ["127.0.0.0/8", "10.0.0.0/8"], 4)
    before = w.metrics().error("bad_forwarded_for")
    r, j = echo(w, "/echo/garbage", [("X-Forwarded-For", v) for v in sent])
    assert xff(j) == [upstream], j["headers"]
    assert line_for(w, "/echo/garbage").startswith(client + " ")
    stops = 0 if sent[0].startswith("garbage") else 1
    assert w.metrics().error("bad_forwarded_for") - before == stops


def test_a_proxy_protocol_source_is_judged_as_a_peer(weir_factory, origin):
    w = weir_factory(start=False, upstreams=[{"name": "a", "servers": [origin.addr]}],
                     routes=[{"path": "/", "upstream": "a"}], workers=1,
                     extra='trusted_proxies = [ "10.0.0.0/8" ]; real_ip_depth = 2;')
    text = open(w.conf).read()
    old = 'listeners = ( { address = "127.0.0.1:%d"; } );' % w.port
    w.write_raw_config(text.replace(old, 'listeners = ( { address = "127.0.0.1:%d"; proxy_protocol = true; } );'
                                    % w.port))
    w.start()
    cases = [
        # the balancer's source is a trusted proxy: its X-Forwarded-For counts
        (v2("10.1.2.3", "127.0.0.1", 1000, w.port), "/echo/pp-trusted", "203.0.113.9",
         "203.0.113.9, 10.1.2.3"),
        (v1("10.1.2.3", "127.0.0.1", 1000, w.port), "/echo/pp-trusted-v1", "203.0.113.9",
         "203.0.113.9, 10.1.2.3"),
        # a client straight behind the balancer: its own header is not believed
        (v2("198.51.100.1", "127.0.0.1", 1000, w.port), "/echo/pp-client", "198.51.100.1", "198.51.100.1"),
    ]
    for header, target, client, upstream in cases:
        with Client(w.port) as c:
            c.send(header + build_request("GET", target, headers=[("X-Forwarded-For", "203.0.113.9")]))
            r = c.read_response()
        assert r.status == 200, r
        assert xff(r.json()) == [upstream], (target, r.json()["headers"])
        assert line_for(w, target).startswith(client + " "), target


def test_a_request_id_is_made_sent_upstream_returned_and_logged(weir_factory, origin):
    w = simple(weir_factory, origin, extra="request_id = true;",
               log_extra='format = "$request_id $status $request_uri"; ')
    ids = set()
    for i in range(3):
        r, j = echo(w, "/echo/id%d" % i)
        up = hdr(j, "X-Request-Id")
        assert len(up) == 1 and ID.match(up[0]), j["headers"]
        assert r.get_all("X-Request-Id") == up
        ids.add(up[0])
        line = wait_until(lambda: [l for l in w.access_lines() if l.endswith("/echo/id%d" % i)], slack(3))[-1]
        assert line == "%s 200 /echo/id%d" % (up[0], i)
    assert len(ids) == 3


@pytest.mark.parametrize("trusted,sent,kept", [
    (["127.0.0.0/8"], "abc-123.x:y+z/=", True),
    (["10.0.0.0/8"], "abc-123", False),        # an untrusted client's id is replaced
    (["127.0.0.0/8"], "has space", False),     # not the id alphabet
    (["127.0.0.0/8"], "x" * 65, False),         # too long
])
def test_a_request_id_is_kept_only_from_a_trusted_peer(weir_factory, origin, trusted, sent, kept):
    w = trusting(weir_factory, origin, trusted, extra="request_id = true;")
    r, j = echo(w, "/echo/keep", [("X-Request-Id", sent)])
    up = hdr(j, "X-Request-Id")
    assert len(up) == 1, j["headers"]
    if kept:
        assert up == [sent]
    else:
        assert ID.match(up[0]), up
    assert r.get_all("X-Request-Id") == up


def test_weir_s_own_error_answers_carry_the_request_id(weir_factory, origin):
    port = closed_port()
    w = weir_factory(upstreams=[{"name": "a", "servers": [origin.addr]}, {"name": "down",
                                                                         "servers": ["127.0.0.1:%d" % port]}],
                     routes=[{"host": "x.example", "path": "/", "upstream": "a"},
                             {"host": "down.example", "path": "/", "upstream": "down"}],
                     extra="request_id = true;", log_extra='format = "$status $request_id"; ')
    with Client(w.port) as c:
        for host, status in (("nope.example", 404), ("down.example", 502)):
            r = c.request("GET", "/e", host=host)
            assert r.status == status
            ids = r.get_all("X-Request-Id")
            assert len(ids) == 1 and ID.match(ids[0]), r.raw_head
            assert r.raw_head.endswith(b"X-Request-Id: %s\r\n\r\n" % ids[0].encode())
            wait_until(lambda: "%d %s" % (status, ids[0]) in w.access_lines(), slack(3), what="its line")
    # a head refused as a whole (a 400) gets one too
    with Client(w.port) as c:
        c.send(b"GET /dup HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n")
        r = c.read_response()
        assert r.status == 400 and ID.match(r.get("X-Request-Id")), r.raw_head


def test_without_request_id_no_header_is_added(weir_factory, origin):
    w = simple(weir_factory, origin)
    r, j = echo(w, "/echo/noid", [("X-Request-Id", "client-1")])
    assert hdr(j, "X-Request-Id") == ["client-1"]
    assert not r.has("X-Request-Id")


def weir_t(tmp_path, extra):
    text = render_config(str(tmp_path), free_port(), free_port(),
                         upstreams=[{"name": "a", "servers": ["127.0.0.1:9"]}],
                         routes=[{"path": "/", "upstream": "a"}], extra=extra)
    p = tmp_path / "weir.conf"
    p.write_text(text)
    r = subprocess.run([WEIR_BIN, "-t", "-c", str(p)], capture_output=True, timeout=slack(10))
    line = next(i for i, l in enumerate(text.splitlines(), 1) if extra.splitlines()[-1] in l)
    return r.returncode, r.stderr.decode(), "%s:%d: " % (p, line)


@pytest.mark.parametrize("extra,why", [
    ('trusted_proxies = [ "10.0.0.0/33" ];', 'trusted_proxies "10.0.0.0/33" has a prefix length past 32'),
    ('trusted_proxies = [ "banana" ];', 'trusted_proxies "banana" must be an address or a block'),
    ('trusted_proxies = [ "10.0.0.1/8" ];', "has bits set past its prefix length"),
    ('trusted_proxies = [ "10.0.0.0/" ];', "has no prefix length"),
    ('trusted_proxies = [ 10 ];', "trusted_proxies entries must be strings"),
    ('trusted_proxies = "10.0.0.0/8";', "trusted_proxies must be a list of strings"),
    ("real_ip_depth = 0;", "real_ip_depth must be from 1 to 16 (got 0)"),
    ("real_ip_depth = 17;", "real_ip_depth must be from 1 to 16 (got 17)"),
])
def test_bad_trusted_proxies_and_depths_are_refused_with_their_line(tmp_path, extra, why):
    rc, err, where = weir_t(tmp_path, extra)
    assert rc == 1, err
    assert where + "" in err and why in err, err


def test_good_trusted_proxies_pass_weir_t(tmp_path):
    rc, err, _ = weir_t(tmp_path, 'trusted_proxies = [ "10.0.0.0/8", "192.168.1.1", "2001:db8::/32", "::1" ];'
                                  "\nreal_ip_depth = 16;")
    assert rc == 0, err


# ---- the PROXY protocol towards an upstream group --------------------------


def pp_chain(weir_factory, origin, version, front_extra=""):
    """weir A (group "b" with proxy_protocol = <version>) -> weir B (a
    proxy_protocol listener) -> origin."""
    b = weir_factory(start=False, upstreams=[{"name": "a", "servers": [origin.addr]}],
                     routes=[{"path": "/", "upstream": "a"}], workers=1)
    text = open(b.conf).read()
    old = 'listeners = ( { address = "127.0.0.1:%d"; } );' % b.port
    b.write_raw_config(text.replace(old, 'listeners = ( { address = "127.0.0.1:%d"; proxy_protocol = true; } );'
                                    % b.port))
    b.start()
    a = weir_factory(start=False, upstreams=[{"name": "b", "servers": ["127.0.0.1:%d" % b.port]}],
                     routes=[{"path": "/", "upstream": "b"}], workers=1, extra=front_extra)
    text = open(a.conf).read().replace('{ name = "b"; ', '{ name = "b"; proxy_protocol = "%s"; ' % version)
    a.write_raw_config(text)
    a.start()
    return a, b


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_a_group_with_proxy_protocol_tells_the_client_to_its_servers(weir_factory, origin, version):
    a, b = pp_chain(weir_factory, origin, version, 'trusted_proxies = [ "127.0.0.0/8" ];')
    before = b.metrics().error("proxy_protocol")
    with Client(a.port) as c:
        for i, client in enumerate(["203.0.113.5", "2001:db8::9"]):
            r = c.request("GET", "/echo/pp%d" % i, headers=[("X-Forwarded-For", client)])
            assert r.status == 200, r
            # B believes the header: the client is the last X-Forwarded-For
            # entry it adds, and the first column of its log
            assert xff(r.json())[0].endswith(", " + client), r.json()["headers"]
            assert line_for(b, "/echo/pp%d" % i).startswith(client + " ")
    assert b.metrics().error("proxy_protocol") == before
    # a connection that told one client's address is never pooled
    m = a.metrics()
    assert m("weir_upstream_reuses_total") == 0 and m("weir_upstream_connects_total") >= 2


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_health_checks_of_such_a_group_open_with_a_local_header(weir_factory, origin, version):
    a, b = pp_chain(weir_factory, origin, version)
    text = open(a.conf).read().replace('proxy_protocol = "%s"; ' % version,
                                       'proxy_protocol = "%s"; health = { path = "/"; interval = "500ms"; '
                                       'timeout = "500ms"; jitter = "off"; }; ' % version)
    a.stop()
    a.write_raw_config(text)
    a.start()

    def checks(result):
        return sum(v for (n, labels), v in a.metrics().samples.items()
                   if n == "weir_health_checks_total" and ("result", result) in labels)
    wait_until(lambda: checks("ok") >= 3, slack(5), what="three passed checks")
    assert sum(checks(r) for r in ("bad_status", "closed", "bad_response", "timeout", "connect_failed")) == 0
    assert b.metrics().error("proxy_protocol") == 0
    assert echo(a, "/echo/after-checks")[0].status == 200


@pytest.mark.skipif(not __import__("shutil").which("haproxy"), reason="haproxy is not installed")
@pytest.mark.parametrize("version", ["v1", "v2"])
def test_haproxy_accepts_the_header_weir_sends(weir_factory, origin, tmp_path, version):
    hport = free_port()
    cfg = tmp_path / "haproxy.cfg"
    cfg.write_text("""global
    maxconn 100
defaults
    mode http
    timeout connect 2s
    timeout client 5s
    timeout server 5s
frontend fe
    bind 127.0.0.1:%d accept-proxy
    option forwardfor
    default_backend be
backend be
    server o %s
""" % (hport, origin.addr))
    out = open(str(tmp_path / "haproxy.out"), "wb")
    hp = subprocess.Popen(["haproxy", "-db", "-f", str(cfg)], stdout=out, stderr=out, stdin=subprocess.DEVNULL,
                          start_new_session=True)
    try:
        import harness
        wait_until(lambda: hp.poll() is None and harness.can_connect(hport, 0.2), slack(5), what="haproxy")
        a = weir_factory(start=False, upstreams=[{"name": "h", "servers": ["127.0.0.1:%d" % hport]}],
                         routes=[{"path": "/", "upstream": "h"}], workers=1,
                         extra='trusted_proxies = [ "127.0.0.0/8" ];')
        a.write_raw_config(open(a.conf).read().replace('{ name = "h"; ', '{ name = "h"; proxy_protocol = "%s"; '
                                                       % version))
        a.start()
        r = echo(a, "/echo/hap", [("X-Forwarded-For", "198.51.100.77")])[1]
        # haproxy's option forwardfor adds the PROXY header's source
        assert xff(r)[-1] == "198.51.100.77" or xff(r)[-1].endswith(", 198.51.100.77"), r["headers"]
    finally:
        harness.kill_and_reap(hp)


def test_a_bad_upstream_proxy_protocol_is_refused(tmp_path):
    text = render_config(str(tmp_path), free_port(), free_port(),
                         upstreams=[{"name": "a", "servers": ["127.0.0.1:9"]}],
                         routes=[{"path": "/", "upstream": "a"}])
    text = text.replace('{ name = "a"; ', '{ name = "a"; proxy_protocol = "v3"; ')
    p = tmp_path / "weir.conf"
    p.write_text(text)
    r = subprocess.run([WEIR_BIN, "-t", "-c", str(p)], capture_output=True, timeout=slack(10))
    line = next(i for i, l in enumerate(text.splitlines(), 1) if '"v3"' in l)
    assert r.returncode == 1
    assert '%s:%d: upstreams.proxy_protocol "v3" is not one of' % (p, line) in r.stderr.decode(), r.stderr
