"""HTTP/2 towards clients (worker/h2/h2.h): h2c with prior knowledge and
ALPN h2 over TLS, with curl, nghttp and python3-h2; every stream through
the stream core (routing, logs, counters); bodies byte for byte both
ways; the translation to HTTP/1 upstreams (Host from :authority, cookie
crumbs, no connection-specific field either way, lower-case names)."""

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time

import h2.settings
import pytest

from harness import fetch_metrics, simple, slack, wait_until
from h2util import H2Client
from test_bodies import writes_during
from pki import make_ca, make_leaf, san
from test_tls import start_tls_weir, tls_listener

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "origin"))
from origin import random_body  # noqa: E402  the origin's own bytes

CURL = shutil.which("curl")
NGHTTP = shutil.which("nghttp")


def run(*args, data=None, timeout=20):
    return subprocess.run(list(args), input=data, capture_output=True, timeout=slack(timeout))


def test_curl_fetches_over_h2c_and_the_stream_goes_through_the_core(weir, origin):
    before = fetch_metrics(weir.stats_port)
    p = run(CURL, "-s", "--http2-prior-knowledge", "-w", "\n%{http_version}",
            "http://127.0.0.1:%d/echo" % weir.port)
    body, version = p.stdout.rsplit(b"\n", 1)
    assert version == b"2", p
    e = json.loads(body)
    hs = [(n.lower(), v) for n, v in e["headers"]]
    # :authority became Host; no HTTP/2 leftovers go upstream
    assert ("host", "127.0.0.1:%d" % weir.port) in hs
    assert e["version"] == "1.1"
    assert not any(n in ("http2-settings", "upgrade", "connection", "te") for n, _ in hs)
    line = wait_until(lambda: [l for l in weir.access_lines() if "/echo" in l], slack(3), what="log line")
    assert '"GET /echo HTTP/2.0" 200' in line[0]
    after = fetch_metrics(weir.stats_port)
    assert after("weir_h2_connections_total") == before("weir_h2_connections_total") + 1
    assert after("weir_h2_streams_total") == before("weir_h2_streams_total") + 1
    assert after("weir_h2_streams_active") == 0


def test_nghttp_multiplexes_streams_to_several_routes_on_one_connection(weir_factory, origin_factory):
    a, b = origin_factory("A"), origin_factory("B")
    w = weir_factory(upstreams=[{"name": "a", "servers": [a.addr]}, {"name": "b", "servers": [b.addr]}],
                     routes=[{"path": "/b/", "upstream": "b"}, {"path": "/chunked/", "upstream": "b"},
                             {"path": "/echo/b", "upstream": "b"},
                             {"path": "/", "upstream": "a"}])
    p = run(NGHTTP, "-n", "-s", *["http://127.0.0.1:%d%s" % (w.port, t)
                                  for t in ("/echo", "/b/echo", "/bytes/100000", "/b/chunked/70000",
                                            "/echo/x")])
    assert p.returncode == 0, p
    assert b"Some requests were not processed" not in p.stdout + p.stderr
    assert len(a.requests("/echo")) == 2 and len(a.requests("/bytes/")) == 1
    assert len(b.requests("/b/")) == 2
    m = fetch_metrics(w.stats_port)
    assert m("weir_h2_connections_total") == 1 and m("weir_h2_streams_total") == 5
    # and byte for byte, five at once from python3-h2
    c = H2Client(w.port)
    sids = [c.request(t) for t in ("/bytes/200000", "/chunked/150000", "/bytes/0", "/echo/b", "/echo")]
    rs = c.wait(sids, 10)
    assert [r["status"] for r in rs] == [200] * 5
    assert rs[0]["body"] == b"x" * 200000 and rs[1]["body"] == b"x" * 150000
    assert rs[2]["body"] == b"" and json.loads(rs[3]["body"])["origin"] == "B"
    assert json.loads(rs[4]["body"])["origin"] == "A"
    names = [n for n, _ in rs[1]["headers"]]
    assert names == [n.lower() for n in names]
    assert "transfer-encoding" not in names and "connection" not in names and "keep-alive" not in names
    assert ("x-origin", "B") in rs[1]["headers"]
    c.close()


