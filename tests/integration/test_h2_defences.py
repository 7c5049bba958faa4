"""HTTP/2 defences (http2 = { ... }, worker/h2/h2.h), each from raw frames
with its counter: concurrent streams, Rapid Reset, CONTINUATION flood,
header lists past the HTTP/1 limits (and an HPACK bomb), frames that do
no work, the SETTINGS ACK, header and idle timeouts, a zero window, and
the graceful GOAWAY of a drain."""

import signal
import time

import pytest
from hyperframe import frame as hf

from harness import fetch_metrics, proc_status, slack, wait_until
from h2util import H2Client, RawH2, goaway_of, request_headers

ENHANCE_YOUR_CALM = 11


def h2_weir(weir_factory, origin, http2="", timeouts=None, workers=1):
    return weir_factory(upstreams=[{"name": "a", "servers": [origin.addr]}], routes=[{"path": "/", "upstream": "a"}],
                        workers=workers, timeouts=timeouts, extra="http2 = { %s };" % http2 if http2 else "")


def test_streams_past_max_concurrent_streams_are_refused(weir_factory, origin):
    w = h2_weir(weir_factory, origin, "max_concurrent_streams = 3;")
    r = RawH2(w.port)
    r.frames(0.3)  # our SETTINGS, acknowledged: past them is a connection error
    r.send(*[r.headers(2 * i + 1, request_headers("/echo/slow/300")) for i in range(4)])
    got = r.frames(2.5)
    g = [f for f in got if isinstance(f, hf.GoAwayFrame)]
    assert g and g[0].error_code == 1 and g[0].last_stream_id == 5, got
    m = fetch_metrics(w.stats_port)
    assert m("weir_h2_goaways_total", code="PROTOCOL_ERROR") == 1
    assert len(origin.requests("/echo/slow")) <= 3
    assert wait_until(lambda: fetch_metrics(w.stats_port)("weir_h2_streams_active") == 0, slack(3))
    r.close()


def test_rapid_reset_gets_goaway_and_almost_nothing_reaches_the_upstream(weir_factory, origin):
    w = h2_weir(weir_factory, origin, "max_resets = 50;")
    r = RawH2(w.port)
    frames = []
    for i in range(10000):
        sid = 2 * i + 1
        frames.append(r.headers(sid, request_headers("/echo")))
        frames.append(hf.RstStreamFrame(sid, error_code=8))  # CANCEL
    try:
        for k in range(0, len(frames), 200):
            r.send(*frames[k:k + 200])
    except OSError:
        pass  # weir closed after its GOAWAY
    got = r.frames(3)
    assert goaway_of(got) == ENHANCE_YOUR_CALM
    m = fetch_metrics(w.stats_port)
    assert m.error("h2_rapid_reset") == 1
    assert m("weir_h2_resets_total", direction="received", code="CANCEL") >= 50
    time.sleep(0.5)
    assert len(origin.requests("/echo")) < 100  # under 1% of 10,000
    assert m("weir_h2_streams_active") == 0
    r.close()


def test_a_continuation_flood_gets_goaway(weir_factory, origin):
    w = h2_weir(weir_factory, origin)
    r = RawH2(w.port)
    block = r.enc.encode(request_headers("/echo") + [("x-h%d" % i, "v" * 20) for i in range(60)])
    h = hf.HeadersFrame(1, data=block[:10], flags=["END_STREAM"])
    conts = [hf.ContinuationFrame(1, data=block[10 + i * 20:10 + (i + 1) * 20]) for i in range(40)]
    try:
        r.send(h, *conts)
    except OSError:
        pass
    assert goaway_of(r.frames(3)) == ENHANCE_YOUR_CALM
    assert fetch_metrics(w.stats_port).error("h2_continuation") == 1
    assert origin.requests("/echo") == []
    r.close()


