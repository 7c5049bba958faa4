"""Access log formats and outputs (log.format, log.access = "syslog:...",
routes.log, routes.log_sample): nginx's combined line byte for byte against
nginx itself, JSON parsed by python's json field by field with hostile
bytes in the path and headers, a custom format of variables, syslog
datagrams to a unix socket the test binds (and dropped ones counted),
sampling within bounds, and config errors with their lines."""

import json
import os
import re
import shutil
import socket
import subprocess
import time

import pytest

from harness import (Client, WEIR_BIN, build_request, can_connect, free_port, kill_and_reap, render_config,
                     simple, slack, wait_until)
from test_reload import NginxOrigin

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
TIME_LOCAL = re.compile(r"\[\d\d/[A-Z][a-z]{2}/\d{4}:\d\d:\d\d:\d\d [+-]\d{4}\]")


def lines(w, n):
    return wait_until(lambda: (lambda l: l if len(l) >= n else None)(w.access_lines()), slack(3),
                      what="%d access lines" % n)


def raw_lines(path, n):
    def get():
        try:
            data = open(path, "rb").read()
        except FileNotFoundError:
            return None
        ls = data.split(b"\n")[:-1]
        return ls if len(ls) >= n else None
    return wait_until(get, slack(3), what="%d lines in %s" % (n, path))


def send_raw(port, raw):
    with Client(port) as c:
        c.send(raw)
        return c.read_response(method=raw.split(b" ", 1)[0].decode())


# requests with hostile bytes where a client controls them: quotes,
# backslashes, obs-text, a tab, valid UTF-8
HOSTILE = [
    build_request("GET", "/bytes/17?q=a%22b&x=1",
                  headers=[("User-Agent", 'evil "agent" \\ back'), ("Referer", "http://r.example/\"x\"")]),
    build_request("GET", "/bytes/5", headers=[("User-Agent", "tab\there \xff\xfe obs"), ("Referer", "caf\xc3\xa9")]),
    build_request("HEAD", "/bytes/9", headers=[("User-Agent", "curl/8")]),
    build_request("GET", "/bytes/3"),
]


class NginxProxy(NginxOrigin):
    """nginx proxying to <origin_addr>, with its combined access log."""
    ACCESS_LOG = "%(d)s/access.log combined"
    LOCATION = "proxy_pass http://%(origin)s; proxy_http_version 1.1;"

    def __init__(self, tmpdir, origin_addr):
        super().__init__(tmpdir)
        self.origin = origin_addr
        self.log = os.path.join(self.dir, "access.log")


@pytest.mark.skipif(not os.path.exists(NGINX), reason="nginx is not installed")
def test_combined_is_nginx_s_line_byte_for_byte(weir_factory, origin, tmp_path):
    # one worker: lines in the order of the requests, as nginx's
    w = simple(weir_factory, origin, workers=1, log_extra='format = "combined"; ')
    n = NginxProxy(tmp_path, origin.addr).start()
    try:
        for raw in HOSTILE:
            a = send_raw(w.port, raw)
            b = send_raw(n.port, raw)
            assert a.status == b.status == 200
        ours = raw_lines(w.access_log, len(HOSTILE))
        theirs = raw_lines(n.log, len(HOSTILE))
    finally:
        kill_and_reap(n.proc)
    for a, b in zip(ours, theirs):
        a, b = a.decode("latin-1"), b.decode("latin-1")
        assert TIME_LOCAL.search(a), a
        assert TIME_LOCAL.sub("[T]", a) == TIME_LOCAL.sub("[T]", b)
    assert len(ours) == len(HOSTILE)


def test_combined_line_of_a_request_answered_by_weir(weir_factory, origin):
    w = simple(weir_factory, origin, log_extra='format = "combined"; ')
    with Client(w.port) as c:
        c.send(b"GET /x HTTP/1.1\r\nHost: nope.example\r\nHost: twice\r\n\r\n")
        assert c.read_response().status == 400
    line = lines(w, 1)[0]
    # as nginx: the request line of a request refused after it was parsed
    assert TIME_LOCAL.sub("[T]", line) == '127.0.0.1 - - [T] "GET /x HTTP/1.1" 400 0 "-" "-"', line


JSON_FMT = 'format = "json"; '


