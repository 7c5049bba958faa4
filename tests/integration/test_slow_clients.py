"""Clients and upstreams that take their time or stop halfway: request body
buffering, minimum data rates, the total request cap, an upstream that
answers before it read the body, and which timer answers when."""

import os
import socket
import threading
import time

from harness import (Client, build_request, chunked, error_response_ok, established_to, proc_stat,
                     simple, slack, wait_until)


def counted(w, kind, before, n=1):
    def grown():
        return w.metrics().error(kind) - before.error(kind) >= n
    wait_until(grown, slack(3), what="weir_errors_total{kind=%r} to grow by %d" % (kind, n))


def cpu_seconds(pid):
    f = proc_stat(pid)
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def early_body(n):
    pat = bytes(range(251))
    return (pat * (n // 251 + 1))[:n]


class Uploader(threading.Thread):
    """Sends body bytes on <sock> as fast as it takes them until stopped or
    the connection fails."""

    def __init__(self, sock):
        super().__init__(daemon=True)
        self.sock = sock
        self.stop = threading.Event()
        self.sent = 0

    def run(self):
        chunk = b"u" * 65536
        self.sock.settimeout(0.2)
        while not self.stop.is_set():
            try:
                self.sent += self.sock.send(chunk)
            except socket.timeout:
                continue
            except OSError:
                return


def read_paced(c, n_expected, pace, limit, done=None):
    """Reads the whole response from <c>, sleeping pace() seconds after
    every 4 KiB, until <limit> seconds pass or done() (if given, asked
    once a second) is true. Returns the raw bytes and whether the
    connection was reset."""
    data = bytearray()
    end = time.monotonic() + limit
    asked = time.monotonic()
    reset = False
    c.sock.settimeout(1.0)
    while time.monotonic() < end and len(data) < n_expected:
        if done and time.monotonic() - asked >= 1.0:
            asked = time.monotonic()
            if done():
                break
        try:
            d = c.sock.recv(4096)
        except socket.timeout:
            continue
        except ConnectionResetError:
            reset = True
            break
        if not d:
            break
        data += d
        time.sleep(pace())
    return bytes(data), reset


# ---- an upstream that answers early (item 3) ---------------------------

def test_an_upstream_answering_before_the_body_is_read_costs_no_cpu_and_the_answer_arrives_whole(
        weir_factory, origin):
    # the origin answers 12 MiB at once without reading the upload, then
    # closes (which resets weir's side: the body is unread); the client goes
    # on uploading while it reads the answer, slowly once the origin is gone.
    # weir must neither spin on the client's input meanwhile nor reset the
    # client before it has read the answer.
    w = simple(weir_factory, origin, workers=1,
               timeouts={"client_send": "10s", "upstream_read": "10s", "client_body": "10s"})
    pid = w.worker_pids()[0]
    n = 8 << 20
    samples = []
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            samples.append((time.monotonic(), cpu_seconds(pid)))
            time.sleep(0.05)

    # 2 MiB/s until the origin has closed (what weir holds of the answer
    # then is in its socket buffers), 40 KiB/s for 3 s, then at full speed
    phase = {"closed_at": None, "checked": 0.0}

    def pace():
        now = time.monotonic()
        if phase["closed_at"] is None:
            if now - phase["checked"] > 0.05:
                phase["checked"] = now
                if any(e.get("closed") for e in origin.entries()):
                    phase["closed_at"] = now
            return 4096 / (2 << 20)
        return 0.1 if now - phase["closed_at"] < 3.0 else 0.0

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    c = Client(w.port, timeout=10, rcvbuf=65536)
    try:
        c.send(build_request("POST", "/answer-early/%d" % n, headers=[("Content-Length", str(90 << 20))]))
        up = Uploader(c.sock)
        up.start()
        data, reset = read_paced(c, n + 1000, pace, slack(15))
        up.stop.set()
        up.join(5)
    finally:
        c.close()
        stop.set()
        sampler.join(5)
    t0 = phase["closed_at"]
    assert t0 is not None
    # reading 40 KiB/s costs next to nothing; a spin takes a whole core for
    # as long as weir still has response bytes from the origin to pass on
    slow = [(t, cpu) for t, cpu in samples if t0 <= t <= t0 + 3.0]
    worst = max(b[1] - a[1] for a, b in zip(slow, slow[10:]))
    assert worst < 0.3, (worst, slow)
    head_end = data.find(b"\r\n\r\n") + 4
    assert data.startswith(b"HTTP/1.1 200 "), data[:200]
    body = data[head_end:]
    assert not reset and len(body) == n, (reset, len(body))
    assert body == early_body(n)


# ---- which timer answers (item 10) ------------------------------------

def test_an_upstream_not_reading_the_body_gets_504_not_408(weir_factory, origin):
    # client_header has passed long before upstream_send does: the request
    # waits on the upstream, so the upstream's timer and its answer rule
    w = simple(weir_factory, origin, timeouts={"client_header": "1s", "client_body": "10s",
                                               "upstream_send": "3s", "upstream_read": "10s"})
    # (the body is larger than limits.body_buffer: it streams)
    m0 = w.metrics()
    c = Client(w.port, timeout=10)
    try:
        c.send(build_request("POST", "/hold-body/15000", headers=[("Content-Length", str(90 << 20))]))
        up = Uploader(c.sock)
        up.start()
        r = c.read_response(timeout=10)
        up.stop.set()
        up.join(5)
    finally:
        c.close()
    assert r.status == 504, r
    counted(w, "upstream_timeout", m0)
    assert w.metrics().error("body_timeout") == m0.error("body_timeout")


class Blackhole:
    """A listener whose accept queue is full: a connect to it hangs (the
    kernel drops the SYN), as to a server that is down behind a firewall."""

    def __init__(self):
        self.ls = socket.socket()
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(0)
        self.addr = "127.0.0.1:%d" % self.ls.getsockname()[1]
        self.fill = []
        for _ in range(2):
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(self.ls.getsockname())
            self.fill.append(s)
        time.sleep(0.1)

    def close(self):
        for s in self.fill:
            s.close()
        self.ls.close()


def test_a_request_waiting_on_an_upstream_connect_gets_504_not_408(weir_factory, origin):
    hole = Blackhole()
    try:
        w = simple(weir_factory, origin, upstreams=[{"name": "a", "servers": [hole.addr]}],
                   timeouts={"client_header": "1s", "client_body": "10s", "upstream_connect": "3s"})
        m0 = w.metrics()
        with w.client(timeout=10) as c:
            # more body than limits.body_buffer, so it streams: the connect
            # starts at once, and the client waits for it to send the rest
            c.send(build_request("POST", "/upload", headers=[("Content-Length", str(1 << 20))]) + b"x" * 100)
            t = time.monotonic()
            r = c.read_response(timeout=10)
            took = time.monotonic() - t
        assert r.status == 504, r
        assert took >= 2.5, took
        counted(w, "upstream_timeout", m0)
        assert w.metrics().error("body_timeout") == m0.error("body_timeout")
    finally:
        hole.close()


# ---- request body buffering (item 2) ----------------------------------

RATES = {"rate_window": "2s", "client_body": "10s", "client_send": "10s", "upstream_read": "10s"}


def drip(c, data, every, stop_after):
    """Sends <data> one byte every <every> seconds until weir answers or
    <stop_after> seconds pass; returns what weir sent back."""
    end = time.monotonic() + stop_after
    c.sock.settimeout(every)
    got = b""
    for i in range(len(data)):
        if time.monotonic() > end:
            break
        try:
            c.sock.send(data[i:i + 1])
        except OSError:
            break
        try:
            got = c.sock.recv(65536)
        except socket.timeout:
            continue
        except OSError:
            break
        if got:
            break
    c.sock.settimeout(5)
    try:
        while True:
            d = c.sock.recv(65536)
            if not d:
                break
            got += d
    except OSError:
        pass
    return got


def test_a_body_dripping_below_the_minimum_rate_gets_408_and_never_reaches_the_origin(
        weir_factory, origin):
    w = simple(weir_factory, origin, timeouts=RATES, limits={"client_body_rate": 100})
    m0 = w.metrics()
    port = int(origin.addr.rsplit(":", 1)[1])
    with w.client(timeout=10) as c:
        c.send(build_request("POST", "/upload", headers=[("Content-Length", "1000")]))
        c.send(b"d")
        time.sleep(0.5)
        # buffered: no server was picked, no connection made
        assert established_to(port) == 0
        t = time.monotonic()
        got = drip(c, b"d" * 999, 0.5, slack(10))
        took = time.monotonic() - t
    # below 100 B/s over a 2 s window: judged at the window's end, well
    # before the 10 s gap timer (each byte restarts that one)
    assert got.startswith(b"HTTP/1.1 408 Request Timeout\r\n"), got
    assert b"Connection: close\r\n" in got
    assert took < slack(5), took
    counted(w, "body_too_slow", m0)
    assert w.metrics().error("body_timeout") == m0.error("body_timeout")
    assert origin.entries() == []


def test_a_streamed_body_dripping_below_the_rate_gets_408_and_frees_its_upstream_connection(
        weir_factory, origin):
    # larger than body_buffer: it streams, an upstream connection is held
    # while it drips, and the 408 gives it back
    w = simple(weir_factory, origin, timeouts=RATES,
               limits={"client_body_rate": 100, "body_buffer": "1k"})
    m0 = w.metrics()
    port = int(origin.addr.rsplit(":", 1)[1])
    with w.client(timeout=10) as c:
        c.send(build_request("POST", "/upload", headers=[("Content-Length", "100000")]) + b"x" * 10)
        # weir's own gauge, not /proc/net/tcp: a scan of every socket on a
        # busy machine can outlast the 2 s rate window this test drips in
        wait_until(lambda: w.metrics()("weir_upstream_connections_active") >= 1, slack(2),
                   what="an upstream connection")
        got = drip(c, b"d" * 1000, 0.5, slack(10))
    assert got.startswith(b"HTTP/1.1 408 Request Timeout\r\n"), got
    counted(w, "body_too_slow", m0)
    wait_until(lambda: w.metrics()("weir_upstream_connections_active") == 0, slack(3),
               what="the upstream connection to close")
    assert established_to(port) == 0
    assert origin.requests("/upload") == []


def test_a_body_sent_slowly_but_steadily_above_the_rate_passes(weir_factory, origin):
    w = simple(weir_factory, origin, timeouts=RATES, limits={"client_body_rate": 1000})
    data = os.urandom(12000)
    with w.client(timeout=10) as c:
        c.send(build_request("POST", "/upload", headers=[("Content-Length", str(len(data)))]))
        # 4 KB/s, four times the minimum, over 3 s: more than one window
        for i in range(0, len(data), 400):
            c.send(data[i:i + 400])
            time.sleep(0.1)
        r = c.read_response(timeout=10)
    assert r.status == 200, r
    assert r.json()["body_len"] == len(data)


def test_a_malformed_chunked_body_gets_400_while_buffered_and_nothing_reaches_the_origin(
        weir_factory, origin):
    w = simple(weir_factory, origin)
    m0 = w.metrics()
    with w.client() as c:
        c.send(build_request("POST", "/upload", headers=[("Transfer-Encoding", "chunked")])
               + b"5\r\nhello\r\nzz\r\n")
        r = c.read_response(timeout=5)
        error_response_ok(r, 400, "Bad Request", close=True)
    assert m0.error("bad_request") + m0.error("bad_framing") < \
        w.metrics().error("bad_request") + w.metrics().error("bad_framing")
    assert origin.entries() == []


def test_a_chunked_body_past_body_buffer_streams_whole_after_what_was_buffered(weir_factory, origin):
    w = simple(weir_factory, origin, limits={"body_buffer": "20k"})
    data = os.urandom(100000)
    with w.client() as c:
        c.send(build_request("POST", "/upload", headers=[("Transfer-Encoding", "chunked")]))
        body = chunked(data, 3000)
        for i in range(0, len(body), 7000):
            c.send(body[i:i + 7000])
            time.sleep(0.01)
        r = c.read_response(timeout=5)
    assert r.status == 200
    import hashlib
    assert r.json() == {"body_len": len(data), "body_sha256": hashlib.sha256(data).hexdigest()}


# ---- the response side: minimum send rate ------------------------------

def test_a_client_reading_the_response_a_byte_a_second_is_cut(weir_factory, origin):
    # judged over the first window already: what weir wrote into the socket
    # buffers before it first waited on the client does not count (else the
    # gap timer, 3 s, would end it first, as client_timeout)
    w = simple(weir_factory, origin, workers=1, timeouts=dict(RATES, client_send="3s"),
               limits={"client_send_rate": 10000})
    m0 = w.metrics()
    n = 64 << 20  # far more than the socket buffers on the way hold
    c = Client(w.port, timeout=10, rcvbuf=4096)
    try:
        c.send(build_request("GET", "/bytes/%d" % n))
        # once weir has cut it, what the socket buffers still hold would
        # take the rest of the limit to read at this pace: stop there
        got, reset = read_paced(c, n, lambda: 1.0, slack(12),
                                done=lambda: w.metrics().error("send_too_slow") > m0.error("send_too_slow"))
    finally:
        c.close()
    assert len(got) < n
    counted(w, "send_too_slow", m0)
    assert w.metrics().error("client_timeout") == m0.error("client_timeout")


def test_a_client_reading_steadily_above_the_send_rate_gets_it_all(weir_factory, origin):
    w = simple(weir_factory, origin, workers=1, timeouts=RATES, limits={"client_send_rate": 10000})
    m0 = w.metrics()
    n = 10 << 20
    c = Client(w.port, timeout=10, rcvbuf=65536)
    try:
        # closed after the response, so that the read ends with it rather
        # than at the time limit (the head is not 100 bytes long)
        c.send(build_request("GET", "/bytes/%d" % n, headers=[("Connection", "close")]))
        # 4 KiB per 2 ms: about 2 MB/s, for several windows
        got, reset = read_paced(c, n + 100, lambda: 0.002, slack(15))
    finally:
        c.close()
    assert not reset
    assert len(got) >= n and got.endswith(b"x" * 100)
    assert w.metrics().error("send_too_slow") == m0.error("send_too_slow")


# ---- the total cap: timeouts.request -----------------------------------

def test_a_request_over_its_total_cap_gets_504_waiting_on_the_upstream(weir_factory, origin):
    w = simple(weir_factory, origin, timeouts={"request": "1500ms", "upstream_read": "10s"})
    m0 = w.metrics()
    with w.client(timeout=10) as c:
        t = time.monotonic()
        c.send(build_request("GET", "/slow/5000"))
        r = c.read_response(timeout=10)
        took = time.monotonic() - t
    assert r.status == 504, r
    assert 1.2 <= took < slack(4), took
    counted(w, "request_timeout_upstream", m0)


def test_a_request_over_its_total_cap_gets_408_while_its_body_is_read(weir_factory, origin):
    # each byte comes well within client_body and the rates are off:
    # only the cap ends it
    w = simple(weir_factory, origin, timeouts={"request": "2s", "client_body": "10s"},
               limits={"client_body_rate": 0})
    m0 = w.metrics()
    with w.client(timeout=10) as c:
        c.send(build_request("POST", "/upload", headers=[("Content-Length", "1000")]))
        got = drip(c, b"d" * 1000, 0.3, slack(8))
    assert got.startswith(b"HTTP/1.1 408 Request Timeout\r\n"), got
    counted(w, "request_timeout", m0)
    assert origin.entries() == []


def test_a_response_over_the_total_cap_is_cut(weir_factory, origin):
    w = simple(weir_factory, origin, timeouts={"request": "1500ms", "upstream_read": "10s"})
    m0 = w.metrics()
    with w.client(timeout=10) as c:
        c.send(build_request("GET", "/drip/10/500"))
        data = c.read_all(timeout=slack(6))
    assert data.startswith(b"HTTP/1.1 200 "), data
    assert not data.endswith(b"0\r\n\r\n"), data
    counted(w, "request_timeout", m0)
    counted(w, "response_cut", m0)
