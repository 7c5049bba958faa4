"""limits.stream_buffer: a response body from an HTTP/1 upstream with more
still to come than an I/O buffer holds reads into a larger buffer of its
own slab class, swapped in when nothing of the body is in the I/O buffer,
and given back when the body ends; an upstream connection whose last
response went past an I/O buffer reads its next head into one. Bodies are
checked byte for byte, to a fast, a slow and an HTTP/2 client; the class's
gauges show it was taken and given back, and that a short body never
takes it."""

import hashlib
import json
import os
import random
import shutil
import subprocess
import time

import pytest

from harness import Client, build_request, simple, slack, unread_by_server, wait_until
from test_bodies import writes_during

CURL = shutil.which("curl") or "/usr/bin/curl"
STREAM = 96 * 1024  # not the body class's 64 KiB, so the class is its own
# its objects: the struct buf, room for a response head (WORKER_STREAM_HEAD)
# and the body's bytes
STREAM_CLASS = 16 + 2048 + STREAM
# the I/O buffer's data bytes at the default limits: the larger head size
# (16 KiB) and the room a head may grow by, 512 bytes and one per header
IO_BUF = 16384 + 512 + 100


def body_of(n):
    """What the origin sends for /text/N?rand=1."""
    return random.Random(n).randbytes(n)


def class_bytes(w, size):
    """{kind: bytes} of the slab class of objects of <size>, None while it
    is not published."""
    m = w.metrics()
    g = {dict(l)["kind"]: v for (n, l), v in m.samples.items()
         if n == "weir_slab_class_bytes" and dict(l)["size"] == str(size)}
    return g if len(g) == 4 else None


def stream_class(w):
    """{kind: bytes} of the stream buffers' slab class, once published."""
    return wait_until(lambda: class_bytes(w, STREAM_CLASS), slack(5), what="the stream class's gauges")


def stream_weir(weir_factory, origin, **kw):
    limits = dict({"stream_buffer": "96k"}, **kw.pop("limits", {}))
    return simple(weir_factory, origin, workers=1, limits=limits, **kw)


def test_a_long_body_reads_into_a_stream_buffer_and_gives_it_back(weir_factory, origin):
    w = stream_weir(weir_factory, origin)
    with Client(w.port, timeout=20) as c:
        for n in (300000, 65536, 1000000):
            r = c.request("GET", "/text/%d?rand=1" % n)
            assert r.status == 200, r
            assert r.get("Content-Length") == str(n)
            assert r.body == body_of(n), n
        # the connection is still good, and a short body follows
        assert c.request("GET", "/bytes/3").body == b"xxx"

    def taken_and_back():
        g = stream_class(w)
        return g if g["high_water"] >= STREAM_CLASS and g["in_use"] == 0 else None

    wait_until(taken_and_back, slack(5), what="a stream buffer taken, then given back")


def test_a_body_an_io_buffer_holds_takes_no_stream_buffer(weir_factory, origin):
    w = stream_weir(weir_factory, origin)
    with Client(w.port, timeout=20) as c:
        for n in (3, 12000, 16000):
            r = c.request("GET", "/text/%d?rand=1" % n)
            assert r.body == body_of(n), n
        # chunked and close-framed bodies keep the I/O buffer too
        assert c.request("GET", "/chunked/200000").body == b"x" * 200000
    with Client(w.port, timeout=20) as c:
        assert c.request("GET", "/close/200000").body == b"x" * 200000
    time.sleep(1.2)  # a tick, so the gauges are fresh
    g = stream_class(w)
    assert g["high_water"] == 0 and g["held"] == 0, g


def test_a_head_after_a_response_past_an_io_buffer_reads_into_a_stream_buffer(weir_factory, origin):
    """A body of less than an I/O buffer whose head takes it past one: the
    body's rest never needs a stream buffer (the binary before took none
    for all four requests), but the upstream connection's next head reads
    into one, so that such a response comes in one read. The guess follows
    the last response: a short one after it still takes one, the next
    does not. One worker, one client connection, one pooled upstream
    connection."""
    w = stream_weir(weir_factory, origin)
    n = IO_BUF - 50  # the origin's head is longer than 50 bytes
    taken = []
    with Client(w.port, timeout=20) as c:
        for path, body in (("/text/%d?rand=1" % n, body_of(n)), ("/text/%d?rand=1" % n, body_of(n)),
                           ("/bytes/3", b"xxx"), ("/bytes/3", b"xxx")):
            r = c.request("GET", path)
            assert r.status == 200 and r.body == body, (path, r)
            taken.append(w.metrics().get("weir_stream_buffers_total", kind="response", result="taken"))
    assert taken == [0, 1, 2, 2], taken
    m = w.metrics()
    assert m.total("weir_upstream_connects_total") == 1 and m.total("weir_upstream_reuses_total") == 3, m.text
    wait_until(lambda: stream_class(w)["in_use"] == 0, slack(5), what="the stream buffer given back")


