"""Direct responses and redirects (routes.return): answered by weir with no
upstream, byte for byte, with variables; keep-alive, HEAD and a request
body; counters and the access log as for any answer; config errors (no
location on a redirect, CR or LF in a header value, both or neither of
upstream and return, unknown variables) with their lines."""

import re
import shutil
import subprocess

import pytest

from harness import Client, WEIR_BIN, build_request, free_port, render_config, slack, wait_until

CURL = shutil.which("curl") or "/usr/bin/curl"


def ret_weir(weir_factory, origin, routes, **kw):
    return weir_factory(upstreams=[{"name": "a", "servers": [origin.addr]}],
                        routes=routes + [{"path": "/", "upstream": "a"}], **kw)


def raw_answer(w, raw):
    with Client(w.port) as c:
        c.send(raw)
        r = c.read_response(method=raw.split(b" ", 1)[0].decode())
        return r, c


REDIRECT = {"host": "old.example", "path": "/",
            "extra": 'return = { status = 301; location = "https://new.example$request_uri"; }; '}
HOST_REDIRECT = {"path": "/go",
                 "extra": 'return = { status = 308; location = "https://$host:8443$path?from=$arg_x"; }; '}
HEALTH = {"path": "/healthz", "extra": 'return = { status = 200; body = "ok\\n"; }; '}
PAGE = {"path": "/maint", "extra": 'return = { status = 503; body = "<p>back soon, $client_ip</p>"; '
                                   'content_type = "text/html; charset=utf-8"; }; '}


def test_a_redirect_is_answered_byte_for_byte_without_the_upstream(weir_factory, origin):
    w = ret_weir(weir_factory, origin, [REDIRECT, HOST_REDIRECT])
    before = w.metrics()
    with Client(w.port) as c:
        c.send(build_request("GET", "/a/b?c=1&d=%20", host="old.example"))
        r = c.read_response()
        assert r.raw_head == (b"HTTP/1.1 301 Moved Permanently\r\nContent-Length: 0\r\n"
                              b"Location: https://new.example/a/b?c=1&d=%20\r\n\r\n")
        # the connection stays open for the next request
        c.send(build_request("GET", "/go/x?x=7", host="api.example:80"))
        r = c.read_response()
        assert r.raw_head == (b"HTTP/1.1 308 Permanent Redirect\r\nContent-Length: 0\r\n"
                              b"Location: https://api.example:8443/go/x?from=7\r\n\r\n")
    assert origin.requests() == []
    three = lambda m: m("weir_responses_total", **{"class": "3xx"})
    wait_until(lambda: three(w.metrics()) - three(before) == 2, slack(3), what="two 3xx counted")
    lines = wait_until(lambda: (lambda l: l if len(l) >= 2 else None)(w.access_lines()), slack(3))
    assert any('"GET /a/b?c=1&d=%20 HTTP/1.1" 301 ' in l for l in lines), lines


def test_curl_follows_the_status_and_location(weir_factory, origin):
    w = ret_weir(weir_factory, origin, [REDIRECT])
    out = subprocess.run([CURL, "-sS", "-o", "/dev/null", "-w", "%{http_code} %{redirect_url}",
                          "-H", "Host: old.example", "http://127.0.0.1:%d/p?q=1" % w.port],
                         capture_output=True, timeout=slack(10))
    assert out.stdout.decode() == "301 https://new.example/p?q=1", out


@pytest.mark.parametrize("status,reason", [(301, "Moved Permanently"), (302, "Found"), (303, "See Other"),
                                           (307, "Temporary Redirect"), (308, "Permanent Redirect")])
def test_every_redirect_status_has_its_reason(weir_factory, origin, status, reason):
    w = ret_weir(weir_factory, origin, [{"path": "/r", "extra": 'return = { status = %d; location = "/new"; }; '
                                         % status}])
    r, _ = raw_answer(w, build_request("GET", "/r"))
    assert r.raw_head == ("HTTP/1.1 %d %s\r\nContent-Length: 0\r\nLocation: /new\r\n\r\n"
                          % (status, reason)).encode()


def test_a_fixed_body_with_its_type_and_head_without_it(weir_factory, origin):
    w = ret_weir(weir_factory, origin, [HEALTH, PAGE])
    r, _ = raw_answer(w, build_request("GET", "/healthz"))
    assert r.raw_head == b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n\r\n"
    assert r.body == b"ok\n"
    r, _ = raw_answer(w, build_request("HEAD", "/healthz"))
    assert r.raw_head == b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n\r\n"
    assert r.body == b""
    r, _ = raw_answer(w, build_request("GET", "/maint/x"))
    assert r.status == 503 and r.get("Content-Type") == "text/html; charset=utf-8"
    assert r.body == b"<p>back soon, 127.0.0.1</p>"
    assert origin.requests() == []


