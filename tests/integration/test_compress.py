"""Response compression (compress = { ... }): gzip and brotli decoded here
and compared byte for byte with what the origin sent, for a small, a
1 MiB, a chunked stream and an until-close body; every skip reason with
its counter; Vary, ETag and Accept-Ranges; q-values; HTTP/1.0; busy and
no_memory; config errors with their lines; a slow client on a large
compressed response keeps the worker's memory flat."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import zlib

import pytest

from harness import WEIR_BIN, Client, build_request, proc_stat, proc_status, slack, wait_until

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "origin"))
from origin import random_body, text_body  # noqa: E402  the origin's own bytes

try:
    import brotli  # python3-brotli
except ImportError:  # pragma: no cover
    brotli = None

CURL = shutil.which("curl") or "/usr/bin/curl"
BROTLI_CLI = shutil.which("brotli")


def unbrotli(data):
    if brotli is not None:
        return brotli.decompress(data)
    if BROTLI_CLI:
        return subprocess.run([BROTLI_CLI, "-d", "-c"], input=data, capture_output=True, check=True,
                              timeout=slack(10)).stdout
    pytest.skip("neither python3-brotli nor the brotli command")


def gunzip(data):
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out = d.decompress(data) + d.flush()
    assert d.eof, "the gzip stream did not end"
    assert d.unused_data == b"", "bytes after the gzip stream"
    return out


def decode(r):
    ce = r.get("content-encoding")
    if ce == "gzip":
        return gunzip(r.body)
    if ce == "br":
        return unbrotli(r.body)
    assert ce is None, ce
    return r.body


def cz_weir(weir_factory, origin, block="compress = { };", route_extra="", **kw):
    return weir_factory(upstreams=[{"name": "a", "servers": [origin.addr]}],
                        routes=[{"path": "/", "upstream": "a", "extra": route_extra}], extra=block, **kw)


def fetch(w, target, ae="gzip", version="1.1", method="GET", headers=()):
    hs = list(headers)
    if ae is not None:
        hs.append(("Accept-Encoding", ae))
    with Client(w.port, timeout=slack(20)) as c:
        raw = build_request(method, target, headers=hs)
        if version == "1.0":
            raw = raw.replace(b" HTTP/1.1\r\n", b" HTTP/1.0\r\n", 1)
        c.send(raw)
        return c.read_response(method=method, timeout=20)


def counters(w):
    m = w.metrics()
    return {"gzip": m("weir_compress_responses_total", encoding="gzip"),
            "br": m("weir_compress_responses_total", encoding="br"),
            "in": m("weir_compress_bytes_in_total"), "out": m("weir_compress_bytes_out_total"),
            "skip": {r: m("weir_compress_skipped_total", reason=r)
                     for r in ("no_body", "encoded", "range", "no_transform", "type", "too_small",
                               "not_accepted", "busy", "no_memory")}}


@pytest.mark.parametrize("enc", ["gzip", "br"])
@pytest.mark.parametrize("n,mode", [(2000, "len"), (1 << 20, "len"), (300000, "chunked"), (200000, "close")])
def test_the_body_decodes_to_the_origins_bytes(weir_factory, origin, enc, n, mode):
    w = cz_weir(weir_factory, origin)
    before = counters(w)
    r = fetch(w, "/text/%d?mode=%s" % (n, mode), ae=enc)
    assert r.status == 200
    assert r.get("content-encoding") == enc
    assert r.get("content-length") is None and r.chunked
    assert r.get("vary") == "Accept-Encoding"
    assert r.get("accept-ranges") is None
    assert decode(r) == text_body(n)
    assert len(r.body) < n / 2  # it did compress
    after = counters(w)
    assert after[enc] - before[enc] == 1
    assert after["in"] - before["in"] == n
    assert after["out"] - before["out"] == len(r.body)


@pytest.mark.parametrize("enc", ["gzip", "br"])
@pytest.mark.parametrize("mode", ["len", "chunked", "close"])
def test_an_incompressible_body_overflows_the_buffer_and_still_decodes(weir_factory, origin, enc, mode):
    # what the encoder makes of a span is larger than the span: the rest
    # of the span waits for the buffer to be written (the pending path),
    # whatever the upstream's framing
    w = cz_weir(weir_factory, origin)
    n = 1 << 20
    r = fetch(w, "/text/%d?rand=1&mode=%s" % (n, mode), ae=enc)
    assert r.get("content-encoding") == enc
    assert decode(r) == random_body(n)
    assert len(r.body) >= n


@pytest.mark.parametrize("enc", ["gzip", "br"])
@pytest.mark.parametrize("mode,rand", [("len", 0), ("chunked", 0), ("close", 0), ("chunked", 1)])
def test_a_small_pipe_budget_cuts_the_spans_the_encoder_takes(weir_factory, origin, enc, mode, rand):
    # the upstream's codec hands the body up 1 KiB at a time (the pipe's
    # budget): each span is consumed as the encoder takes it, and the
    # body still decodes whole, its every byte counted in once
    w = cz_weir(weir_factory, origin, limits={"pipe_budget": "1k"}, workers=1)
    before, n = counters(w), 300000
    stalls = w.metrics().get("weir_pipe_budget_stalls_total", direction="client")
    r = fetch(w, "/text/%d?mode=%s%s" % (n, mode, "&rand=1" if rand else ""), ae=enc)
    assert r.status == 200 and r.get("content-encoding") == enc
    assert decode(r) == (random_body(n) if rand else text_body(n))
    assert counters(w)["in"] - before["in"] == n
    assert w.metrics().get("weir_pipe_budget_stalls_total", direction="client") - stalls >= n // 1024 // 2


@pytest.mark.normal_only
@pytest.mark.parametrize("enc", ["gzip", "br"])
def test_a_stream_is_flushed_as_the_upstream_sends_it(weir_factory, origin, enc):
    # 4 KiB chunks 700 ms apart: each must be decodable on arrival, not
    # held in the encoder until the end of the body; and the waits between
    # them cost the worker nothing (a flush with nothing new makes nothing)
    w = cz_weir(weir_factory, origin, workers=1)
    pid = w.worker_pids()[0]
    cpu0 = sum(int(x) for x in proc_stat(pid)[11:13])
    s = socket.create_connection(("127.0.0.1", w.port))
    s.settimeout(slack(5))
    t0 = time.monotonic()
    s.sendall(build_request("GET", "/text/16384?mode=chunked&ms=700", headers=[("Accept-Encoding", enc)]))
    raw, plain = b"", b""
    while len(plain) < 8192:  # two of the origin's chunks
        b = s.recv(65536)
        assert b, "closed before two chunks decoded"
        raw += b
        if b"\r\n\r\n" in raw:
            body = chunks_of(raw)
            plain = brotli_prefix(body) if enc == "br" else gunzip_prefix(body)
    took = time.monotonic() - t0
    s.close()
    # the second chunk left the origin at 0.7 s, the last at 2.1 s
    assert took < 1.9, took
    assert plain == text_body(16384)[:len(plain)]
    ticks = sum(int(x) for x in proc_stat(pid)[11:13]) - cpu0
    assert ticks < os.sysconf("SC_CLK_TCK") * 0.5, ticks  # under 0.5 s of CPU in about 1.4 s


def brotli_prefix(data):
    """What a brotli decoder makes of a stream cut after a flush."""
    if brotli is None:
        pytest.skip("no python3-brotli")
    return brotli.Decompressor().process(data)


def test_curl_compressed_decodes_it(weir_factory, origin):
    w = cz_weir(weir_factory, origin)
    out = subprocess.run([CURL, "-sS", "--compressed", "-D", "-", "http://127.0.0.1:%d/text/100000" % w.port],
                         capture_output=True, timeout=slack(10))
    head, _, body = out.stdout.partition(b"\r\n\r\n")
    assert b"\r\nContent-Encoding: " in head, head
    assert body == text_body(100000)


def test_q_values_choose_the_encoding(weir_factory, origin):
    w = cz_weir(weir_factory, origin)
    cases = [("gzip, br", "br"), ("gzip;q=1, br;q=0.5", "gzip"), ("br;q=0, gzip", "gzip"),
             ("*", "br"), ("*;q=0.3, br;q=0", "gzip"), ("x-gzip", "gzip"), ("BR;Q=0.8, GZIP;q=0.9", "gzip"),
             ("identity", None), ("gzip;q=0, br;q=0.000", None), ("deflate", None), ("", None),
             ("gzip;q=garbage", None)]
    for ae, want in cases:
        r = fetch(w, "/text/5000", ae=ae)
        assert r.get("content-encoding") == want, (ae, r)
        assert decode(r) == text_body(5000)


def test_each_skip_reason_is_counted_and_sent_as_it_came(weir_factory, origin):
    w = cz_weir(weir_factory, origin, block='compress = { min_length = 1000; types = [ "text/html", "text/*" ]; };')
    cases = [
        ("/text/5000?ce=gzip", "encoded"),
        ("/text/5000?range=1", "range"),
        ("/text/5000?cc=public,%20no-transform", "no_transform"),
        ("/text/5000?type=image/png", "type"),
        ("/text/999", "too_small"),
        ("/status/204", "no_body"),
        ("/304cl", "no_body"),
        ("/text/0", "no_body"),
    ]
    for target, reason in cases:
        before = counters(w)["skip"][reason]
        r = fetch(w, target, ae="gzip, br")
        assert r.get("content-encoding") in (None, "gzip" if reason == "encoded" else None), (target, r)
        if reason == "no_body":
            assert r.body == b"" and r.get("vary") is None, (target, r)
        if target == "/304cl":
            assert r.get("etag") == '"v1"' and r.get("content-length") == "100", r
        if reason not in ("no_body", "encoded"):
            assert r.body == text_body(int(target.split("/")[2].split("?")[0]))
            assert r.get("content-length") is not None
        wait_until(lambda: counters(w)["skip"][reason] - before == 1, slack(3), what=reason)
    # HEAD: no body to compress
    before = counters(w)["skip"]["no_body"]
    r = fetch(w, "/text/5000", ae="gzip", method="HEAD")
    assert r.get("content-encoding") is None and r.get("content-length") == "5000"
    wait_until(lambda: counters(w)["skip"]["no_body"] - before == 1, slack(3), what="HEAD")
    # a listed type with parameters, and type/* matches
    r = fetch(w, "/text/5000?type=text/plain;%20charset=utf-8", ae="gzip")
    assert r.get("content-encoding") == "gzip" and decode(r) == text_body(5000)


def test_a_client_that_accepts_nothing_gets_vary_but_the_plain_body(weir_factory, origin):
    w = cz_weir(weir_factory, origin)
    before = counters(w)["skip"]["not_accepted"]
    r = fetch(w, "/text/5000", ae=None)
    assert r.get("content-encoding") is None
    assert r.get("vary") == "Accept-Encoding"
    assert r.get("content-length") == "5000" and r.body == text_body(5000)
    wait_until(lambda: counters(w)["skip"]["not_accepted"] - before == 1, slack(3))
    # the upstream's own Vary that says it already is not repeated
    r = fetch(w, "/text/5000?vary=Accept-Encoding", ae="gzip")
    assert r.get_all("vary") == ["Accept-Encoding"]
    r = fetch(w, "/text/5000?vary=Cookie", ae="gzip")
    assert r.get_all("vary") == ["Cookie", "Accept-Encoding"]


def test_a_strong_etag_is_weakened_a_weak_one_kept(weir_factory, origin):
    w = cz_weir(weir_factory, origin)
    r = fetch(w, '/text/5000?etag="abc"', ae="gzip")
    assert r.get("etag") == 'W/"abc"'
    r = fetch(w, '/text/5000?etag=W/"abc"', ae="gzip")
    assert r.get("etag") == 'W/"abc"'
    r = fetch(w, '/text/5000?etag="abc"', ae=None)
    assert r.get("etag") == '"abc"'


def test_an_http10_client_gets_the_body_until_the_close(weir_factory, origin):
    w = cz_weir(weir_factory, origin)
    r = fetch(w, "/text/300000?mode=chunked", ae="gzip", version="1.0")
    assert r.get("content-encoding") == "gzip" and not r.chunked and r.get("content-length") is None
    assert "close" in r.connection_tokens()
    assert decode(r) == text_body(300000)


def test_keep_alive_carries_on_after_compressed_answers(weir_factory, origin):
    w = cz_weir(weir_factory, origin)
    with Client(w.port, timeout=slack(10)) as c:
        for n, ae in ((3000, "gzip"), (70000, "br"), (3000, None), (200000, "gzip")):
            c.send(build_request("GET", "/text/%d?mode=chunked" % n,
                                 headers=[("Accept-Encoding", ae)] if ae else []))
            r = c.read_response(timeout=10)
            assert decode(r) == text_body(n)


def test_a_route_block_over_the_top_level_and_off(weir_factory, origin):
    w = weir_factory(upstreams=[{"name": "a", "servers": [origin.addr]}],
                     routes=[{"path": "/off", "upstream": "a", "extra": "compress = { types = [ ]; }; "},
                             {"path": "/json", "upstream": "a",
                              "extra": 'compress = { types = [ "application/json" ]; min_length = 10; }; '},
                             {"path": "/", "upstream": "a"}],
                     extra='compress = { gzip_level = 9; };')
    assert fetch(w, "/text/5000").get("content-encoding") == "gzip"
    r = fetch(w, "/off/../text/5000")  # normalised to /text/5000: the top level's
    assert r.get("content-encoding") == "gzip"
    w2 = weir_factory(upstreams=[{"name": "a", "servers": [origin.addr]}],
                      routes=[{"path": "/text", "upstream": "a", "extra": "compress = { types = [ ]; }; "},
                              {"path": "/", "upstream": "a"}],
                      extra='compress = { };')
    r = fetch(w2, "/text/5000")
    assert r.get("content-encoding") is None and r.get("vary") is None and r.body == text_body(5000)
    r = fetch(w, "/echo")  # application/json, small: the /json route only
    assert r.get("content-encoding") is None
    r = fetch(w, "/json/../echo")
    assert r.get("content-encoding") is None


def test_a_reload_turns_it_on_and_its_levels_change(weir_factory, origin):
    w = cz_weir(weir_factory, origin, block="")
    assert fetch(w, "/text/50000").get("content-encoding") is None

    def hup(block):
        w.write_config(upstreams=[{"name": "a", "servers": [origin.addr]}],
                       routes=[{"path": "/", "upstream": "a"}], extra=block)
        before = w.metrics()("weir_reloads_total", result="ok")
        w.signal(signal.SIGHUP)
        wait_until(lambda: w.metrics()("weir_reloads_total", result="ok") > before, slack(5), what="reload")

    hup("compress = { gzip_level = 1; };")
    r1 = wait_until(lambda: (lambda r: r if r.get("content-encoding") == "gzip" else None)(fetch(w, "/text/50000")),
                    slack(5), what="gzip after the reload")
    assert decode(r1) == text_body(50000)
    hup("compress = { gzip_level = 9; };")
    r9 = wait_until(lambda: (lambda r: r if len(r.body) < len(r1.body) else None)(fetch(w, "/text/50000")),
                    slack(5), what="level 9 after the second reload")
    assert decode(r9) == text_body(50000)


def test_header_rules_run_first_and_compression_judges_their_head(weir_factory, origin):
    # the request rule drops Accept-Encoding upstream: the client's own is
    # what compression reads; the response rule's no-transform and type count
    w = weir_factory(upstreams=[{"name": "a", "servers": [origin.addr]}],
                     routes=[{"path": "/text/7000", "upstream": "a",
                              "extra": 'headers = { response = { set = { Cache-Control = "no-transform"; }; }; }; '},
                             {"path": "/text/8000", "upstream": "a",
                              "extra": 'headers = { response = { set = { Content-Type = "application/json"; }; }; }; '},
                             {"path": "/", "upstream": "a",
                              "extra": 'headers = { request = { remove = [ "Accept-Encoding" ]; }; }; '}],
                     extra="compress = { };")
    r = fetch(w, "/text/5000?type=image/png", ae="gzip")
    assert r.get("content-encoding") is None  # not listed
    r = fetch(w, "/text/5000", ae="gzip")
    assert r.get("content-encoding") == "gzip" and decode(r) == text_body(5000)
    assert not any(n.lower() == "accept-encoding" for n, v in origin.requests()[-1]["headers"])
    r = fetch(w, "/text/7000", ae="gzip")
    assert r.get("content-encoding") is None and r.get("cache-control") == "no-transform"
    r = fetch(w, "/text/8000?type=image/png", ae="gzip")
    assert r.get("content-encoding") == "gzip" and r.get("content-type") == "application/json"
    assert decode(r) == text_body(8000)


def test_without_a_block_nothing_is_compressed(weir_factory, origin):
    w = cz_weir(weir_factory, origin, block="")
    r = fetch(w, "/text/5000", ae="gzip, br")
    assert r.get("content-encoding") is None and r.get("vary") is None
    assert r.get("content-length") == "5000"


def test_past_max_streams_a_response_goes_uncompressed(weir_factory, origin):
    # the origin makes 4 MiB of text after the head, which takes seconds
    # on a busy machine: upstream_read outlasts it
    w = cz_weir(weir_factory, origin, block="compress = { max_streams = 1; };", workers=1,
                timeouts={"upstream_read": "20s"})
    before = counters(w)["skip"]["busy"]
    # the first stream stays under way: its client reads nothing
    slow = Client(w.port, timeout=slack(10), rcvbuf=4096)
    slow.send(build_request("GET", "/text/%d?mode=chunked&ms=20" % (4 << 20), headers=[("Accept-Encoding", "gzip")]))
    wait_until(lambda: w.metrics()("weir_compress_streams_active") == 1, slack(5), what="one stream")
    r = fetch(w, "/text/5000", ae="gzip")
    assert r.get("content-encoding") is None and r.body == text_body(5000)
    assert counters(w)["skip"]["busy"] - before == 1
    slow.close()
    wait_until(lambda: w.metrics()("weir_compress_streams_active") == 0, slack(10), what="stream ended")
    assert fetch(w, "/text/5000", ae="gzip").get("content-encoding") == "gzip"


def test_a_pool_too_small_for_brotli_falls_back_to_gzip_then_none(weir_factory, origin):
    # 1 MiB holds gzip's 300 KiB three times, brotli's quality 11 never
    w = cz_weir(weir_factory, origin, block='compress = { memory = "1m"; brotli_level = 11; };', workers=1)
    before = counters(w)["skip"]["no_memory"]
    r = fetch(w, "/text/5000", ae="br, gzip;q=0.5")
    assert r.get("content-encoding") == "gzip" and decode(r) == text_body(5000)
    r = fetch(w, "/text/5000", ae="br")
    assert r.get("content-encoding") is None and r.body == text_body(5000)
    assert counters(w)["skip"]["no_memory"] - before == 1


def test_a_short_body_reserves_a_smaller_gzip_encoder(weir_factory, origin):
    # 1 MiB of pool holds three encoders for bodies of unknown length
    # (262 KiB of zlib state each); a 5000-byte body needs 72 KiB, which
    # the rest still holds
    w = cz_weir(weir_factory, origin, block='compress = { memory = "1m"; };', workers=1,
                timeouts={"upstream_read": "20s"})
    held = []
    for i in range(3):
        c = Client(w.port, timeout=slack(10), rcvbuf=4096)
        c.send(build_request("GET", "/text/%d?mode=chunked&ms=20" % (4 << 20), headers=[("Accept-Encoding", "gzip")]))
        held.append(c)
        wait_until(lambda: w.metrics()("weir_compress_streams_active") == i + 1, slack(5), what="stream %d" % i)
    before = counters(w)["skip"]["no_memory"]
    r = fetch(w, "/text/300000?mode=chunked", ae="gzip")
    assert r.get("content-encoding") is None and r.body == text_body(300000)
    assert counters(w)["skip"]["no_memory"] - before == 1
    r = fetch(w, "/text/5000", ae="gzip")
    assert r.get("content-encoding") == "gzip" and decode(r) == text_body(5000)
    for c in held:
        c.close()
    wait_until(lambda: w.metrics()("weir_compress_memory_bytes_in_use") == 0, slack(10), what="pool empty")


@pytest.mark.parametrize("block,line,msg", [
    ('compress = { gzip_level = 10; };', 1, "gzip_level"),
    ('compress = { brotli_level = -1; };', 1, "brotli_level"),
    ('compress = { types = [ "text html" ]; };', 1, "media types"),
    ('compress = { types = "text/html"; };', 1, "list of strings"),
    ('compress = { min_length = "big"; };', 1, "min_length"),
    ('compress = { level = 3; };', 1, "level"),
    ('compress = { memory = "10k"; };', 1, "memory"),
])
def test_weir_t_refuses_bad_values_with_their_line(weir_factory, origin, block, line, msg):
    w = cz_weir(weir_factory, origin, block="\n" * 2 + block, start=False)
    out = subprocess.run([WEIR_BIN, "-t", "-c", w.conf], capture_output=True, timeout=slack(10))
    assert out.returncode != 0
    err = out.stderr.decode() + out.stdout.decode()
    assert msg in err, err
    lines = open(w.conf).read().split("\n")
    want = next(i for i, l in enumerate(lines, 1) if l.startswith("compress"))
    assert ":%d:" % want in err, err


def test_weir_t_refuses_a_bad_route_block_with_its_line(weir_factory, origin):
    w = cz_weir(weir_factory, origin, block="", route_extra='compress = { max_streams = 3; }; ', start=False)
    out = subprocess.run([WEIR_BIN, "-t", "-c", w.conf], capture_output=True, timeout=slack(10))
    err = out.stderr.decode() + out.stdout.decode()
    assert out.returncode != 0 and "max_streams" in err, err
    want = next(i for i, l in enumerate(open(w.conf).read().split("\n"), 1) if "max_streams" in l)
    assert ":%d:" % want in err, err


def rss_kb(pid):
    return proc_status(pid, "VmRSS")


def test_a_slow_client_keeps_the_worker_flat_on_a_large_compressed_response(weir_factory, origin):
    n = 64 << 20 if not os.environ.get("WEIR_QUICK") else 8 << 20
    w = cz_weir(weir_factory, origin, block="compress = { };", workers=1)
    pid = w.worker_pids()[0]
    fetch(w, "/text/5000", ae="gzip")  # the pool and buffers touched once
    base = rss_kb(pid)
    s = socket.create_connection(("127.0.0.1", w.port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8192)
    s.sendall(build_request("GET", "/text/%d?mode=chunked&rep=1" % n, headers=[("Accept-Encoding", "gzip")]))
    got, peak, deadline = bytearray(), base, time.monotonic() + slack(10)
    s.settimeout(5)
    while time.monotonic() < deadline:
        try:
            b = s.recv(4096)
        except socket.timeout:
            break
        if not b:
            break
        got += b
        time.sleep(0.002)  # a slow reader
        peak = max(peak, rss_kb(pid))
    s.close()
    # what the client took, decoded, is the start of the body (the
    # generator's 64 KiB over and over)
    piece, plain = text_body(65536), gunzip_prefix(chunks_of(bytes(got)))
    assert len(plain) > 1 << 20, len(plain)
    assert plain == (piece * (len(plain) // len(piece) + 1))[:len(plain)]
    print("slow client: %d compressed bytes read (%d decoded) of %d; worker RSS %d kB at the start, %d kB at "
          "most" % (len(got), len(plain), n, base, peak))
    assert peak - base < 4096, (base, peak)  # a few buffers, never the body


def chunks_of(raw):
    """The chunked body of the raw response <raw> (cut anywhere)."""
    body, rest = bytearray(), raw.split(b"\r\n\r\n", 1)[1]
    while rest:
        line, sep, tail = rest.partition(b"\r\n")
        if not sep:
            break
        size = int(line, 16)
        if size == 0 or len(tail) < size:
            body += tail[:size]
            break
        body += tail[:size]
        rest = tail[size + 2:]
    return bytes(body)


def gunzip_prefix(data):
    return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data)


@pytest.mark.parametrize("enc", ["gzip", "br"])
@pytest.mark.parametrize("mode", ["len", "chunked", "close"])
def test_an_http2_client_gets_the_body_compressed_without_a_length(weir_factory, origin, enc, mode):
    # the HTTP/2 codec reads back the head weir writes: no content-length
    # for an encoded body, and its DATA decode to the origin's bytes
    from h2util import H2Client
    w = cz_weir(weir_factory, origin)
    c = H2Client(w.port)
    n = 300000
    r = c.get("/text/%d?mode=%s" % (n, mode), headers=[("accept-encoding", enc)])
    c.close()
    hs = dict(r["headers"])
    assert r["ended"] and r["status"] == 200 and hs.get("content-encoding") == enc
    assert "content-length" not in hs and hs.get("vary") == "Accept-Encoding"
    assert (gunzip if enc == "gzip" else unbrotli)(r["body"]) == text_body(n)