def test_header_lists_past_the_http1_limits_are_answered_431(weir_factory, origin):
    w = h2_weir(weir_factory, origin)
    c = H2Client(w.port)
    before = fetch_metrics(w.stats_port).error("headers_too_large")
    r = c.get("/echo", headers=[("x-big-%d" % i, "v" * 2000) for i in range(10)])
    assert r["status"] == 431
    r = c.get("/echo", headers=[("x-n-%d" % i, "1") for i in range(120)])  # limits.headers = 100
    assert r["status"] == 431
    assert c.get("/echo")["status"] == 200
    assert fetch_metrics(w.stats_port).error("headers_too_large") == before + 2
    assert len(origin.requests("/echo")) == 1
    c.close()
    # each refusal has its access-log line and an error-log line
    wait_until(lambda: len(w.access_lines()) == 3, slack(3), what="three access lines")
    assert [l.split('"')[2].split()[0] for l in w.access_lines()] == ["431", "431", "200"], w.access_lines()
    assert w.read(w.error_log).count("request headers too large -> 431") == 2, w.read(w.error_log)


def test_an_hpack_bomb_is_bounded_by_the_header_list_limit(weir_factory, origin):
    w = h2_weir(weir_factory, origin)
    pid = w.worker_pids()[0]
    rss0 = proc_status(pid, "VmRSS")
    r = RawH2(w.port)
    # one 4 KiB entry into the dynamic table, then referenced 10,000 times
    first = r.enc.encode(request_headers("/echo") + [("x-bomb", "b" * 4000)])
    refs = bytes([0x80 | 62]) * 10000
    r.send(hf.HeadersFrame(1, data=first + refs, flags=["END_STREAM", "END_HEADERS"]))
    got = r.frames(2)
    heads = [f for f in got if isinstance(f, hf.HeadersFrame) and f.stream_id == 1]
    assert heads, got
    import hpack
    assert dict(hpack.Decoder().decode(heads[0].data))[":status"] == "431"
    rss1 = proc_status(pid, "VmRSS")
    assert rss1 - rss0 < 8192, (rss0, rss1)
    assert origin.requests("/echo") == []
    r.close()


@pytest.mark.parametrize("kind", ["ping", "settings", "empty_data", "priority"])
def test_floods_of_frames_that_do_no_work_get_goaway(weir_factory, origin, kind):
    w = h2_weir(weir_factory, origin, "control_frames = 200;")
    r = RawH2(w.port)
    if kind == "ping":
        flood = [hf.PingFrame(0, opaque_data=b"%08d" % i) for i in range(1000)]
    elif kind == "settings":
        flood = [hf.SettingsFrame(0, settings={hf.SettingsFrame.MAX_CONCURRENT_STREAMS: 100}) for _ in range(1000)]
    elif kind == "priority":
        flood = [hf.PriorityFrame(3 + 2 * i, depends_on=0, stream_weight=1) for i in range(1000)]
    else:
        flood = [r.headers(1, request_headers("/upload", method="POST"), end_stream=False)]
        flood += [hf.DataFrame(1, data=b"") for _ in range(1000)]
    try:
        for k in range(0, len(flood), 100):
            r.send(*flood[k:k + 100])
    except OSError:
        pass
    assert goaway_of(r.frames(3)) == ENHANCE_YOUR_CALM
    assert fetch_metrics(w.stats_port).error("h2_flood") == 1
    r.close()


def test_bytes_far_past_their_payload_get_goaway(weir_factory, origin):
    # frames no budget counts: 16 KiB frames of an extension type, which
    # nghttp2 skips unseen; 12 MiB for no payload is past 8 x the payload
    # + 1 MiB (nginx's rule). A real upload in 100-byte DATA frames
    # (test_h2.py) is 1.09 x its payload.
    w = h2_weir(weir_factory, origin)
    r = RawH2(w.port)
    r.frames(0.3)
    one = (16384).to_bytes(3, "big") + bytes([0x20, 0]) + (0).to_bytes(4, "big") + bytes(16384)
    try:
        for _ in range(768):
            r.sock.sendall(one)
    except OSError:
        pass
    assert goaway_of(r.frames(3)) == ENHANCE_YOUR_CALM
    assert fetch_metrics(w.stats_port).error("h2_overhead") == 1
    r.close()


