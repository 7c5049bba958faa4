"""WebSocket over HTTP/2 (RFC 8441 extended CONNECT, worker/h2/h2_ws.c).

A raw python3-h2 client sends an extended CONNECT through weir, which
makes it an HTTP/1.1 Upgrade with a key of its own, to a real WebSocket
server (tests/origin/ws_origin.py, python3-websockets) for the protocol,
and to raw socket origins for what a library would not answer: a wrong or
missing Sec-WebSocket-Accept, a 403, a close right after the switch, and
to watch the upstream socket's end.
"""

import base64
import hashlib
import json
import os
import signal
import socket
import threading
import time

import h2.settings
from hyperframe import frame as hf

from harness import fetch_metrics, pid_alive, proc_status, slack, wait_until
from h2util import H2Client
from test_websocket import RawOrigin, ws_origin  # noqa: F401 (a fixture)

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
ENABLE_CONNECT_PROTOCOL = h2.settings.SettingCodes.ENABLE_CONNECT_PROTOCOL


def accept_of(key):
    return base64.b64encode(hashlib.sha1(key.encode() + GUID).digest()).decode()


def ws_frame(opcode, payload):
    """A client frame: FIN, masked (RFC 6455 5.3)."""
    n = len(payload)
    head = bytes([0x80 | opcode])
    if n < 126:
        head += bytes([0x80 | n])
    elif n < 65536:
        head += bytes([0x80 | 126]) + n.to_bytes(2, "big")
    else:
        head += bytes([0x80 | 127]) + n.to_bytes(8, "big")
    mask = os.urandom(4)
    if not n:
        return head + mask
    m = (mask * (n // 4 + 1))[:n]
    return head + mask + (int.from_bytes(payload, "big") ^ int.from_bytes(m, "big")).to_bytes(n, "big")


def ws_parse(buf):
    """Server frames (unmasked) at the front of <buf>: ([(opcode, payload)], rest)."""
    out = []
    while len(buf) >= 2:
        op, n, off = buf[0] & 0x0F, buf[1] & 0x7F, 2
        if n == 126:
            if len(buf) < 4:
                break
            n, off = int.from_bytes(buf[2:4], "big"), 4
        elif n == 127:
            if len(buf) < 10:
                break
            n, off = int.from_bytes(buf[2:10], "big"), 10
        if len(buf) < off + n:
            break
        out.append((op, buf[off:off + n]))
        buf = buf[off + n:]
    return out, buf


def ws_headers(path, protocol="websocket", version="13", extra=()):
    hs = [(":method", "CONNECT"), (":protocol", protocol), (":scheme", "http"), (":path", path),
          (":authority", "localhost")]
    if version is not None:
        hs.append(("sec-websocket-version", version))
    return hs + list(extra)


def open_ws(c, path, **kw):
    """Sends the extended CONNECT; returns the stream id (not ended)."""
    sid = c.conn.get_next_available_stream_id()
    c.conn.send_headers(sid, ws_headers(path, **kw), end_stream=False)
    c.responses[sid] = {"status": None, "headers": [], "body": b"", "ended": False, "reset": None}
    c.flush()
    return sid


def wait_status(c, sid, timeout=5.0):
    r = c.responses[sid]
    deadline = time.monotonic() + slack(timeout)
    while r["status"] is None and r["reset"] is None and time.monotonic() < deadline:
        if not c.read_some(0.2):
            break
    return r


def read_messages(c, sid, count, timeout=10.0):
    """Reads the stream's DATA until <count> WebSocket frames arrived."""
    r = c.responses[sid]
    deadline = time.monotonic() + slack(timeout)
    while time.monotonic() < deadline:
        frames, _ = ws_parse(r["body"])
        if len(frames) >= count or r["ended"] or r["reset"] is not None:
            return frames
        if not c.read_some(0.2):
            break
    return ws_parse(r["body"])[0]


def wsweir(weir_factory, addr, extra="", timeouts=None):
    return weir_factory(upstreams=[{"name": "ws", "servers": [addr]}], routes=[{"path": "/", "upstream": "ws"}],
                        workers=1, extra=extra, timeouts=timeouts)


class RawWsOrigin(RawOrigin):
    """<answer>(key) gives the bytes answered to the upgrade request (None:
    the right 101), then <after>(sock) runs; keeps what arrives after, and
    sets .eof once the connection saw weir's end."""

    def __init__(self, answer=None, after=None):
        self.answer, self.after = answer, after
        self.got, self.eof = [], threading.Event()
        super().__init__(self.switch)

    def switch(self, s, head, rest):
        try:
            key = next(l.split(":", 1)[1].strip() for l in head.split("\r\n")
                       if l.lower().startswith("sec-websocket-key:"))
            ans = self.answer(key) if self.answer else None
            if ans is None:
                ans = ("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                       "Sec-WebSocket-Accept: %s\r\nSec-WebSocket-Protocol: chat\r\n\r\n" % accept_of(key)).encode()
            s.sendall(ans)
            if self.after:
                self.after(s)
            s.settimeout(slack(10))
            while True:
                got = s.recv(65536)
                if not got:
                    return b""
                self.got.append(got)
        finally:
            self.eof.set()


def test_settings_carry_enable_connect_protocol_and_the_key_turns_it_off(weir_factory, origin):
    w = weir_factory(upstreams=[{"name": "a", "servers": [origin.addr]}], routes=[{"path": "/", "upstream": "a"}])
    c = H2Client(w.port)
    c.read_some(1)
    assert c.conn.remote_settings.get(ENABLE_CONNECT_PROTOCOL) == 1
    c.close()
    off = weir_factory(upstreams=[{"name": "a", "servers": [origin.addr]}], routes=[{"path": "/", "upstream": "a"}],
                       extra="http2 = { websocket = false; };")
    before = fetch_metrics(off.stats_port)
    c = H2Client(off.port)
    c.read_some(1)
    assert c.conn.remote_settings.get(ENABLE_CONNECT_PROTOCOL, 0) == 0
    # without the setting, :protocol is malformed (RFC 8441 3): reset
    sid = open_ws(c, "/echo")
    r = c.wait([sid])[0]
    assert r["reset"] == 1 and r["status"] is None  # PROTOCOL_ERROR
    c.close()
    after = fetch_metrics(off.stats_port)
    sent = dict(direction="sent", code="PROTOCOL_ERROR")
    assert after("weir_h2_resets_total", **sent) == before("weir_h2_resets_total", **sent) + 1
    assert not origin.requests()


def test_text_and_a_1_mib_binary_message_echo_byte_for_byte(weir_factory, ws_origin):
    o = ws_origin
    w = wsweir(weir_factory, o.addr)
    c = H2Client(w.port)
    sid = open_ws(c, "/echo")
    r = wait_status(c, sid)
    assert r["status"] == 200, r
    names = [n for n, _ in r["headers"]]
    assert "sec-websocket-accept" not in names and "upgrade" not in names and "connection" not in names
    m = fetch_metrics(w.stats_port)
    assert m("weir_h2_websocket_opened_total") == 1 and m("weir_h2_websocket_active") == 1
    c.send_body(sid, ws_frame(1, b"hello over h2"), end=False)
    assert read_messages(c, sid, 1) == [(1, b"hello over h2")]
    blob = os.urandom(1 << 20)
    c.send_body(sid, ws_frame(2, blob), end=False)
    frames = read_messages(c, sid, 2, 20)
    assert len(frames) == 2 and frames[1][0] == 2 and frames[1][1] == blob
    # the close handshake: the server answers and closes, the stream ends
    c.send_body(sid, ws_frame(8, b"\x03\xe8bye"), end=False)
    frames = read_messages(c, sid, 3)
    assert frames[2][0] == 8
    c.wait([sid])
    assert r["ended"] and r["reset"] is None
    c.send_body(sid, b"", end=True)
    wait_until(lambda: fetch_metrics(w.stats_port)("weir_h2_websocket_active") == 0, slack(5),
               what="the tunnel closed")
    m = fetch_metrics(w.stats_port)
    assert m("weir_tunnels_opened_total") == 1 and m("weir_h2_streams_active") == 0
    assert m("weir_tunnel_bytes_total", direction="upstream") >= (1 << 20)
    assert m("weir_tunnel_bytes_total", direction="client") >= (1 << 20)
    assert m("weir_tunnels_closed_total", by="upstream") == 1
    wait_until(lambda: [l for l in w.access_lines() if '/echo HTTP/2.0" 101 ' in l], slack(5),
               what="the tunnel's access log line")
    c.close()


def test_the_upstream_sees_a_key_weir_made_and_the_subprotocol_fields(weir_factory, ws_origin):
    o = ws_origin
    w = wsweir(weir_factory, o.addr)
    c = H2Client(w.port)
    sid = open_ws(c, "/headers", extra=[("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
                                        ("sec-websocket-protocol", "chat, superchat"),
                                        ("sec-websocket-extensions", "x-none")])
    assert wait_status(c, sid)["status"] == 200
    frames = read_messages(c, sid, 1)
    hs = [(n.lower(), v) for n, v in json.loads(frames[0][1])]
    d = dict(hs)
    # websockets checked the key and made the Accept weir then checked
    assert len(base64.b64decode(d["sec-websocket-key"], validate=True)) == 16
    assert d["sec-websocket-key"] != "dGhlIHNhbXBsZSBub25jZQ=="
    assert [n for n, _ in hs].count("sec-websocket-key") == 1
    assert d["sec-websocket-version"] == "13" and d["upgrade"].lower() == "websocket"
    assert "upgrade" in d["connection"].lower()
    assert d["sec-websocket-protocol"] == "chat, superchat" and d["sec-websocket-extensions"] == "x-none"
    assert d["host"] == "localhost"
    c.close()


def test_the_switch_passes_sec_websocket_protocol_and_an_upstream_close_ends_the_stream(weir_factory):
    o = RawWsOrigin(after=lambda s: (s.sendall(b"tunnel bytes"), s.shutdown(socket.SHUT_WR)))
    try:
        w = wsweir(weir_factory, o.addr)
        c = H2Client(w.port)
        sid = open_ws(c, "/raw")
        r = wait_status(c, sid)
        assert r["status"] == 200 and ("sec-websocket-protocol", "chat") in r["headers"]
        c.wait([sid])
        assert r["body"] == b"tunnel bytes" and r["ended"] and r["reset"] is None
        # the client's END_STREAM is the upstream's EOF, after the bytes
        # its frame carries, though the stream closes with that frame
        c.conn.send_data(sid, b"last", end_stream=True)
        c.flush()
        assert o.eof.wait(slack(5))
        assert b"".join(o.got) == b"last"
        wait_until(lambda: fetch_metrics(w.stats_port)("weir_h2_websocket_active") == 0, slack(5),
                   what="the tunnel closed")
        assert fetch_metrics(w.stats_port)("weir_tunnels_closed_total", by="upstream") == 1
        c.close()
    finally:
        o.stop()


def test_a_101_with_a_wrong_or_missing_accept_is_a_502(weir_factory):
    wrong = RawWsOrigin(answer=lambda key: ("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                                            "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n"
                                            % accept_of(key + "x")).encode())
    missing = RawWsOrigin(answer=lambda key: b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                                             b"Connection: Upgrade\r\n\r\n")
    try:
        for o in (wrong, missing):
            w = wsweir(weir_factory, o.addr)
            c = H2Client(w.port)
            sid = open_ws(c, "/raw")
            r = c.wait([sid])[0]
            assert r["status"] == 502 and r["ended"], r
            m = fetch_metrics(w.stats_port)
            assert m("weir_h2_websocket_refused_total", reason="bad_accept") == 1
            assert m.error("h2_websocket_bad_accept") == 1
            assert m("weir_h2_websocket_opened_total") == 0 and m("weir_tunnels_opened_total") == 0
            wait_until(lambda: [l for l in w.error_lines() if "Sec-WebSocket-Accept" in l], slack(3),
                       what="the log line")
            c.close()
    finally:
        wrong.stop()
        missing.stop()


def test_a_403_from_the_upstream_goes_to_the_client(weir_factory):
    o = RawWsOrigin(answer=lambda key: b"HTTP/1.1 403 Forbidden\r\nContent-Length: 4\r\nX-Why: origin\r\n\r\nnope")
    try:
        w = wsweir(weir_factory, o.addr)
        c = H2Client(w.port)
        sid = open_ws(c, "/raw")
        r = c.wait([sid])[0]
        assert r["status"] == 403 and r["body"] == b"nope" and r["ended"]
        assert ("x-why", "origin") in r["headers"]
        assert fetch_metrics(w.stats_port)("weir_h2_websocket_opened_total") == 0
        c.close()
    finally:
        o.stop()


def test_a_2xx_that_is_no_switch_is_a_502(weir_factory):
    # RFC 8441: to the HTTP/2 client a 2xx is the tunnel open; an upstream
    # that ignored the Upgrade and answered 200 opened none
    o = RawWsOrigin(answer=lambda key: b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nplain")
    try:
        w = wsweir(weir_factory, o.addr)
        c = H2Client(w.port)
        r = c.wait([open_ws(c, "/raw")])[0]
        assert r["status"] == 502 and r["ended"], r
        m = fetch_metrics(w.stats_port)
        assert m("weir_h2_websocket_refused_total", reason="no_switch") == 1
        assert m.error("h2_websocket_no_switch") == 1
        assert m("weir_h2_websocket_opened_total") == 0
        c.close()
        wait_until(lambda: any('" 502 ' in l for l in w.access_lines()), slack(3), what="the 502 logged")
    finally:
        o.stop()


def test_a_plain_connect_another_protocol_or_version_is_refused(weir_factory, origin):
    w = weir_factory(upstreams=[{"name": "a", "servers": [origin.addr]}], routes=[{"path": "/", "upstream": "a"}])
    c = H2Client(w.port)
    sid = c.conn.get_next_available_stream_id()
    c.conn.send_headers(sid, [(":method", "CONNECT"), (":authority", "example.com:443")], end_stream=False)
    c.responses[sid] = {"status": None, "headers": [], "body": b"", "ended": False, "reset": None}
    c.flush()
    other = open_ws(c, "/x", protocol="h2c-tunnel")
    old = open_ws(c, "/x", version="8")
    none = open_ws(c, "/x", version=None)
    rs = c.wait([sid, other, old, none])
    assert [r["status"] for r in rs] == [501, 501, 400, 400], rs
    m = fetch_metrics(w.stats_port)
    assert m("weir_h2_websocket_refused_total", reason="connect") == 1
    assert m("weir_h2_websocket_refused_total", reason="protocol") == 1
    assert m("weir_h2_websocket_refused_total", reason="request") == 2
    assert m.error("h2_connect") == 2 and m.error("h2_websocket_request") == 2
    assert not origin.requests()
    c.close()


def test_a_client_reset_closes_the_upstream_socket(weir_factory):
    o = RawWsOrigin()
    try:
        w = wsweir(weir_factory, o.addr)
        c = H2Client(w.port)
        sid = open_ws(c, "/raw")
        assert wait_status(c, sid)["status"] == 200
        c.send_body(sid, b"ping", end=False)
        wait_until(lambda: b"".join(o.got) == b"ping", slack(5), what="the bytes upstream")
        c.conn.reset_stream(sid, 8)  # CANCEL
        c.flush()
        assert o.eof.wait(slack(5)), "the upstream socket stayed open"
        wait_until(lambda: fetch_metrics(w.stats_port)("weir_h2_websocket_active") == 0, slack(5),
                   what="the tunnel closed")
        m = fetch_metrics(w.stats_port)
        assert m("weir_tunnels_closed_total", by="client") == 1 and m("weir_tunnels_active") == 0
        # only the stream went: the connection takes another
        assert wait_status(c, open_ws(c, "/raw"))["status"] == 200
        c.close()
    finally:
        o.stop()


def test_a_client_that_does_not_read_keeps_the_worker_flat_while_the_upstream_floods(weir_factory, ws_origin):
    o = ws_origin
    w = wsweir(weir_factory, o.addr)
    pid = w.worker_pids()[0]
    c = H2Client(w.port)
    sid = open_ws(c, "/flood/800")  # 50 MiB
    assert wait_status(c, sid)["status"] == 200
    rss0 = proc_status(pid, "VmRSS")
    slab0 = fetch_metrics(w.stats_port)("weir_slab_bytes_in_use")
    time.sleep(slack(2))  # the client reads nothing: its windows stay shut
    m = fetch_metrics(w.stats_port)
    assert m("weir_h2_stalls_total") >= 1
    assert m("weir_slab_bytes_in_use") - slab0 < 256 * 1024
    assert proc_status(pid, "VmRSS") - rss0 < 8 * 1024  # kB
    # and it moves again once the client reads
    got = len(c.responses[sid]["body"])
    deadline = time.monotonic() + slack(5)
    while len(c.responses[sid]["body"]) < got + (4 << 20) and time.monotonic() < deadline:
        c.read_some(0.2)
    assert len(c.responses[sid]["body"]) >= got + (4 << 20)
    c.close()


def test_the_tunnel_idle_timeout_resets_the_stream_and_closes_the_upstream(weir_factory):
    o = RawWsOrigin()
    try:
        w = wsweir(weir_factory, o.addr, timeouts={"tunnel": "500ms"})
        c = H2Client(w.port)
        sid = open_ws(c, "/raw")
        assert wait_status(c, sid)["status"] == 200
        t0 = time.monotonic()
        r = c.wait([sid], 10)[0]
        assert r["reset"] is not None and not r["ended"]  # cut, not a clean end
        assert time.monotonic() - t0 >= 0.4
        assert o.eof.wait(slack(5))
        m = fetch_metrics(w.stats_port)
        assert m("weir_tunnels_closed_total", by="idle_timeout") == 1 and m("weir_h2_websocket_active") == 0
        c.close()
    finally:
        o.stop()


def test_an_upstream_that_does_not_read_holds_the_client_by_its_window(weir_factory):
    go = threading.Event()
    o = RawWsOrigin(after=lambda s: go.wait(slack(20)))
    try:
        w = wsweir(weir_factory, o.addr)
        c = H2Client(w.port)
        sid = open_ws(c, "/raw")
        assert wait_status(c, sid)["status"] == 200
        slab0 = fetch_metrics(w.stats_port)("weir_slab_bytes_in_use")
        # the client sends while its window lets it, for 2 s: the kernel's
        # buffers, weir's one input buffer and the stream's window
        data, off = os.urandom(32 << 20), 0
        deadline = time.monotonic() + slack(2)
        while time.monotonic() < deadline and off < len(data):
            room = min(c.conn.local_flow_control_window(sid), c.conn.max_outbound_frame_size)
            if room <= 0:
                c.read_some(0.1)
                continue
            c.conn.send_data(sid, data[off:off + room])
            off += room
            c.flush()
        assert off < len(data), "the window never shut"
        assert fetch_metrics(w.stats_port)("weir_slab_bytes_in_use") - slab0 < 256 * 1024
        go.set()
        c.send_body(sid, data[off:16 << 20] if off < (16 << 20) else b"", end=True)
        sent = max(off, 16 << 20)
        wait_until(lambda: sum(len(g) for g in o.got) >= sent, slack(20), what="the bytes upstream")
        assert b"".join(o.got) == data[:sent]
        c.close()
    finally:
        go.set()
        o.stop()


def test_data_sent_before_the_200_goes_through_once_the_tunnel_opens(weir_factory, ws_origin):
    w = wsweir(weir_factory, ws_origin.addr)
    c = H2Client(w.port)
    sid = c.conn.get_next_available_stream_id()
    c.conn.send_headers(sid, ws_headers("/echo"), end_stream=False)
    c.conn.send_data(sid, ws_frame(1, b"early"))
    c.responses[sid] = {"status": None, "headers": [], "body": b"", "ended": False, "reset": None}
    c.flush()
    assert wait_status(c, sid)["status"] == 200
    assert read_messages(c, sid, 1) == [(1, b"early")]
    c.close()


def answer_after_eof(s):
    """The upstream reads to the client's half close, then answers."""
    got = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        got += b
    s.sendall(b"late:" + got)
    s.shutdown(socket.SHUT_WR)


def test_the_client_half_closes_first_and_still_gets_the_upstream_answer(weir_factory):
    o = RawWsOrigin(after=answer_after_eof)
    try:
        w = wsweir(weir_factory, o.addr)
        c = H2Client(w.port)
        sid = open_ws(c, "/raw")
        assert wait_status(c, sid)["status"] == 200
        c.conn.send_data(sid, b"abc", end_stream=True)
        c.flush()
        r = c.wait([sid])[0]
        assert r["body"] == b"late:abc" and r["ended"] and r["reset"] is None
        wait_until(lambda: fetch_metrics(w.stats_port)("weir_h2_websocket_active") == 0, slack(5),
                   what="the tunnel closed")
        assert fetch_metrics(w.stats_port)("weir_tunnels_closed_total", by="client") == 1
        c.close()
    finally:
        o.stop()


def reload_with_an_h2_tunnel(weir_factory, ws_origin, drain, tunnel_drain):
    """One worker, an HTTP/2 WebSocket open and used, SIGHUP: (weir, the
    client, its stream, the old worker's pids)."""
    w = weir_factory(upstreams=[{"name": "ws", "servers": [ws_origin.addr]}],
                     routes=[{"path": "/", "upstream": "ws"}], workers=1,
                     timeouts={"drain": drain, "tunnel_drain": tunnel_drain})
    old = w.wait_workers(1)
    c = H2Client(w.port)
    sid = open_ws(c, "/echo")
    assert wait_status(c, sid)["status"] == 200
    c.send_body(sid, ws_frame(1, b"before"), end=False)
    assert read_messages(c, sid, 1) == [(1, b"before")]
    w.signal(signal.SIGHUP)
    wait_until(lambda: [p for p in w.worker_pids() if p not in old], slack(10), what="new worker")
    return w, c, sid, old


def test_an_h2_tunnel_outlives_timeouts_drain_on_its_draining_worker(weir_factory, ws_origin):
    w, c, sid, old = reload_with_an_h2_tunnel(weir_factory, ws_origin, "500ms", "30s")
    assert c.wait_goaway() == 0  # NO_ERROR: new streams go elsewhere
    time.sleep(1.5)  # past timeouts.drain
    assert all(pid_alive(p) for p in old)
    # python3-h2 sends nothing after a GOAWAY: the stream goes on in raw
    # frames, as RFC 9113 6.8 lets the streams it covers
    c.sock.sendall(hf.DataFrame(sid, data=ws_frame(1, b"after")).serialize())
    buf, frames, deadline = b"", [], time.monotonic() + slack(5)
    c.sock.settimeout(0.2)
    while not frames and time.monotonic() < deadline:
        try:
            buf += c.sock.recv(65536)
        except socket.timeout:
            continue
        while len(buf) >= 9:
            f, n = hf.Frame.parse_frame_header(memoryview(buf[:9]))
            if len(buf) < 9 + n:
                break
            f.parse_body(memoryview(buf[9:9 + n]))
            buf = buf[9 + n:]
            assert not isinstance(f, hf.RstStreamFrame), f
            if isinstance(f, hf.DataFrame) and f.stream_id == sid:
                frames += ws_parse(bytes(f.data))[0]
    assert frames == [(1, b"after")]
    c.close()
    wait_until(lambda: not any(pid_alive(p) for p in old), slack(5), what="old worker exits")


def test_a_draining_worker_cuts_its_h2_tunnels_at_tunnel_drain(weir_factory, ws_origin):
    w, c, sid, old = reload_with_an_h2_tunnel(weir_factory, ws_origin, "300ms", "1s")
    c.wait([sid], 10)
    assert c.responses[sid]["reset"] is not None or c.closed
    wait_until(lambda: not any(pid_alive(p) for p in old), slack(5), what="old worker exits")
    m = w.metrics()
    assert m("weir_tunnels_closed_total", by="drain") == 1
    assert m("weir_h2_websocket_active") == 0 and m("weir_tunnels_active") == 0
    c.close()