def test_a_slow_reader_gets_every_byte_from_a_stream_buffer(weir_factory, origin):
    w = stream_weir(weir_factory, origin)
    n = 400000
    got = bytearray()
    with Client(w.port, timeout=30, rcvbuf=4096) as c:
        c.send(build_request("GET", "/text/%d?rand=1" % n))
        time.sleep(0.3)  # weir fills what the client's window takes, then waits
        r = c.read_response(sink=got.extend, timeout=30)
        assert r.status == 200
    assert bytes(got) == body_of(n)
    # published on the worker's tick, which may come after the body
    wait_until(lambda: stream_class(w)["high_water"] >= STREAM_CLASS, slack(5), what="the stream class used")


def test_an_http2_client_gets_a_stream_buffered_body_byte_for_byte(weir_factory, origin):
    w = stream_weir(weir_factory, origin)
    n = 500000
    p = subprocess.run([CURL, "-s", "--http2-prior-knowledge", "-w", "%{http_version}",
                        "-o", "-", "http://127.0.0.1:%d/text/%d?rand=1" % (w.port, n)],
                       capture_output=True, timeout=slack(30))
    assert p.stdout[-1:] == b"2", p.stdout[-20:]
    assert hashlib.sha256(p.stdout[:-1]).hexdigest() == hashlib.sha256(body_of(n)).hexdigest()
    # the gauges are published on the worker's tick: the one after the
    # body may come a moment after curl is done
    wait_until(lambda: stream_class(w)["high_water"] >= STREAM_CLASS, slack(5), what="the stream class used")


def test_stream_buffer_0_keeps_every_body_in_the_io_buffer(weir_factory, origin):
    w = stream_weir(weir_factory, origin, limits={"stream_buffer": 0})
    with Client(w.port, timeout=20) as c:
        assert c.request("GET", "/text/300000?rand=1").body == body_of(300000)
    time.sleep(1.2)
    sizes = {dict(l)["size"] for (n, l) in w.metrics().samples if n == "weir_slab_class_bytes"}
    assert str(STREAM_CLASS) not in sizes, sizes


def test_a_body_class_shared_with_no_stream_buffer_has_no_room_for_a_head(weir_factory, origin):
    # body_buffer equal to stream_buffer shares one class; with stream
    # buffers off, no response head is ever read into its objects, so they
    # are sized for the body alone
    w = stream_weir(weir_factory, origin, limits={"stream_buffers": 0, "body_buffer": "96k"})
    body = random.Random(7).randbytes(80000)
    with Client(w.port, timeout=20) as c:
        r = c.request("POST", "/echo", body=body)
    assert r.status == 200, r
    got = json.loads(r.body)
    assert (got["body_len"], got["body_sha256"]) == (len(body), hashlib.sha256(body).hexdigest())
    plain = 16 + STREAM

    def body_class():
        g = class_bytes(w, plain)
        return g if g and g["high_water"] >= plain else None

    wait_until(body_class, slack(5), what="the body class, sized for a body alone, used")
    sizes = {dict(l)["size"] for (n, l) in w.metrics().samples if n == "weir_slab_class_bytes"}
    assert str(STREAM_CLASS) not in sizes, sizes


READS = ("recvfrom", "read")


def worker_reads(w, action):
    """Runs <action>() with strace counting the worker's socket reads
    (weir reads sockets with recv(2), so /proc/PID/io's syscr, which counts
    only read(2) and its kin, does not see them); returns (action's result,
    reads)."""
    return writes_during(w.worker_pids()[0], action, calls=READS)


@pytest.mark.skipif(not shutil.which("strace"), reason="needs strace")
def test_a_long_body_moves_in_reads_larger_than_an_io_buffer(weir_factory, origin):
    """Each read into a 16 KiB I/O buffer takes at most 16 KiB, so 8 MiB of
    bodies need at least 512 reads through it (the binary before the stream
    buffer made 519; with it taken only when the I/O buffer had been given
    back, 310). Through the stream buffer they need 86 at the least (about
    110 are seen); a read takes what has arrived, so allow half the I/O
    buffer's minimum."""
    w = stream_weir(weir_factory, origin)
    n, count = 1 << 20, 8
    with Client(w.port, timeout=30) as c:
        assert c.request("GET", "/bytes/3").body == b"xxx"  # connected, pooled

        def downloads():
            for _ in range(count):
                got = [0, 0]

                def sink(b):
                    got[0] += len(b)
                    got[1] += len(b) - bytes(b).count(b"x")

                c.send(build_request("GET", "/big/%d" % n))
                r = c.read_response(sink=sink, timeout=30)
                assert r.status == 200 and got == [n, 0], (r, got)

        _, reads = worker_reads(w, downloads)
    # the client's reads are in the count too: one per request
    assert count < reads < count * n // 16384 // 2, reads