def test_json_lines_parse_and_carry_every_field(weir_factory, origin):
    w = simple(weir_factory, origin, workers=1, log_extra=JSON_FMT, extra="request_id = true;")
    for raw in HOSTILE:
        assert send_raw(w.port, raw).status == 200
    got = [json.loads(l) for l in raw_lines(w.access_log, len(HOSTILE))]
    a, b, c, d = got
    assert set(a) == {"time", "client_ip", "peer_addr", "method", "host", "uri", "protocol", "status",
                      "bytes_sent", "request_time", "upstream_addr", "upstream_response_time", "request_id",
                      "route", "referer", "user_agent", "tls_sni"}
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$", a["time"])
    assert a["client_ip"] == a["peer_addr"] == "127.0.0.1"
    assert a["method"] == "GET" and a["uri"] == "/bytes/17?q=a%22b&x=1" and a["protocol"] == "HTTP/1.1"
    assert a["host"] == "localhost" and a["route"] == "*/"
    assert a["status"] == 200 and isinstance(a["bytes_sent"], int) and a["bytes_sent"] > 17
    assert isinstance(a["request_time"], float)
    assert a["upstream_addr"] == origin.addr and float(a["upstream_response_time"]) >= 0
    assert re.match(r"^[0-9a-f]{32}$", a["request_id"])
    assert a["user_agent"] == 'evil "agent" \\ back'
    assert a["referer"] == 'http://r.example/"x"'
    # a tab and bytes of no UTF-8 sequence as \u00XX, valid UTF-8 as it came
    assert b["user_agent"] == "tab\there \u00ff\u00fe obs"
    assert b["referer"] == "caf\u00e9"
    raw_b = raw_lines(w.access_log, 2)[1]
    assert b"\\u0009" in raw_b and b"\\u00ff\\u00fe" in raw_b and b"caf\xc3\xa9" in raw_b
    assert c["method"] == "HEAD" and c["status"] == 200
    assert d["user_agent"] == "" and d["referer"] == "" and d["tls_sni"] == ""


def test_json_line_of_a_request_without_a_route_or_upstream(weir_factory, origin):
    w = weir_factory(upstreams=[{"name": "a", "servers": [origin.addr]}],
                     routes=[{"host": "only.example", "path": "/", "upstream": "a"}], log_extra=JSON_FMT)
    with Client(w.port) as c:
        r = c.request("GET", "/nothing\x7f".replace("\x7f", "%7F"), host="other.example")
        assert r.status == 404
    j = json.loads(lines(w, 1)[0])
    assert j["status"] == 404 and j["route"] == "" and j["upstream_addr"] == ""
    assert j["upstream_response_time"] == "" and j["host"] == "other.example"


def test_a_control_byte_cannot_break_a_json_line(weir_factory, origin):
    w = simple(weir_factory, origin, log_extra=JSON_FMT)
    # the longest values weir takes: each is cut, the line stays one object
    ua = '"\\' * 3000
    r = send_raw(w.port, build_request("GET", "/bytes/1?" + "a" * 6000, headers=[("User-Agent", ua)]))
    assert r.status == 200
    j = json.loads(raw_lines(w.access_log, 1)[0])
    assert j["user_agent"].startswith('"\\"\\') and len(j["user_agent"]) <= 2048
    assert j["uri"].startswith("/bytes/1?aaa")


def test_a_custom_format_expands_variables(weir_factory, origin):
    fmt = ('format = "$client_ip|$method|$path|$query_string|$arg_q|$arg_none|$cookie_sid|$http_x_test|'
           '$status|$upstream_addr|$scheme|$server_protocol|$$|${status}x"; ')
    w = simple(weir_factory, origin, log_extra=fmt)
    r = send_raw(w.port, build_request("GET", "/bytes/2?z=1&q=v%20w", headers=[
        ("Cookie", "a=1; sid=s3cr3t; b=2"), ("X-Test", 'q"x')]))
    assert r.status == 200
    assert lines(w, 1)[0] == ('127.0.0.1|GET|/bytes/2|z=1&q=v%%20w|v%%20w|-|s3cr3t|q\\x22x|200|%s|http|HTTP/1.1|$|200x'
                              % origin.addr)