def test_uploads_and_downloads_are_byte_for_byte(weir, tmp_path):
    data = os.urandom(3 * 1024 * 1024 + 17)
    f = tmp_path / "up.bin"
    f.write_bytes(data)
    sha = hashlib.sha256(data).hexdigest()
    url = "http://127.0.0.1:%d/upload" % weir.port
    # with a content-length, and without one (chunked towards the upstream)
    p = run(CURL, "-s", "--http2-prior-knowledge", "--data-binary", "@%s" % f, url)
    assert json.loads(p.stdout) == {"body_len": len(data), "body_sha256": sha}, p
    p = run(CURL, "-s", "--http2-prior-knowledge", "-T", "-", url, data=data)
    assert json.loads(p.stdout) == {"body_len": len(data), "body_sha256": sha}, p
    p = run(NGHTTP, "-d", str(f), url)
    assert json.loads(p.stdout) == {"body_len": len(data), "body_sha256": sha}, p
    p = run(CURL, "-s", "--http2-prior-knowledge", "http://127.0.0.1:%d/bytes/20000000" % weir.port)
    assert p.stdout == b"x" * 20000000
    p = run(CURL, "-s", "--http2-prior-knowledge", "http://127.0.0.1:%d/chunked/3000000" % weir.port)
    assert p.stdout == b"x" * 3000000
    # many small DATA frames from python3-h2
    c = H2Client(weir.port)
    sid = c.request("/upload", method="POST", body=None, end=False)
    for i in range(0, 200000, 100):
        while c.conn.local_flow_control_window(sid) < 100:
            c.read_some(0.2)
        c.conn.send_data(sid, data[i:i + 100])
        c.flush()
    c.conn.end_stream(sid)
    c.flush()
    r = c.wait([sid], 10)[0]
    assert json.loads(r["body"]) == {"body_len": 200000,
                                     "body_sha256": hashlib.sha256(data[:200000]).hexdigest()}
    c.close()


def test_cookie_crumbs_are_joined_and_names_reach_the_upstream_lower_case(weir):
    c = H2Client(weir.port)
    r = c.get("/echo", headers=[("cookie", "a=1"), ("x-one", "1"), ("cookie", "b=2"), ("cookie", "c=3")])
    e = json.loads(r["body"])
    cookies = [v for n, v in e["headers"] if n.lower() == "cookie"]
    assert cookies == ["a=1; b=2; c=3"]
    assert ("x-one", "1") in [tuple(h) for h in e["headers"]]
    c.close()


def test_host_and_authority_that_disagree_are_refused(weir, origin):
    c = H2Client(weir.port)
    before = fetch_metrics(weir.stats_port)
    r = c.get("/echo", authority="a.example", headers=[("host", "b.example")])
    assert r["status"] == 400
    r = c.get("/echo", authority="a.example", headers=[("host", "A.example")])
    assert r["status"] == 200
    r = c.get("/echo", authority=None, headers=[("host", "only.host")])
    assert r["status"] == 200 and ["Host", "only.host"] in json.loads(r["body"])["headers"]
    assert fetch_metrics(weir.stats_port).error("bad_request") == before.error("bad_request") + 1
    assert len(origin.requests("/echo")) == 2
    c.close()
    wait_until(lambda: any('"-" 400 ' in l for l in weir.access_lines()), slack(3), what="the 400's access line")
    assert "-> 400" in weir.read(weir.error_log)


@pytest.mark.parametrize("field", [("connection", "keep-alive"), ("transfer-encoding", "chunked"),
                                   ("upgrade", "h2c"), ("te", "gzip"), ("x-bad", "a\r\nb: c")])