def test_a_zero_increment_window_update_is_a_protocol_error(weir_factory, origin):
    w = h2_weir(weir_factory, origin)
    r = RawH2(w.port)
    r.send(hf.WindowUpdateFrame(0, window_increment=0))
    assert goaway_of(r.frames(3)) == 1  # PROTOCOL_ERROR
    assert fetch_metrics(w.stats_port)("weir_h2_goaways_total", code="PROTOCOL_ERROR") == 1
    r.close()


def answered(frames):
    """The streams of <frames> whose answer ended (END_STREAM on HEADERS or DATA)."""
    return sorted({f.stream_id for f in frames if isinstance(f, (hf.HeadersFrame, hf.DataFrame))
                   and "END_STREAM" in f.flags})


def test_a_stream_the_client_skipped_cannot_be_opened_after(weir_factory, origin):
    # RFC 9113 5.1.1: libnghttp2 alone ignores this HEADERS (h2spec 5.1.1/2)
    w = h2_weir(weir_factory, origin)
    r = RawH2(w.port)
    r.send(r.headers(1, request_headers("/echo/one")), r.headers(5, request_headers("/echo/five")))
    got = r.frames(1)
    assert answered(got) == [1, 5] and goaway_of(got) is None, got
    r.send(r.headers(3, request_headers("/echo/three")))
    got = r.frames(3)
    g = [f for f in got if isinstance(f, hf.GoAwayFrame)]
    assert g and g[0].error_code == 1 and g[0].last_stream_id == 5, got  # PROTOCOL_ERROR
    m = fetch_metrics(w.stats_port)
    assert m.error("h2_protocol") == 1
    assert m("weir_h2_goaways_total", code="PROTOCOL_ERROR") == 1
    # two streams at once, on two upstream connections: either may reach
    # the origin first
    assert sorted(e["target"] for e in origin.requests("/echo/")) == ["/echo/five", "/echo/one"]
    r.close()


def test_past_four_gaps_the_oldest_is_forgotten_and_its_headers_ignored(weir_factory, origin):
    # five gaps (3, 7, 11, 15, 19): stream 3's is no longer known, so its
    # HEADERS is ignored as libnghttp2 does, and the connection goes on
    w = h2_weir(weir_factory, origin)
    r = RawH2(w.port)
    r.send(*[r.headers(sid, request_headers("/echo/%d" % sid)) for sid in (1, 5, 9, 13, 17, 21)])
    assert answered(r.frames(1)) == [1, 5, 9, 13, 17, 21]
    r.send(r.headers(3, request_headers("/echo/3")), r.headers(23, request_headers("/echo/23")))
    got = r.frames(1)
    assert answered(got) == [23] and goaway_of(got) is None, got
    r.send(r.headers(7, request_headers("/echo/7")))  # a gap still known
    assert goaway_of(r.frames(3)) == 1
    assert fetch_metrics(w.stats_port).error("h2_protocol") == 1
    assert origin.requests("/echo/3") == [] and origin.requests("/echo/7") == []
    r.close()


def test_settings_never_acknowledged_time_out(weir_factory, origin):
    w = h2_weir(weir_factory, origin, 'settings_timeout = "300ms";')
    r = RawH2(w.port, ack=False)
    assert goaway_of(r.frames(3)) == 4  # SETTINGS_TIMEOUT
    assert fetch_metrics(w.stats_port).error("h2_settings_timeout") == 1
    r.close()


def test_a_header_block_left_unfinished_times_out(weir_factory, origin):
    w = h2_weir(weir_factory, origin, timeouts={"client_header": "500ms"})
    r = RawH2(w.port)
    r.frames(0.3)  # SETTINGS acknowledged before the block begins
    r.send(r.headers(1, request_headers("/echo"), end_headers=False))
    assert goaway_of(r.frames(3)) == 1
    assert fetch_metrics(w.stats_port).error("header_timeout") == 1
    r.close()


def test_an_idle_connection_gets_goaway_then_closes(weir_factory, origin):
    w = h2_weir(weir_factory, origin, timeouts={"client_keepalive": "500ms"})
    c = H2Client(w.port)
    assert c.get("/echo")["status"] == 200
    assert c.wait_goaway(3) == 0
    wait_until(lambda: c.closed or not c.read_some(0.2), slack(3), what="close")
    c.close()