@pytest.mark.skipif(not shutil.which("strace"), reason="needs strace")
def test_a_long_request_body_moves_in_reads_larger_than_an_io_buffer(weir_factory, origin):
    """Uploads as downloads: 8 MiB of Content-Length request bodies need
    at least 512 reads through a 16 KiB input buffer (the binary before
    made 514), and read into a stream buffer (96 KiB here) once the head
    is done with (about 105 are seen)."""
    w = stream_weir(weir_factory, origin)
    n, count = 1 << 20, 8
    data = os.urandom(n)
    with Client(w.port, timeout=30) as c:
        assert c.request("GET", "/bytes/3").body == b"xxx"  # connected, pooled

        def uploads():
            for _ in range(count):
                r = c.request("POST", "/upload", body=data, timeout=30)
                assert r.status == 200 and r.json() == {"body_len": n, "body_sha256": hashlib.sha256(data).hexdigest()}

        _, reads = worker_reads(w, uploads)
        # a pipelined request behind a long body is read and answered
        c.send(build_request("POST", "/upload", body=data) + build_request("GET", "/bytes/5"))
        assert c.read_response(timeout=30).json()["body_len"] == n
        assert c.read_response(timeout=30).body == b"x" * 5
    assert count < reads < count * n // 16384 // 2, reads
    wait_until(lambda: w.metrics().get("weir_stream_buffers_total", kind="upload", result="taken") >= count // 2,
               slack(3), what="the uploads' stream buffers counted")


def test_a_client_dripping_a_long_body_keeps_its_io_buffer(weir_factory, origin):
    """A client's input buffer is held until its body ends, so one that
    sends slowly gets no stream buffer: 200 KB in 2 KB pieces arrives
    whole, and no stream buffer was taken for it. Each piece waits for the
    worker's read of the one before (its socket's receive queue empty), so
    that a busy machine cannot let pieces pile up into a long read."""
    w = stream_weir(weir_factory, origin)
    data = os.urandom(200000)
    m0 = w.metrics()
    with Client(w.port, timeout=30) as c:
        c.send(b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(data))
        for k in range(0, len(data), 2000):
            c.send(data[k:k + 2000])
            wait_until(lambda: unread_by_server(w.port, c.sock) == 0, 5, interval=0.001, what="the worker's read of a piece")
        r = c.read_response(timeout=30)
    assert r.json() == {"body_len": len(data), "body_sha256": hashlib.sha256(data).hexdigest()}
    taken = w.metrics().total("weir_stream_buffers_total", result="taken") - m0.total("weir_stream_buffers_total",
                                                                                     result="taken")
    assert taken == 0, taken


def test_stream_buffers_bounds_what_slow_readers_hold(weir_factory, origin):
    """limits.stream_buffers = 1: a client that does not read holds the one
    stream buffer once its socket is full; a second such client reads
    through the I/O buffer (counted as refused); both bodies then arrive
    whole, and the buffer goes back."""
    w = stream_weir(weir_factory, origin, limits={"stream_buffers": 1},
                    timeouts={"upstream_read": "30s", "client_send": "30s"})
    n = 8 << 20  # more than the kernel's socket buffers take for a client that does not read
    clients = []
    try:
        for k in range(2):
            c = Client(w.port, timeout=30, rcvbuf=4096)
            clients.append(c)
            c.send(build_request("GET", "/big/%d" % n))
            if k == 0:
                wait_until(lambda: stream_class(w)["in_use"] >= STREAM_CLASS, slack(10),
                           what="the first client holding the stream buffer")
        m = wait_until(lambda: (lambda m: m if m.get("weir_stream_buffers_total", kind="response",
                                                     result="refused") else None)(
            w.metrics()), slack(10), what="a refused stream buffer")
        assert m.get("weir_stream_buffers_total", kind="response", result="taken") >= 1
        assert stream_class(w)["in_use"] == STREAM_CLASS  # one object, never two
        for c in clients:
            got = [0, 0]

            def sink(b, got=got):
                got[0] += len(b)
                got[1] += len(b) - bytes(b).count(b"x")

            r = c.read_response(sink=sink, timeout=60)
            assert r.status == 200 and got == [n, 0], got
    finally:
        for c in clients:
            c.close()
    wait_until(lambda: stream_class(w)["in_use"] == 0, slack(5), what="the stream buffer given back")