def test_connection_specific_and_invalid_fields_reset_the_stream(weir, origin, field):
    c = H2Client(weir.port)
    before = fetch_metrics(weir.stats_port)
    r = c.get("/echo", headers=[field])
    assert r["reset"] == 1 and r["status"] is None  # PROTOCOL_ERROR
    assert c.get("/echo")["status"] == 200  # the connection goes on
    m = fetch_metrics(weir.stats_port)
    assert m("weir_h2_resets_total", direction="sent", code="PROTOCOL_ERROR") == \
        before("weir_h2_resets_total", direction="sent", code="PROTOCOL_ERROR") + 1
    assert len(origin.requests("/echo")) == 1
    c.close()


def test_weirs_own_answers_and_head_requests_are_framed_for_http2(weir):
    c = H2Client(weir.port)
    r = c.get("/status/503")
    assert r["status"] == 503 and r["body"] == b"status 503\n"
    r = c.get("/bytes/1234", method="HEAD")
    assert r["status"] == 200 and r["body"] == b"" and ("content-length", "1234") in r["headers"]
    r = c.get("/status/103")  # an interim answer is dropped, the final one passed
    assert r["status"] == 200 and r["body"] == b"final\n"
    r = c.get("/status/204")
    assert r["status"] == 204 and r["body"] == b""
    c.close()


def test_a_listener_with_h2c_off_reads_the_preface_as_a_bad_request(weir_factory, origin):
    w = weir_factory(start=False, upstreams=[{"name": "a", "servers": [origin.addr]}],
                     routes=[{"path": "/", "upstream": "a"}])
    text = open(w.conf).read().replace('address = "127.0.0.1:%d"; }' % w.port,
                                       'address = "127.0.0.1:%d"; h2c = false; }' % w.port)
    w.write_raw_config(text)
    w.start()
    p = run(CURL, "-s", "-o", "/dev/null", "-w", "%{http_code}", "--http2-prior-knowledge",
            "http://127.0.0.1:%d/echo" % w.port)
    assert p.stdout != b"200"
    assert fetch_metrics(w.stats_port)("weir_h2_connections_total") == 0
    p = run(CURL, "-s", "http://127.0.0.1:%d/echo" % w.port)
    assert json.loads(p.stdout)["version"] == "1.1"


@pytest.fixture
def certs(tmp_path):
    d = str(tmp_path / "pki")
    os.mkdir(d)
    c = {"dir": d, "ca": make_ca(d)}
    c["ec"] = make_leaf(d, "app.test", "/CN=app.test", [san("app.test")])
    return c


def test_tls_offers_h2_by_alpn_and_tls_alpn_turns_it_off(weir_factory, origin, certs, tmp_path):
    w = start_tls_weir(weir_factory, origin, [certs["ec"]])
    url = "https://app.test:%d/bytes/300000" % w.port
    resolve = "app.test:%d:127.0.0.1" % w.port
    p = run(CURL, "-s", "--http2", "--cacert", certs["ca"], "--resolve", resolve, "-w", "\n%{http_version}", url)
    body, version = p.stdout.rsplit(b"\n", 1)
    assert version == b"2" and body == b"x" * 300000, p.stderr
    # TLS seals each record from one span: DATA payload is copied first
    m = fetch_metrics(w.stats_port)
    assert m("weir_h2_data_bytes_total", how="in_place") == 0
    assert m("weir_h2_data_bytes_total", how="copied") >= 300000
    data = os.urandom(1000000)
    f = tmp_path / "up.bin"
    f.write_bytes(data)
    p = run(CURL, "-s", "--http2", "--cacert", certs["ca"], "--resolve", resolve, "--data-binary", "@%s" % f,
            "https://app.test:%d/upload" % w.port)
    assert json.loads(p.stdout)["body_sha256"] == hashlib.sha256(data).hexdigest()
    p = run(NGHTTP, "-n", "-s", "https://127.0.0.1:%d/echo" % w.port, "https://127.0.0.1:%d/bytes/10" % w.port)
    assert p.returncode == 0, p
    e = json.loads(run(CURL, "-s", "--http2", "--cacert", certs["ca"], "--resolve", resolve,
                       "https://app.test:%d/echo" % w.port).stdout)
    assert ["X-Forwarded-Proto", "https"] in e["headers"]
    w2 = start_tls_weir(weir_factory, origin, [certs["ec"]], tls_extra='alpn = "http/1.1";')
    p = run(CURL, "-s", "--http2", "--cacert", certs["ca"], "--resolve", "app.test:%d:127.0.0.1" % w2.port,
            "-o", "/dev/null", "-w", "%{http_version}", "https://app.test:%d/echo" % w2.port)
    assert p.stdout == b"1.1"