def test_http10_keep_alive_and_close(weir_factory, origin):
    w = ret_weir(weir_factory, origin, [HEALTH])
    with Client(w.port) as c:
        c.send(b"GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        r = c.read_response()
        assert r.raw_head.endswith(b"Content-Length: 3\r\nConnection: keep-alive\r\n\r\n") and r.body == b"ok\n"
        c.send(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        r = c.read_response()
        assert r.get("Connection") == "close" and r.body == b"ok\n"
        assert c.closed_by_peer()


def test_a_request_body_is_not_read_and_the_connection_closes_after(weir_factory, origin):
    w = ret_weir(weir_factory, origin, [HEALTH])
    with Client(w.port) as c:
        c.send(build_request("POST", "/healthz", body=b"x" * 1000))
        r = c.read_response()
        assert r.status == 200 and r.body == b"ok\n"
    with Client(w.port) as c:
        # a small body that came whole: the answer, then the next request
        c.send(build_request("POST", "/healthz", body=b"abc") + build_request("GET", "/healthz"))
        assert c.read_response().status == 200


def test_request_id_goes_in_the_answer(weir_factory, origin):
    w = ret_weir(weir_factory, origin, [HEALTH], extra="request_id = true;")
    r, _ = raw_answer(w, build_request("GET", "/healthz"))
    assert re.match(rb"^HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n"
                    rb"X-Request-Id: [0-9a-f]{32}\r\n\r\n$", r.raw_head), r.raw_head


def test_a_location_that_cannot_be_a_header_is_answered_500_and_counted(weir_factory, origin):
    # the parser keeps control bytes out of what variables read; what is
    # left to refuse at run time is a location past 8 KiB
    w = ret_weir(weir_factory, origin, [{"path": "/r", "extra": 'return = { status = 302; location = '
                                         '"https://x$request_uri"; }; '}],
                 limits={"header_size": "32k", "uri_size": "16k"})
    before = w.metrics().error("bad_header_value")
    r, _ = raw_answer(w, build_request("GET", "/r/" + "a" * 9000))
    assert r.status == 500
    assert w.metrics().error("bad_header_value") == before + 1
    r, _ = raw_answer(w, build_request("GET", "/r/" + "a" * 100))
    assert r.status == 302 and r.get("Location") == "https://x/r/" + "a" * 100


def weir_t(tmp_path, route_extra, upstream=None):
    text = render_config(str(tmp_path), free_port(), free_port(),
                         upstreams=[{"name": "a", "servers": ["127.0.0.1:9"]}],
                         routes=[{"path": "/", "upstream": "a"},
                                 {"path": "/x", "upstream": upstream, "extra": route_extra}])
    p = tmp_path / "weir.conf"
    p.write_text(text)
    r = subprocess.run([WEIR_BIN, "-t", "-c", str(p)], capture_output=True, timeout=slack(10))
    line = next(i for i, l in enumerate(text.splitlines(), 1) if '"/x"' in l)
    return r.returncode, r.stderr.decode(), "%s:%d: " % (p, line)


@pytest.mark.parametrize("extra,upstream,why", [
    ('return = { status = 301; }; ', None, "routes.return status 301 is a redirect: it needs a location"),
    ('return = { status = 200; location = "/y"; }; ', None, "routes.return.location needs a redirect status"),
    ('return = { status = 302; location = "/a\\r\\nSet-Cookie: x=1"; }; ', None, "must not hold CR or LF"),
    ('return = { status = 302; location = "/a\\x01"; }; ', None, "must not hold control bytes"),
    ('return = { status = 302; location = "/$nope"; }; ', None, "uses the unknown variable $nope"),
    ('return = { status = 200; body = "x"; content_type = "text/plain\\nX: y"; }; ', None,
     "routes.return.content_type"),
    ('return = { status = 204; body = "x"; }; ', None, "routes.return status 204 has no body"),
    ('return = { status = 99; }; ', None, "routes.return.status"),
    ('return = { status = 600; }; ', None, "routes.return.status"),
    ('return = { body = "x"; }; ', None, "routes.return.status is required"),
    ('return = { status = 200; colour = "red"; }; ', None, 'unknown key "colour" in routes.return'),
    ('return = { status = 200; }; ', "a", "routes.return and routes.upstream exclude each other"),
    ('log = true; ', None, "routes.upstream is required unless the route has a return"),
    ('return = 200; ', None, "routes.return must be a group"),
])
def test_bad_returns_are_refused_with_their_line(tmp_path, extra, upstream, why):
    rc, err, where = weir_t(tmp_path, extra, upstream)
    assert rc == 1, err
    assert where in err and why in err, err


def test_a_reload_changes_the_answer_and_a_route_can_become_proxied(weir_factory, origin):
    from test_reload import hup_and_wait
    w = ret_weir(weir_factory, origin, [{"path": "/v", "extra": 'return = { status = 200; body = "one"; }; '}])
    assert raw_answer(w, build_request("GET", "/v"))[0].body == b"one"
    text = open(w.conf).read()
    w.write_raw_config(text.replace('body = "one"', 'body = "two"'))
    hup_and_wait(w)
    wait_until(lambda: raw_answer(w, build_request("GET", "/v"))[0].body == b"two", slack(5), what="new body")
    w.write_raw_config(text.replace('path = "/v"; return = { status = 200; body = "one"; }; ',
                                    'path = "/v"; upstream = "a"; '))
    hup_and_wait(w)
    wait_until(lambda: raw_answer(w, build_request("GET", "/v"))[0].body == b"hello from origin\n", slack(5),
               what="proxied again")
