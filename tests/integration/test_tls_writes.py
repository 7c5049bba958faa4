"""Long writes over TLS: a body longer than a record is sealed into up to
five records that leave in one write(2), where one write per 16 KiB record
was made before. What the socket does not take waits sealed in the BIO
and goes first when the socket has room; plaintext counts as written only
once its record is wholly out, so a slow client, one that leaves in the
middle and HTTP/2 over TLS all get every byte in order."""

import os
import shutil
import socket
import ssl
import sys
import time

import pytest

from harness import settle, slack, wait_until
from test_bodies import writes_during
from test_tls import certs, client_ctx, https_get, read_response, start_tls_weir, tls_connect  # noqa: F401

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "origin"))
from origin import random_body  # noqa: E402  the origin's own bytes

# the seal buffers' slab class: a struct buf (16 bytes) and five records of
# 16 KiB with 64 bytes of room each (tls_bio.c, TLS_SEAL_CAP)
SEAL_CLASS = str(16 + 5 * (16384 + 64))


def seal_in_use(w):
    """Bytes of seal buffers the workers hold; None until a worker has
    published its slab classes (on its first tick)."""
    m = w.metrics()
    for (name, labels), v in m.samples.items():
        d = dict(labels)
        if name == "weir_slab_class_bytes" and d.get("size") == SEAL_CLASS and d.get("kind") == "in_use":
            return v
    return None


@pytest.mark.skipif(not shutil.which("strace"), reason="needs strace")
def test_a_long_body_leaves_in_a_write_per_five_records(weir_factory, origin, certs):
    w = start_tls_weir(weir_factory, origin, [certs["ec"]], workers=1,
                       timeouts={"client_send": "60s", "upstream_read": "60s"})
    (worker,) = w.worker_pids()
    n = 1 << 20
    with tls_connect(w.port, client_ctx(certs), "app.test") as s:
        https_get(s, "/bytes/1")  # the handshake's writes and tickets go first

        def download():
            return https_get(s, "/text/%d?rand=1" % n)

        (head, body), writes = writes_during(worker, download)
    assert body == random_body(n)
    # 64 records of 16 KiB: one write each before; now 13 writes of five
    # records when the socket takes them whole, a few more when not
    assert writes < 40, "%d writes for %d bytes over TLS" % (writes, n)


def test_a_slow_reader_with_a_small_window_gets_every_byte_in_order(weir_factory, origin, certs):
    w = start_tls_weir(weir_factory, origin, [certs["ec"]], workers=1)
    m0 = w.metrics()
    n = 4 << 20
    raw = socket.socket()
    # a small window: weir's sealed writes are cut short again and again
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    raw.settimeout(slack(20))
    raw.connect(("127.0.0.1", w.port))
    with client_ctx(certs).wrap_socket(raw, server_hostname="app.test") as s:
        s.sendall(b"GET /text/%d?rand=1 HTTP/1.1\r\nHost: app.test\r\n\r\n" % n)
        got = b""
        while b"\r\n\r\n" not in got:
            got += s.recv(4096)
        head, body = got.split(b"\r\n\r\n", 1)
        # the first 256 KiB in small sips, with pauses that fill weir's
        # socket buffer; the rest as fast as it comes
        deadline = time.monotonic() + slack(30)
        while len(body) < 256 * 1024:
            assert time.monotonic() < deadline
            body += s.recv(1024)
            time.sleep(0.002)
        while len(body) < n:
            d = s.recv(65536)
            assert d, "closed after %d bytes" % len(body)
            body += d
        assert body == random_body(n)
        # the connection is still in step: the next answer is whole
        head, body = https_get(s, "/bytes/70000")
        assert body == b"x" * 70000
    m = w.metrics()
    def taken(m, kind):
        return m.get("weir_stream_buffers_total", kind=kind, result="taken")
    # one upstream read buffer per body and at least one seal buffer
    assert taken(m, "response") - taken(m0, "response") >= 2, m.text
    assert taken(m, "tls_seal") - taken(m0, "tls_seal") >= 1, m.text
    wait_until(lambda: seal_in_use(w) == 0, slack(5), what="seal buffers given back")


def test_a_client_leaving_with_sealed_bytes_unwritten_frees_them(weir_factory, origin, certs):
    w = start_tls_weir(weir_factory, origin, [certs["ec"]], workers=1)
    raw = socket.socket()
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    raw.settimeout(slack(10))
    raw.connect(("127.0.0.1", w.port))
    s = client_ctx(certs).wrap_socket(raw, server_hostname="app.test")
    s.sendall(b"GET /text/%d?rand=1 HTTP/1.1\r\nHost: app.test\r\n\r\n" % (8 << 20))
    s.recv(4096)
    # weir's socket fills while this client reads nothing: a seal buffer
    # waits with records in it
    wait_until(lambda: (seal_in_use(w) or 0) > 0, slack(10), what="a seal buffer held")
    s.close()
    wait_until(lambda: seal_in_use(w) == 0, slack(10), what="seal buffers given back")
    # the worker carries on
    with tls_connect(w.port, client_ctx(certs), "app.test") as s2:
        head, body = https_get(s2, "/text/200000?rand=1")
        assert body == random_body(200000)


def test_http2_over_tls_gets_long_bodies_whole(weir_factory, origin, certs):
    """HTTP/2's gathered write (four DATA frames and more) is one sealed
    write; several streams interleave in it."""
    import h2.connection
    import h2.events

    w = start_tls_weir(weir_factory, origin, [certs["ec"]], workers=1)
    n = 1 << 20
    s = tls_connect(w.port, client_ctx(certs, alpn=("h2",)), "app.test")
    assert s.selected_alpn_protocol() == "h2"
    conn = h2.connection.H2Connection()
    conn.initiate_connection()
    conn.increment_flow_control_window(16 << 20)
    ids = []
    for k in range(3):
        sid = conn.get_next_available_stream_id()
        conn.send_headers(sid, [(":method", "GET"), (":scheme", "https"), (":authority", "app.test"),
                                (":path", "/text/%d?rand=1" % (n + k))], end_stream=True)
        conn.increment_flow_control_window(16 << 20, stream_id=sid)
        ids.append(sid)
    s.sendall(conn.data_to_send())
    bodies = {sid: b"" for sid in ids}
    done = set()
    deadline = time.monotonic() + slack(30)
    while len(done) < len(ids):
        assert time.monotonic() < deadline
        data = s.recv(65536)
        assert data, "closed"
        for ev in conn.receive_data(data):
            if isinstance(ev, h2.events.DataReceived):
                bodies[ev.stream_id] += ev.data
                conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.StreamEnded):
                done.add(ev.stream_id)
        s.sendall(conn.data_to_send())
    s.close()
    for k, sid in enumerate(ids):
        assert bodies[sid] == random_body(n + k), sid
    settle()