def test_weir_t_refuses_bad_http2_values_with_their_lines(weir_factory, origin, certs):
    w = weir_factory(start=False, upstreams=[{"name": "a", "servers": [origin.addr]}],
                     routes=[{"path": "/", "upstream": "a"}])
    text = open(w.conf).read()
    old = 'listeners = ( { address = "127.0.0.1:%d"; } );' % w.port
    text = text.replace(old, "listeners = ( %s, { address = \"127.0.0.1:%d\"; h2c = \"yes\"; } );"
                        % (tls_listener(w.port, [certs["ec"]], 'alpn = "h3,http/1.1";'), w.port + 1))
    text += "http2 = { max_concurrent_streams = 0; control_frames = 5; };\n"
    w.write_raw_config(text)
    p = subprocess.run([w_bin(), "-t", "-c", w.conf], capture_output=True, timeout=slack(10))
    err = p.stderr.decode()
    assert p.returncode != 0
    n = len(text.splitlines())
    assert "weir.conf:%d: http2.max_concurrent_streams must be from 1 to 1000" % n in err, err
    assert "http2.control_frames must be from 10" in err, err
    assert "listeners.tls.alpn" in err and "listeners.h2c must be true or false" in err, err


def w_bin():
    from harness import WEIR_BIN
    return WEIR_BIN


def test_streams_per_connection_is_a_histogram_of_closed_connections(weir):
    def bucket(le):
        return fetch_metrics(weir.stats_port)("weir_h2_streams_per_connection_bucket", le=le)

    m0 = fetch_metrics(weir.stats_port)
    before = {le: m0("weir_h2_streams_per_connection_bucket", le=le) for le in ("1", "2", "5", "50", "+Inf")}
    for n in (1, 3, 30):
        c = H2Client(weir.port)
        sids = [c.request("/echo") for _ in range(n)]
        assert all(r["status"] == 200 for r in c.wait(sids))
        c.close()
    wait_until(lambda: bucket("+Inf") == before["+Inf"] + 3, slack(5), what="three connections closed")
    m = fetch_metrics(weir.stats_port)
    got = {le: m("weir_h2_streams_per_connection_bucket", le=le) - before[le] for le in before}
    assert got == {"1": 1, "2": 1, "5": 2, "50": 3, "+Inf": 3}, got
    assert m("weir_h2_streams_per_connection_sum") - m0("weir_h2_streams_per_connection_sum") == 34
    assert m("weir_h2_streams_per_connection_count") - m0("weir_h2_streams_per_connection_count") == 3


def test_nghttp2_allocates_from_weirs_own_heap(weir):
    # sessions and streams come from the heap weir gives libnghttp2: what
    # it hands out rises with open connections and falls when they close
    def in_use():
        return fetch_metrics(weir.stats_port)("weir_h2_memory_bytes_in_use")

    base = in_use()
    cs = [H2Client(weir.port) for _ in range(20)]
    for c in cs:
        assert c.get("/echo")["status"] == 200
    # the gauge is published on the worker's tick
    wait_until(lambda: in_use() > base + 20 * 4096, slack(5), what="20 sessions in the heap")
    assert fetch_metrics(weir.stats_port)("weir_h2_memory_bytes_held") >= in_use()
    for c in cs:
        c.close()
    wait_until(lambda: in_use() <= base, slack(5), what="the sessions' memory handed back")