def test_a_zero_window_client_stalls_the_stream_not_weirs_memory(weir_factory, origin):
    w = h2_weir(weir_factory, origin)
    pid = w.worker_pids()[0]
    c = H2Client(w.port, settings={1 << 2: 1024})  # INITIAL_WINDOW_SIZE
    c.read_some(0.3)
    rss0 = proc_status(pid, "VmRSS")
    sid = c.request("/bytes/100000000")
    time.sleep(slack(1.5))  # weir may send 1 KiB, then waits
    m = fetch_metrics(w.stats_port)
    assert m("weir_h2_stalls_total") >= 1
    assert m("weir_h2_streams_active") == 1
    rss1 = proc_status(pid, "VmRSS")
    assert rss1 - rss0 < 4096, (rss0, rss1)
    c.read_some(0.3)
    assert len(c.responses[sid]["body"]) <= 1024
    c.close()


def test_a_drain_sends_goaway_and_the_open_stream_finishes(weir_factory, origin):
    w = h2_weir(weir_factory, origin, workers=1)
    r = RawH2(w.port)
    r.frames(0.3)
    r.send(r.headers(1, request_headers("/echo/slow/1000")))
    time.sleep(0.3)
    w.signal(signal.SIGHUP)  # reload: the old worker drains
    got = r.frames(3)
    assert goaway_of(got) == 0  # NO_ERROR, graceful
    assert [f for f in got if isinstance(f, hf.GoAwayFrame)][0].last_stream_id == 1
    got += r.frames(3)  # the stream open before it still finishes
    ends = [f for f in got if isinstance(f, hf.DataFrame) and f.stream_id == 1 and "END_STREAM" in f.flags]
    assert ends, got
    assert b'"target": "/echo/slow/1000"' in b"".join(f.data for f in got if isinstance(f, hf.DataFrame))
    m = fetch_metrics(w.stats_port)
    assert m("weir_h2_goaways_total", code="NO_ERROR") >= 1
    r.close()
    # and a new connection is served by the new worker
    c2 = H2Client(w.port)
    assert c2.get("/echo")["status"] == 200
    c2.close()


def test_window_updates_a_waiting_stream_needs_are_not_taken_for_overhead(weir_factory, origin):
    # a stream window of 1 byte: each WINDOW_UPDATE of 1 lets one more
    # byte go, 100,000 of them (1.3 MB, no DATA or header payload) for a
    # download as slow as the client wants; with overhead_ratio 1 they
    # would be past 1 x the payload + 1 MiB had they not counted
    w = h2_weir(weir_factory, origin, "overhead_ratio = 1;", timeouts={"upstream_read": "60s"})
    r = RawH2(w.port)
    r.send(hf.SettingsFrame(0, settings={hf.SettingsFrame.INITIAL_WINDOW_SIZE: 1}),
           hf.WindowUpdateFrame(0, window_increment=1 << 30))
    r.frames(0.3)
    r.send(r.headers(1, request_headers("/bytes/1000000")))
    # the answer under way, its first byte sent: the stream waits for window
    first = r.frames(1.0)
    assert any(isinstance(f, hf.DataFrame) and f.stream_id == 1 for f in first), first
    one = hf.WindowUpdateFrame(1, window_increment=1).serialize()
    got = b""
    r.sock.settimeout(slack(5))
    for _ in range(20):
        r.sock.sendall(one * 5000)
        # what weir sent meanwhile: 1-byte DATA frames, read and dropped
        try:
            while True:
                r.sock.settimeout(0.05)
                data = r.sock.recv(1 << 20)
                if not data:
                    break
                got += data
        except OSError:
            pass
    assert fetch_metrics(w.stats_port).error("h2_overhead") == 0
    assert b"\x00\x00\x08\x07" not in got  # no GOAWAY frame header (8-byte payload, type 7)
    assert len(got) > 90000  # the bytes the updates let go (weir gathers them into fewer frames)
    r.close()