def test_the_default_format_is_unchanged(weir_factory, origin):
    w = simple(weir_factory, origin)
    assert send_raw(w.port, build_request("GET", "/bytes/4")).status == 200
    line = lines(w, 1)[0]
    assert re.match(r'^127\.0\.0\.1 \[\d{4}-\d\d-\d\dT[\d:.]+Z\] "GET /bytes/4 HTTP/1\.1" 200 \d+ \d+\.\d{3} '
                    r'%s \d+\.\d{3}$' % re.escape(origin.addr), line), line


def syslog_weir(weir_factory, origin, sock_path, **kw):
    w = simple(weir_factory, origin, start=False, **kw)
    text = open(w.conf).read()
    text = re.sub(r'access = "[^"]*";', 'access = "syslog:%s";' % sock_path, text, count=1)
    w.write_raw_config(text)
    w.start()
    return w


def test_syslog_gets_one_datagram_per_line_and_a_full_socket_drops_and_counts(weir_factory, origin, tmp_path):
    path = str(tmp_path / "log.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(path)
    s.settimeout(slack(3))
    try:
        w = syslog_weir(weir_factory, origin, path, workers=1, log_extra='format = "$request_uri $status"; ')
        assert send_raw(w.port, build_request("GET", "/bytes/1?one")).status == 200
        d = s.recv(65536)
        assert re.match(rb"^<190>[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d weir\[\d+\]: /bytes/1\?one 200$", d), d
        assert w.metrics().error("syslog_dropped") == 0
        # nobody reads: the socket's queue fills (a unix datagram socket
        # takes about ten), what does not fit is dropped, never waited for
        with Client(w.port) as c:
            for i in range(60):
                assert c.request("GET", "/bytes/1?n=%d" % i).status == 200
        wait_until(lambda: w.metrics().error("syslog_dropped") > 0, slack(3), what="syslog drops")
        got = 0
        s.settimeout(0.2)
        try:
            while True:
                s.recv(65536)
                got += 1
        except socket.timeout:
            pass
        assert got + w.metrics().error("syslog_dropped") == 60, got
        # the reader goes away: every datagram is counted as dropped
        s.close()
        os.unlink(path)
        before = w.metrics().error("syslog_dropped")
        assert send_raw(w.port, build_request("GET", "/bytes/1")).status == 200
        wait_until(lambda: w.metrics().error("syslog_dropped") == before + 1, slack(3), what="drop")
        # and comes back: found again by its path
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        s.bind(path)
        s.settimeout(slack(3))
        assert send_raw(w.port, build_request("GET", "/bytes/1?back")).status == 200
        assert s.recv(65536).endswith(b": /bytes/1?back 200")
    finally:
        s.close()


def test_log_false_and_log_sample_bound_the_lines(weir_factory, origin):
    w = weir_factory(upstreams=[{"name": "a", "servers": [origin.addr]}],
                     routes=[{"path": "/quiet", "upstream": "a", "extra": "log = false; "},
                             {"path": "/some", "upstream": "a", "extra": 'log_sample = "0.1"; '},
                             {"path": "/", "upstream": "a"}],
                     log_extra='format = "$path"; ')
    with Client(w.port) as c:
        for i in range(400):
            assert c.request("GET", "/some/%d" % i).status == 200
        for i in range(50):
            assert c.request("GET", "/quiet/%d" % i).status == 200
        assert c.request("GET", "/last").status == 200
    ls = wait_until(lambda: (lambda l: l if l and l[-1] == "/last" else None)(w.access_lines()), slack(3))
    some = [l for l in ls if l.startswith("/some/")]
    assert not [l for l in ls if l.startswith("/quiet")]
    # binomial(400, 0.1): mean 40, sd 6; these bounds fail once in ~10^6 runs
    assert 12 <= len(some) <= 75, len(some)
    assert len(ls) == len(some) + 1


def weir_t(tmp_path, **kw):
    text = render_config(str(tmp_path), free_port(), free_port(),
                         upstreams=[{"name": "a", "servers": ["127.0.0.1:9"]}],
                         **dict({"routes": [{"path": "/", "upstream": "a"}]}, **kw))
    p = tmp_path / "weir.conf"
    p.write_text(text)
    r = subprocess.run([WEIR_BIN, "-t", "-c", str(p)], capture_output=True, timeout=slack(10))
    return r.returncode, r.stderr.decode(), str(p), text


@pytest.mark.parametrize("kw,needle,why", [
    ({"log_extra": 'format = "$client_ip $nosuch"; '}, "format", 'uses the unknown variable $nosuch'),
    ({"log_extra": 'format = "plain words"; '}, "format", 'must be "weir", "combined", "json" or a format'),
    ({"log_extra": 'format = "${status"; '}, "format", 'has a "${" without'),
    ({"log_extra": 'format = "100$"; '}, "format", "without a variable name"),
    ({"routes": [{"path": "/", "upstream": "a", "extra": 'log_sample = "2"; '}]}, "log_sample",
     "routes.log_sample"),
    ({"routes": [{"path": "/", "upstream": "a", "extra": 'log_sample = "0.12345"; '}]}, "log_sample",
     "at most 4 decimals"),
    ({"routes": [{"path": "/", "upstream": "a", "extra": "log = 1; "}]}, "log = 1", "routes.log must be true or false"),
    ({"log_extra": 'access_flush = "2m"; '}, "access_flush", "log.access_flush must be from 1ms to 1m (got 2m)"),
])
def test_bad_log_settings_are_refused_with_their_line(tmp_path, kw, needle, why):
    rc, err, p, text = weir_t(tmp_path, **kw)
    line = next(i for i, l in enumerate(text.splitlines(), 1) if needle in l)
    assert rc == 1, err
    assert "%s:%d: " % (p, line) in err and why in err, err


def test_a_relative_syslog_path_is_refused(tmp_path):
    text = render_config(str(tmp_path), free_port(), free_port(),
                         upstreams=[{"name": "a", "servers": ["127.0.0.1:9"]}],
                         routes=[{"path": "/", "upstream": "a"}])
    text = re.sub(r'access = "[^"]*";', 'access = "syslog:dev/log";', text, count=1)
    p = tmp_path / "weir.conf"
    p.write_text(text)
    r = subprocess.run([WEIR_BIN, "-t", "-c", str(p)], capture_output=True, timeout=slack(10))
    assert r.returncode == 1
    assert "%s:2: log.access must name a unix socket" % p in r.stderr.decode(), r.stderr


def test_the_consumer_of_a_route_with_auth_is_a_variable(weir_factory, origin, tmp_path):
    import hashlib
    keys = tmp_path / "keys"
    keys.write_text("alice %s\n" % hashlib.sha256(b"k-alice-0123456789").hexdigest())
    w = weir_factory(upstreams=[{"name": "a", "servers": [origin.addr]}], workers=1,
                     routes=[{"path": "/", "upstream": "a",
                              "extra": 'auth = { type = "api_key"; keys_file = "%s"; }; ' % keys}],
                     log_extra='format = "$status $consumer $remote_user"; ')
    with Client(w.port) as c:
        assert c.request("GET", "/bytes/1", headers=[("X-Api-Key", "k-alice-0123456789")]).status == 200
        assert c.request("GET", "/bytes/1").status == 401
    assert lines(w, 2) == ["200 alice alice", "401 - -"]


def test_access_flush_off_writes_each_line_as_its_answer_leaves(weir_factory, origin):
    """log.access_flush = "off": the line is written at the end of the loop
    pass that answered, so it is in the file as the client reads the
    answer. At the default's one write a second, six lines each within
    0.3 s of their answer would come by chance once in a thousand runs."""
    w = simple(weir_factory, origin, workers=1, log_extra='access_flush = "off"; ')
    with Client(w.port) as c:
        for i in range(6):
            assert c.request("GET", "/bytes/%d" % (i + 1)).status == 200
            wait_until(lambda: len(w.access_lines()) == i + 1, slack(0.3), interval=0.01,
                       what="line %d as its answer is read" % (i + 1))
            time.sleep(0.15)  # spread the requests over the default's second
    assert ["/bytes/%d" % (i + 1) in l for i, l in enumerate(w.access_lines())] == [True] * 6


def test_access_flush_holds_lines_until_its_time(weir_factory, origin):
    """log.access_flush = "3s": a line waits in the worker's buffer up to
    3 s, where the default writes it within a second."""
    w = simple(weir_factory, origin, workers=1, log_extra='access_flush = "3s"; ')
    with Client(w.port) as c:
        assert c.request("GET", "/bytes/3").status == 200
    t0 = time.monotonic()
    time.sleep(1.6)
    assert w.access_lines() == []
    line = lines(w, 1)[0]
    assert "/bytes/3" in line and time.monotonic() - t0 < 3 + slack(2), line