@pytest.mark.skipif(not shutil.which("strace") or not shutil.which("h2load"), reason="needs strace and h2load")
def test_long_answers_that_never_stall_make_no_epoll_ctl(weir_factory, origin):
    """A 64 KiB answer to a client with a wide window (h2load's 1 GiB):
    the upstream's reads pause while the stream's buffer is full and
    resume in the same loop pass once it is framed, and the upstream
    connection then goes back to its pool; a stop and a start of its
    watcher in one pass may not cost a system call (each did: an
    epoll_ctl ADD that failed with EEXIST, 22 for these 20 answers). The
    first request connects, before the measured ones."""
    w = simple(weir_factory, origin, workers=1)
    (worker,) = w.worker_pids()
    url = "http://127.0.0.1:%d/bytes/65536" % w.port
    h2load = ["h2load", "-c1", "-m1", "-t1"]
    assert "1 succeeded" in run(*h2load, "-n1", url).stdout.decode()

    p, calls = writes_during(worker, lambda: run(*h2load, "-n20", url), calls=("epoll_ctl",))
    out = p.stdout.decode()
    assert "20 succeeded" in out and "20 2xx" in out, out
    # the new client connection: added, a write-wait or two on it when
    # its socket fills, and its end (2 to 5 are seen; 22 before)
    assert calls <= 8, "%d epoll_ctl calls for 20 answers" % calls


def fetch_random_bodies(c, stats_port, n, k, wait):
    """<k> streams of /text/<n>?rand=1 on <c> after a wide connection
    window, <wait> seconds unread; checks every body byte for byte (a
    seeded random body shows a payload out of place, 'x's would not) and
    returns (bytes sent in place, bytes copied) from weir's counter."""
    c.conn.increment_flow_control_window(2 ** 30)
    c.flush()
    sids = [c.request("/text/%d?rand=1" % n) for _ in range(k)]
    time.sleep(wait)
    rs = c.wait(sids, 20)
    c.close()
    want = random_body(n)
    assert [r["status"] for r in rs] == [200] * k
    for r in rs:
        assert len(r["body"]) == n and r["body"] == want
    m = fetch_metrics(stats_port)
    in_place, copied = m("weir_h2_data_bytes_total", how="in_place"), m("weir_h2_data_bytes_total", how="copied")
    assert in_place + copied >= k * n
    return in_place, copied


def test_long_answers_to_a_client_that_keeps_up_are_sent_from_where_they_lie(weir):
    """h2c: a long DATA payload is not copied into the connection's write
    buffer but sent from the upstream's input in the same sendmsg as the
    frames around it, and arrives in order, on five streams at once."""
    c = H2Client(weir.port)
    in_place, copied = fetch_random_bodies(c, weir.stats_port, 300000, 5, 0)
    assert in_place >= 4 * 300000, (in_place, copied)


def test_a_client_that_stops_reading_gets_every_byte_in_order_once_it_reads(weir):
    """The payload a full socket did not take is copied into the write
    buffer before the upstream's input can move on: a client that opens
    wide windows and then does not read for a while makes weir's writes
    stop part way, and still gets the bodies whole and in order (more
    than the 4 MiB a loopback socket's send buffer grows to)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
    sock.settimeout(slack(5))
    sock.connect(("127.0.0.1", weir.port))
    c = H2Client(weir.port, sock=sock, settings={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 2 ** 31 - 1})
    in_place, copied = fetch_random_bodies(c, weir.stats_port, 4000000, 3, 0.5 * slack(1))
    assert copied > 0 and in_place > 0, (in_place, copied)
