#!/usr/bin/python3
"""soak.py: weir's ASan+UBSan build under mixed load for a long time, with a
reload every 10 s and a binary upgrade every 5 minutes.

    make soak                          (30 minutes; SOAK_TIME=seconds overrides)
    tests/soak/soak.py [--weir build/asan/weir] [--time S] [--reload S]
                       [--upgrade S] [--dir D]

Environment: SOAK_TIME (default 1800), SOAK_RELOAD (10), SOAK_UPGRADE (300)
give the same three in seconds. Loopback only; every loop is bounded by the
run's end; everything started is stopped.

The binary is copied into the run's directory first, so the upgrades
(which start the binary at the path weir was started from) run the same
build even if the tree is rebuilt meanwhile. weir (2 workers) listens on a
plain and a TLS port (a test CA and certificate made with openssl) in front
of tests/origin/origin.py. The load, each kind in its own process:

  keepalive   plain keep-alive connections: GET /, /bytes/N, /chunked/N,
              /echo, a short pause between requests
  newconn     one plain request per connection (Connection: close)
  tls         keep-alive TLS connections, the same requests
  tls_newconn one TLS handshake per request
  upload      POST /upload, 1 kB..2 MB, Content-Length or chunked; the
              origin's sha256 of the body checked
  download    GET /big/N, 1..16 MB, plain and TLS, every byte counted
  slow        slow clients: a request head dripped a byte at a time, a body
              dripped 100 bytes at a time, a 2 MB answer read 4 kB at a time
  h2          HTTP/2 connections (h2c with prior knowledge, or TLS with
              ALPN h2), batches of up to 8 concurrent streams: the GETs
              above and uploads of up to 200 kB, flow control honoured;
              a stream a GOAWAY or REFUSED_STREAM says was not processed
              is sent again on a new connection (RFC 9113 8.7)
  ws          WebSocket sessions (plain and TLS) through weir to
              tests/origin/ws_origin.py: 5 to 30 text and binary messages
              of up to 64 kB, each echo checked, then the close handshake

Faults: SIGHUP to the master every --reload seconds, SIGUSR2 every
--upgrade seconds (the new master takes over; the old one drains and
exits; no HUP is sent while an upgrade is under way).

Every 10 s it samples the RSS and open fds of the master and of each of
its workers, the process count, and the slab and TLS memory gauges. At the
end it stops weir gracefully (QUIT) so LeakSanitizer runs in every process,
and prints a summary:

  - sanitizer reports in weir's stderr and error log: must be 0
  - requests per kind, ok and failed; a failure is explained only when it
    is a request on a reused keep-alive connection that got no byte of an
    answer within 3 s after a HUP or USR2 (the race every HTTP/1.1 client
    retries, RFC 9112 9.3.1): every other failure fails the soak, listed
    (an HTTP/2 stream counts once it is answered, a WebSocket session once
    it is closed cleanly)
  - upgrades that did not complete: must be 0
  - weir_errors_total by kind (drain_cut explains slow clients cut by a
    drain; none is expected with timeouts.drain at 30 s)
  - master RSS and fds, mean worker RSS and fds, worker count: the first
    and the last 5 minutes (a third of the run when it is shorter)
    compared; fds must not grow, RSS within 10% + 4 MB

and exits 0 when all hold, 1 otherwise.
"""
import argparse
import asyncio
import hashlib
import json
import multiprocessing as mp
import os
import random
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import websockets

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
from h2util import split_goaway  # noqa: E402
ORIGIN_PY = os.path.join(REPO, "tests", "origin", "origin.py")
WS_ORIGIN_PY = os.path.join(REPO, "tests", "origin", "ws_origin.py")
SANITIZER = re.compile(r"ERROR: AddressSanitizer|runtime error:|ERROR: LeakSanitizer|SUMMARY: \w+Sanitizer")
SAMPLE_EVERY = 10
# a failure this soon after a signal, on a reused connection, with no byte
# of an answer, is the keep-alive close race
RACE_WINDOW = 3.0


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


# ---------------------------------------------------------------------------
# a small HTTP/1.1 client on raw sockets: what is checked is what arrived
# ---------------------------------------------------------------------------

class Failed(Exception):
    def __init__(self, what, got):
        super().__init__(what)
        self.what = what
        self.got = got  # bytes of the answer received before the failure


class Conn:
    def __init__(self, port, tls_ctx=None, rcvbuf=None, timeout=30):
        s = socket.socket()
        if rcvbuf:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        s.settimeout(timeout)
        try:
            s.connect(("127.0.0.1", port))
            if tls_ctx:
                s = tls_ctx.wrap_socket(s, server_hostname="localhost")
        except (OSError, ssl.SSLError) as e:
            s.close()
            raise Failed("connect: %s" % e.__class__.__name__ + (" %s" % e.errno if getattr(e, "errno", None) else ""), 0)
        self.s = s
        self.buf = b""
        self.got = 0
        self.served = 0  # answers read on this connection

    def close(self):
        try:
            self.s.close()
        except OSError:
            pass

    def send(self, data):
        try:
            self.s.sendall(data)
        except (OSError, ssl.SSLError) as e:
            raise Failed("send: %s" % e.__class__.__name__, self.got)

    def _more(self, n=65536):
        try:
            d = self.s.recv(n)
        except socket.timeout:
            raise Failed("timeout", self.got)
        except (OSError, ssl.SSLError) as e:
            raise Failed("recv: %s" % e.__class__.__name__, self.got)
        if not d:
            raise Failed("closed", self.got)
        self.got += len(d)
        self.buf += d

    def _line(self):
        while b"\r\n" not in self.buf:
            if len(self.buf) > 65536:
                raise Failed("line too long", self.got)
            self._more()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n, keep, slow=None):
        """<n> body bytes; returns them when <keep>, else their count."""
        out, have = [], 0
        while have < n:
            if not self.buf:
                if slow:
                    time.sleep(slow[1])
                self._more(slow[0] if slow else 1 << 20)
            take = self.buf[: n - have]
            self.buf = self.buf[len(take):]
            have += len(take)
            if keep:
                out.append(take)
        return b"".join(out) if keep else have

    def response(self, method="GET", keep=True, slow=None):
        """(status, headers dict, body or its length, the connection stays
        open)."""
        self.got = 0
        line = self._line()
        m = re.match(rb"HTTP/1\.1 (\d{3}) ", line + b" ")
        if not m:
            raise Failed("bad status line %r" % line[:40], self.got)
        status = int(m.group(1))
        headers = {}
        while True:
            h = self._line()
            if not h:
                break
            k, _, v = h.partition(b":")
            headers[k.strip().lower().decode()] = v.strip().decode("latin-1")
        close = "close" in headers.get("connection", "").lower()
        if method == "HEAD" or status in (204, 304):
            body = b"" if keep else 0
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            parts = []
            while True:
                size = int(self._line().split(b";")[0], 16)
                if size == 0:
                    while self._line():
                        pass
                    break
                parts.append(self._exact(size, True))
                if self._line():
                    raise Failed("chunk without CRLF", self.got)
            body = b"".join(parts)
            body = body if keep else len(body)
        elif "content-length" in headers:
            body = self._exact(int(headers["content-length"]), keep, slow)
        else:
            parts = []
            try:
                while True:
                    self._more()
                    parts.append(self.buf)
                    self.buf = b""
            except Failed as e:
                if e.what != "closed":
                    raise
            body = b"".join(parts)
            close = True
        self.served += 1
        return status, headers, body, not close


def request_bytes(method, target, headers=(), body=None, chunked=False):
    lines = ["%s %s HTTP/1.1" % (method, target), "Host: localhost"]
    lines += ["%s: %s" % h for h in headers]
    if body is not None:
        lines.append("Transfer-Encoding: chunked" if chunked else "Content-Length: %d" % len(body))
    head = ("\r\n".join(lines) + "\r\n\r\n").encode()
    if body is None:
        return head
    if not chunked:
        return head + body
    out = [head]
    for i in range(0, len(body), 65536):
        part = body[i:i + 65536]
        out.append(b"%x\r\n" % len(part) + part + b"\r\n")
    out.append(b"0\r\n\r\n")
    return b"".join(out)


# ---------------------------------------------------------------------------
# the load: one process per kind, each loops until <end> and returns its
# counts and its failures
# ---------------------------------------------------------------------------

def tls_context(ca, alpn="http/1.1"):
    ctx = ssl.create_default_context(cafile=ca)
    ctx.set_alpn_protocols([alpn])
    return ctx


def check(cond, what):
    if not cond:
        raise Failed(what, -1)


def simple_get(rng):
    kind = rng.randrange(4)
    if kind == 0:
        return "/", lambda st, b: check(st == 200 and b == b"hello from origin\n", "bad answer to /")
    if kind == 1:
        n = rng.randrange(0, 65536)
        return "/bytes/%d" % n, lambda st, b: check(st == 200 and b == b"x" * n, "bad /bytes/%d" % n)
    if kind == 2:
        n = rng.randrange(1, 20000)
        return "/chunked/%d" % n, lambda st, b: check(st == 200 and b == b"x" * n, "bad /chunked/%d" % n)
    return "/echo", lambda st, b: check(st == 200 and json.loads(b)["method"] == "GET", "bad /echo")


def h2_request(rng):
    """(method, path, body, verify(status, body)) of one stream: one of
    simple_get's, or an upload (one in five)."""
    if rng.random() < 0.2:
        body = rng.randbytes(int(1000 * 200 ** rng.random()))
        digest = hashlib.sha256(body).hexdigest()

        def verify(st, b):
            check(st == 200, "h2 upload answered %d" % st)
            j = json.loads(b)
            check(j["body_len"] == len(body) and j["body_sha256"] == digest, "h2 upload body arrived altered")
        return ("POST", "/upload", body, verify)
    target, verify = simple_get(rng)
    return ("GET", target, None, verify)


class H2Conn:
    """An HTTP/2 client connection (the h2 library's state machine on a
    blocking socket): exchange() sends a batch of streams and reads until
    every one is answered or the connection says it will not be."""

    def __init__(self, port, tls_ctx=None):
        self.conn = Conn(port, tls_ctx)  # the socket, connected (Failed if not)
        self.s, self.tls = self.conn.s, tls_ctx is not None
        if self.tls and self.s.selected_alpn_protocol() != "h2":
            self.close()
            raise Failed("ALPN chose %r, not h2" % self.s.selected_alpn_protocol(), 0)
        self.c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        self.c.initiate_connection()
        self.last_id = None  # a GOAWAY's last stream id
        self.gone = False    # no more streams on this connection
        self.error = "closed"
        self.streams = {}
        self.rbuf = b""
        self.flush()

    def close(self):
        self.conn.close()

    def flush(self):
        data = self.c.data_to_send()
        if data:
            try:
                self.s.sendall(data)
            except (OSError, ssl.SSLError) as e:
                self.gone = True
                raise Failed("h2 send: %s" % e.__class__.__name__, 0)

    def pump(self):
        try:
            data = self.s.recv(65536)
        except socket.timeout:
            raise Failed("h2 timeout", 0)
        except (OSError, ssl.SSLError) as e:
            data = b""
            self.error = e.__class__.__name__
        if not data:
            self.gone = True
            return False
        try:
            events = self.c.receive_data(self.strip_goaway(data))
        except h2.exceptions.ProtocolError as e:
            raise Failed("h2 protocol error from weir: %s" % e, 0)
        for ev in events:
            st = self.streams.get(getattr(ev, "stream_id", None))
            if isinstance(ev, h2.events.ResponseReceived) and st is not None:
                st["status"] = int(dict(ev.headers)[b":status"])
            elif isinstance(ev, h2.events.DataReceived):
                if st is not None:
                    st["body"] += ev.data
                try:
                    self.c.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                except h2.exceptions.StreamClosedError:
                    pass
            elif isinstance(ev, h2.events.StreamEnded) and st is not None:
                st["done"] = True
            elif isinstance(ev, h2.events.StreamReset) and st is not None:
                st["reset"] = ev.error_code
        try:
            self.flush()
        except Failed:
            pass  # what was read still counts; the next send finds it gone
        return True

    def strip_goaway(self, data):
        """The whole frames read but a GOAWAY, which is noted (the streams
        it took are still finished: split_goaway)."""
        frames, self.rbuf, goaways = split_goaway(self.rbuf + data)
        if goaways:
            self.last_id = goaways[-1][0]
            self.gone = True
        return frames

    def send_body(self, sid, body):
        off = 0
        while off < len(body):
            n = min(self.c.local_flow_control_window(sid), self.c.max_outbound_frame_size, len(body) - off)
            if n <= 0:
                self.flush()
                # a GOAWAY does not end a stream it took: its body goes on
                if not self.pump() or (self.last_id is not None and sid > self.last_id):
                    return
                continue
            self.c.send_data(sid, body[off:off + n], end_stream=off + n == len(body))
            off += n
        self.flush()

    def exchange(self, batch):
        """[(request, body bytes, or None when it was not processed)]; a
        stream that the server took and did not answer raises Failed."""
        sent = []
        for req in batch:
            method, path, body, _ = req
            if self.gone:
                sent.append((req, None))
                continue
            sid = self.c.get_next_available_stream_id()
            hdrs = [(":method", method), (":scheme", "https" if self.tls else "http"),
                    (":authority", "localhost"), (":path", path)]
            if body is not None:
                hdrs.append(("content-length", str(len(body))))
            self.streams[sid] = {"status": None, "body": b"", "done": False, "reset": None}
            try:
                self.c.send_headers(sid, hdrs, end_stream=body is None)
                self.flush()
                if body is not None:
                    self.send_body(sid, body)
            except h2.exceptions.StreamClosedError:
                pass  # reset by weir meanwhile: judged below
            sent.append((req, sid))
        while any(sid is not None and not self.streams[sid]["done"] and self.streams[sid]["reset"] is None
                  for _, sid in sent):
            if not self.pump():
                break
        out = []
        for req, sid in sent:
            if sid is None:
                out.append((req, None))
                continue
            st = self.streams.pop(sid)
            if st["done"] and st["reset"] is None:
                req[3](st["status"], st["body"])
                out.append((req, len(st["body"])))
            elif st["reset"] == h2.errors.ErrorCodes.REFUSED_STREAM or \
                    (self.last_id is not None and sid > self.last_id):
                out.append((req, None))  # RFC 9113 8.7: not processed
            else:
                raise Failed("h2 stream %d: %s after %d bytes (GOAWAY last id %s, %s)"
                             % (sid, "reset %s" % st["reset"] if st["reset"] is not None else "left unanswered",
                                len(st["body"]), self.last_id, self.error), len(st["body"]))
        return out


async def ws_session(ports, tls_ctx, rng):
    """One WebSocket through weir to the echo origin: messages of random
    kind and size, each echo compared, then the close handshake. Returns
    the bytes echoed."""
    port = ports["tls" if tls_ctx else "plain"]
    url = "%s://127.0.0.1:%d/ws/echo" % ("wss" if tls_ctx else "ws", port)
    n = 0
    try:
        async with websockets.connect(url, ssl=tls_ctx, max_size=1 << 20, open_timeout=10,
                                      close_timeout=10) as ws:
            for _ in range(rng.randrange(5, 31)):
                size = int(64000 ** rng.random())
                msg = rng.randbytes(size) if rng.random() < 0.5 else "t" * size
                await ws.send(msg)
                got = await asyncio.wait_for(ws.recv(), 10)
                check(got == msg, "ws echo of %d %s differs" % (size, type(msg).__name__))
                n += size
                await asyncio.sleep(rng.random() * 0.1)
            await ws.close()
            check(ws.close_code == 1000, "ws closed with %s" % ws.close_code)
    except (OSError, ssl.SSLError, EOFError, websockets.WebSocketException, asyncio.TimeoutError) as e:
        raise Failed("ws: %s %s" % (e.__class__.__name__, e), n)
    return n


class Loop:
    def __init__(self, kind, end, ports, ca, seed):
        self.kind, self.end, self.ports, self.ca = kind, end, ports, ca
        self.rng = random.Random(seed)
        self.ok = 0
        self.bytes = 0
        self.failures = []  # (time, what, reused, got)
        self.notes = {}     # what else a kind counts, for the summary
        self.ctx = tls_context(ca) if ca else None
        self.ctx_h2 = tls_context(ca, "h2") if ca else None

    def note(self, what):
        self.notes[what] = self.notes.get(what, 0) + 1

    def fail(self, e, reused):
        self.failures.append((time.time(), e.what, reused, e.got))

    def persistent(self, tls_share, one, close_share, pause):
        """Requests by <one>(conn) -> body bytes, with a keep-alive
        connection (TLS for <tls_share> of them) kept until the answer
        says close or, at random, for <close_share> of the requests."""
        conn = None
        while time.time() < self.end:
            reused = False
            try:
                if conn is None:
                    tls = self.rng.random() < tls_share
                    conn = Conn(self.ports["tls" if tls else "plain"], self.ctx if tls else None)
                reused = conn.served > 0
                n, keep = one(conn)
                self.ok += 1
                self.bytes += n
                if not keep or self.rng.random() < close_share:
                    conn.close()
                    conn = None
            except Failed as e:
                self.fail(e, reused)
                if conn:
                    conn.close()
                conn = None
            time.sleep(self.rng.random() * pause)
        if conn:
            conn.close()

    def get_one(self, conn):
        target, verify = simple_get(self.rng)
        conn.send(request_bytes("GET", target))
        st, _, body, keep = conn.response()
        verify(st, body)
        return len(body), keep

    def upload_one(self, conn):
        n = int(1000 * 2000 ** self.rng.random())
        body = self.rng.randbytes(n)
        conn.send(request_bytes("POST", "/upload", body=body, chunked=self.rng.random() < 0.5))
        st, _, rb, keep = conn.response()
        check(st == 200, "upload answered %d" % st)
        j = json.loads(rb)
        check(j["body_len"] == n and j["body_sha256"] == hashlib.sha256(body).hexdigest(),
              "upload body arrived altered")
        return n, keep

    def newconn(self, tls):
        while time.time() < self.end:
            conn = None
            try:
                conn = Conn(self.ports["tls" if tls else "plain"], self.ctx if tls else None)
                target, verify = simple_get(self.rng)
                conn.send(request_bytes("GET", target, [("Connection", "close")]))
                st, _, body, keep = conn.response()
                verify(st, body)
                check(not keep, "no Connection: close in the answer to one")
                self.ok += 1
                self.bytes += len(body)
            except Failed as e:
                self.fail(e, False)
            finally:
                if conn:
                    conn.close()
            time.sleep(self.rng.random() * 0.05)

    def download(self):
        while time.time() < self.end:
            conn = None
            try:
                tls = self.rng.random() < 0.3
                conn = Conn(self.ports["tls" if tls else "plain"], self.ctx if tls else None)
                n = self.rng.randrange(1, 16) << 20
                conn.send(request_bytes("GET", "/big/%d" % n))
                st, _, got, _ = conn.response(keep=False)
                check(st == 200 and got == n, "download: %d, %d of %d bytes" % (st, got, n))
                self.ok += 1
                self.bytes += n
            except Failed as e:
                self.fail(e, False)
            finally:
                if conn:
                    conn.close()
            time.sleep(self.rng.random() * 0.5)

    def slow(self):
        while time.time() < self.end:
            conn = None
            what = self.rng.randrange(3)
            try:
                if what == 0:  # a head a byte at a time, 20 ms apart (about 1.5 s)
                    conn = Conn(self.ports["plain"])
                    for b in request_bytes("GET", "/bytes/100", [("Connection", "close")]):
                        conn.send(bytes([b]))
                        time.sleep(0.02)
                    st, _, body, _ = conn.response()
                    check(st == 200 and body == b"x" * 100, "slow head: %d" % st)
                elif what == 1:  # a 20 kB body 100 bytes per 10 ms (2 s)
                    conn = Conn(self.ports["plain"])
                    body = self.rng.randbytes(20000)
                    data = request_bytes("POST", "/upload", [("Connection", "close")], body=body)
                    for i in range(0, len(data), 100):
                        conn.send(data[i:i + 100])
                        time.sleep(0.01)
                    st, _, rb, _ = conn.response()
                    check(st == 200 and json.loads(rb)["body_sha256"] == hashlib.sha256(body).hexdigest(),
                          "slow body: %d" % st)
                else:  # 2 MB read 4 kB per 5 ms through a small window (about 3 s)
                    conn = Conn(self.ports["plain"], rcvbuf=8192)
                    conn.send(request_bytes("GET", "/bytes/2000000", [("Connection", "close")]))
                    st, _, got, _ = conn.response(keep=False, slow=(4096, 0.005))
                    check(st == 200 and got == 2000000, "slow reader: %d, %d bytes" % (st, got))
                self.ok += 1
            except Failed as e:
                self.fail(e, False)
            finally:
                if conn:
                    conn.close()

    def h2(self):
        todo = []  # requests not processed by a connection that went away
        while time.time() < self.end:
            conn = None
            try:
                tls = self.rng.random() < 0.5
                conn = H2Conn(self.ports["tls" if tls else "plain"], self.ctx_h2 if tls else None)
                for _ in range(self.rng.randrange(1, 40)):
                    if time.time() >= self.end:
                        break
                    batch = todo or [h2_request(self.rng) for _ in range(self.rng.randrange(1, 9))]
                    todo = []
                    for req, n in conn.exchange(batch):
                        if n is None:
                            todo.append(req)  # not processed: sent again
                            self.note("streams sent again")
                        else:
                            self.ok += 1
                            self.bytes += n
                    if conn.gone:
                        break
                    time.sleep(self.rng.random() * 0.05)
            except Failed as e:
                self.fail(e, False)
                todo = []
            finally:
                if conn:
                    if conn.last_id is not None:
                        self.note("GOAWAYs")
                    conn.close()

    def ws(self):
        while time.time() < self.end:
            tls = self.rng.random() < 0.3
            try:
                n = asyncio.run(ws_session(self.ports, self.ctx if tls else None, self.rng))
                self.ok += 1
                self.bytes += n
            except Failed as e:
                self.fail(e, False)
            time.sleep(self.rng.random() * 0.2)

    def run(self):
        {"h2": self.h2, "ws": self.ws,
         "keepalive": lambda: self.persistent(0, self.get_one, 0.01, 0.05),
         "tls": lambda: self.persistent(1, self.get_one, 0.01, 0.05),
         "newconn": lambda: self.newconn(False), "tls_newconn": lambda: self.newconn(True),
         "upload": lambda: self.persistent(0.3, self.upload_one, 0.2, 0.2),
         "download": self.download, "slow": self.slow}[self.kind]()
        return {"kind": self.kind, "ok": self.ok, "bytes": self.bytes, "failures": self.failures,
                "notes": self.notes}


def load_main(kind, end, ports, ca, seed, q):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        q.put(Loop(kind, end, ports, ca, seed).run())
    except Exception as e:  # a bug of the soak itself: reported, not hidden
        q.put({"kind": kind, "ok": 0, "bytes": 0, "failures": [(time.time(), "soak client crashed: %r" % e, False, -1)]})


# (kind, processes)
LOADS = [("keepalive", 2), ("newconn", 1), ("tls", 1), ("tls_newconn", 1), ("upload", 1), ("download", 1),
         ("slow", 2), ("h2", 1), ("ws", 1)]


# ---------------------------------------------------------------------------
# weir, the origin, the faults and the samples
# ---------------------------------------------------------------------------

def read_pid(path):
    try:
        with open(path) as f:
            return int(f.read().strip() or 0) or None
    except (OSError, ValueError):
        return None


def proc_rss_kb(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def proc_fds(pid):
    try:
        return len(os.listdir("/proc/%d/fd" % pid))
    except OSError:
        return None


def alive(pid):
    """<pid> runs (a zombie does not)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
    except OSError:
        return False
    return st[st.rindex(")") + 2] != "Z"


def children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def group_pids(pgid):
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    st = f.read()
                fields = st[st.rindex(")") + 2:].split()
                if int(fields[2]) == pgid and fields[0] != "Z":
                    out.append(int(d))
            except (OSError, ValueError):
                pass
    return out


def metrics(port):
    try:
        c = Conn(port, timeout=5)
        c.send(request_bytes("GET", "/metrics", [("Connection", "close")]))
        st, _, body, _ = c.response()
        c.close()
    except Failed:
        return {}
    out = {}
    for line in body.decode().splitlines():
        if line and not line.startswith("#"):
            k, _, v = line.rpartition(" ")
            try:
                out[k] = float(v)
            except ValueError:
                pass
    return out


def write_config(d, ports, cert, key):
    text = """workers = 2;
pid_file = "%(d)s/weir.pid";
log = { error = "%(d)s/error.log"; access = "%(d)s/access.log"; level = "notice"; };
stats = { listen = "127.0.0.1:%(stats)d"; };
listeners = (
  { address = "127.0.0.1:%(plain)d"; },
  { address = "127.0.0.1:%(tls)d"; tls = { certificates = ( { cert = "%(cert)s"; key = "%(key)s"; } ); }; }
);
upstreams = ( { name = "o"; keepalive = 16; servers = ( { address = "127.0.0.1:%(origin)d"; } ); },
              { name = "w"; servers = ( { address = "127.0.0.1:%(ws_origin)d"; } ); } );
routes = ( { path = "/ws/"; upstream = "w"; }, { path = "/"; upstream = "o"; } );
limits = { body_size = "64m"; };
""" % dict(ports, d=d, cert=cert, key=key)
    path = os.path.join(d, "weir.conf")
    with open(path, "w") as f:
        f.write(text)
    return path


def make_cert(d):
    def openssl(*a):
        subprocess.run(["openssl"] + list(a), cwd=d, check=True, capture_output=True, timeout=60)
    ec = ["ec", "-pkeyopt", "ec_paramgen_curve:P-256"]
    openssl("req", "-x509", "-newkey", *ec, "-nodes", "-days", "2", "-subj", "/CN=soak CA",
            "-keyout", "ca.key", "-out", "ca.pem")
    openssl("req", "-newkey", *ec, "-nodes", "-subj", "/CN=localhost", "-keyout", "leaf.key", "-out", "leaf.csr")
    with open(os.path.join(d, "ext"), "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", "leaf.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-days", "2", "-extfile", "ext", "-out", "leaf.pem")
    return [os.path.join(d, x) for x in ("ca.pem", "leaf.pem", "leaf.key")]


def wait_for(pred, timeout, step=0.05):
    end = time.time() + timeout
    while time.time() < end:
        v = pred()
        if v:
            return v
        time.sleep(step)
    return None


def sanitizer_lines(d):
    found = []
    for name in ("weir.stderr", "error.log"):
        try:
            with open(os.path.join(d, name), errors="replace") as f:
                for line in f:
                    if SANITIZER.search(line):
                        found.append("%s: %s" % (name, line.rstrip()))
        except OSError:
            pass
    return found


def mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weir", default=os.path.join(REPO, "build", "asan", "weir"))
    ap.add_argument("--time", type=float, default=float(os.environ.get("SOAK_TIME", 1800)))
    ap.add_argument("--reload", type=float, default=float(os.environ.get("SOAK_RELOAD", 10)))
    ap.add_argument("--upgrade", type=float, default=float(os.environ.get("SOAK_UPGRADE", 300)))
    ap.add_argument("--dir", default=None)
    a = ap.parse_args()
    if not os.access(a.weir, os.X_OK):
        raise SystemExit("soak: %s not found (make asan)" % a.weir)
    d = a.dir or tempfile.mkdtemp(prefix="weir-soak.")
    os.makedirs(d, exist_ok=True)
    binary = os.path.join(d, "weir")
    shutil.copy2(a.weir, binary)
    ca, cert, key = make_cert(d)
    ports = {"plain": free_port(), "tls": free_port(), "stats": free_port(), "origin": free_port(),
             "ws_origin": free_port()}
    conf = write_config(d, ports, cert, key)
    pid_file = os.path.join(d, "weir.pid")
    print("soak: %s for %.0f s, HUP every %.0f s, USR2 every %.0f s; files in %s"
          % (a.weir, a.time, a.reload, a.upgrade, d), flush=True)

    origin = subprocess.Popen([sys.executable, ORIGIN_PY, "--listen", "127.0.0.1:%d" % ports["origin"],
                               "--name", "soak"], stdout=subprocess.PIPE,
                              stderr=open(os.path.join(d, "origin.stderr"), "wb"), start_new_session=True)
    if not origin.stdout.readline().startswith(b"ready"):
        raise SystemExit("soak: the origin did not start")
    ws_origin = subprocess.Popen([sys.executable, WS_ORIGIN_PY, "--listen", "127.0.0.1:%d" % ports["ws_origin"]],
                                 stdout=subprocess.PIPE, stderr=open(os.path.join(d, "ws_origin.stderr"), "wb"),
                                 start_new_session=True)
    if not ws_origin.stdout.readline().startswith(b"ready"):
        raise SystemExit("soak: the WebSocket origin did not start")
    env = dict(os.environ)
    # a small quarantine: ASan keeps freed blocks poisoned, unreused, up
    # to this many MB (256 by default), and a reload frees about 400 kB in
    # the master, so its RSS would climb for 600 reloads (measured: +24 MB
    # in 120 reloads with 32 MB, +0.1 MB over the last 60 of them with 1
    # MB; the normal build: +1 MB over the first 100, +0 the next 100). At
    # 4 MB it is full within ten reloads and a master's RSS can be held
    # to flat; a use after free within 4 MB of later frees is still caught
    env.setdefault("ASAN_OPTIONS", "detect_leaks=1:halt_on_error=1:abort_on_error=0:quarantine_size_mb=4")
    env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
    weir = subprocess.Popen([binary, "-c", conf], cwd=d, env=env, stdin=subprocess.DEVNULL,
                            stdout=open(os.path.join(d, "weir.stdout"), "wb"),
                            stderr=open(os.path.join(d, "weir.stderr"), "wb"), start_new_session=True)
    pgid = weir.pid
    procs, q = [], mp.Queue()
    samples, events, upgrades = [], [], []  # events: (time, "HUP"|"USR2")
    results = []
    gone = []  # when the master went away unasked
    try:
        if not wait_for(lambda: metrics(ports["stats"]) and read_pid(pid_file), 60):
            raise SystemExit("soak: weir did not start")
        t0 = time.time()
        end = t0 + a.time
        for kind, n in LOADS:
            for i in range(n):
                p = mp.Process(target=load_main, args=(kind, end, ports, ca, hash((kind, i)) & 0xffffffff, q))
                p.start()
                procs.append(p)
        next_sample, next_hup, next_usr2 = t0, t0 + a.reload, t0 + a.upgrade
        upgrading = None  # (old master, when)
        while time.time() < end:
            now = time.time()
            master = read_pid(pid_file)
            if upgrading:
                old, since = upgrading
                oldbin = os.path.exists(pid_file + ".oldbin")
                if master and master != old and not oldbin and not alive(old):
                    upgrades.append((since, "ok", now - since))
                    print("soak: %5.0fs upgrade done in %.1fs: master %d -> %d" % (now - t0, now - since, old, master),
                          flush=True)
                    upgrading = None
                elif now - since > 90:
                    upgrades.append((since, "did not complete in 90 s (master %s, oldbin %s)" % (master, oldbin), 0))
                    print("soak: %5.0fs upgrade did not complete" % (now - t0), flush=True)
                    upgrading = None
            if now >= next_sample:
                next_sample += SAMPLE_EVERY
                m = metrics(ports["stats"])
                ws = children(master) if master else []
                samples.append({
                    "t": now - t0, "master": master, "master_rss": proc_rss_kb(master) if master else None,
                    "master_fds": proc_fds(master) if master else None,
                    "worker_rss": [proc_rss_kb(w) for w in ws], "worker_fds": [proc_fds(w) for w in ws],
                    "nprocs": len(group_pids(pgid)),
                    "slab_in_use": m.get("weir_slab_bytes_in_use"), "slab_free": m.get("weir_slab_bytes_free"),
                    "tls_held": m.get("weir_tls_memory_bytes_held"),
                    "conns": m.get("weir_client_connections_active"),
                    "load": os.getloadavg()[0],
                })
            if now >= next_usr2 and not upgrading and master:
                next_usr2 += a.upgrade
                os.kill(master, signal.SIGUSR2)
                events.append((now, "USR2"))
                upgrading = (master, now)
            elif now >= next_hup:
                next_hup += a.reload
                if not upgrading and master:
                    os.kill(master, signal.SIGHUP)
                    events.append((now, "HUP"))
            weir.poll()  # reaps the first master once an upgrade has replaced it
            if not upgrading and (not master or not alive(master)):
                print("soak: %5.0fs the master is gone (pid file: %s, first master's exit: %s)"
                      % (now - t0, master, weir.returncode), flush=True)
                gone.append(now - t0)
                break
            time.sleep(0.1)
        if upgrading:
            wait_for(lambda: not os.path.exists(pid_file + ".oldbin"), 90)
        for _ in procs:
            try:
                results.append(q.get(timeout=120))
            except Exception:
                results.append({"kind": "?", "ok": 0, "bytes": 0,
                                "failures": [(time.time(), "a load process gave no result", False, -1)]})
        for p in procs:
            p.join(10)
        final = metrics(ports["stats"])
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
        master = read_pid(pid_file)
        if master:
            try:
                os.kill(master, signal.SIGQUIT)  # graceful: LeakSanitizer runs at each exit
            except ProcessLookupError:
                pass
        wait_for(lambda: not group_pids(pgid), 60, 0.2)
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        weir.poll()
        for o in (origin, ws_origin):
            o.terminate()
            o.wait(10)
    summarize(a, d, t0, results, events, upgrades, samples, final, gone)


def explained(f, events):
    t, what, reused, got = f
    return reused and got == 0 and any(0 <= t - et <= RACE_WINDOW for et, _ in events)


def error_log_lines(d):
    """The error log's [error] and [warn] lines, counted by message with
    numbers masked."""
    counts = {}
    try:
        with open(os.path.join(d, "error.log"), errors="replace") as f:
            for line in f:
                m = re.match(r"\S+ \[(error|warn|crit|alert)\] (.*)", line)
                if m:
                    key = "[%s] %s" % (m.group(1), re.sub(r"\d+", "N", m.group(2)))
                    counts[key] = counts.get(key, 0) + 1
    except OSError:
        pass
    return counts


def summarize(a, d, t0, results, events, upgrades, samples, final, gone):
    ok_all = not gone
    if gone:
        print("the master went away unasked at %.0f s" % gone[0])
    print("\n==== soak summary (%s, %.0f s, files in %s) ====" % (os.path.basename(a.weir), a.time, d))
    reports = sanitizer_lines(d)
    print("sanitizer reports: %d" % len(reports))
    for r in reports[:20]:
        print("  " + r)
    ok_all &= not reports

    nhup = sum(1 for _, e in events if e == "HUP")
    nusr2 = sum(1 for _, e in events if e == "USR2")
    bad_up = [u for u in upgrades if u[1] != "ok"]
    print("faults: %d reloads (HUP), %d binary upgrades (USR2): %d completed (%s s), %d did not"
          % (nhup, nusr2, len(upgrades) - len(bad_up),
             ", ".join("%.1f" % u[2] for u in upgrades if u[1] == "ok") or "-", len(bad_up)))
    for u in bad_up:
        print("  upgrade at %.0fs: %s" % (u[0] - t0, u[1]))
    ok_all &= not bad_up and len(upgrades) == nusr2

    by_kind = {}
    for r in results:
        k = by_kind.setdefault(r["kind"], {"ok": 0, "bytes": 0, "failures": [], "notes": {}})
        for what, n in r.get("notes", {}).items():
            k["notes"][what] = k["notes"].get(what, 0) + n
        k["ok"] += r["ok"]
        k["bytes"] += r["bytes"]
        k["failures"] += r["failures"]
    print("requests:        %10s %10s %10s %12s" % ("ok", "explained", "failed", "MB"))
    unexplained = []
    tot = [0, 0, 0]
    for kind, _ in LOADS:
        k = by_kind.get(kind, {"ok": 0, "bytes": 0, "failures": []})
        ex = [f for f in k["failures"] if explained(f, events)]
        un = [f for f in k["failures"] if not explained(f, events)]
        unexplained += [(kind,) + f for f in un]
        tot = [tot[0] + k["ok"], tot[1] + len(ex), tot[2] + len(un)]
        print("  %-13s %10d %10d %10d %12.1f" % (kind, k["ok"], len(ex), len(un), k["bytes"] / 1e6))
    print("  %-13s %10d %10d %10d   (%.0f requests/s)" % ("total", tot[0], tot[1], tot[2], tot[0] / a.time))
    for kind, _ in LOADS:
        notes = by_kind.get(kind, {}).get("notes")
        if notes:
            print("  %s: %s" % (kind, ", ".join("%d %s" % (n, what) for what, n in sorted(notes.items()))))
    if tot[1]:
        print("  explained: a reused keep-alive connection closed with no byte of an answer "
              "within %.0f s after a HUP or USR2 (clients retry these)" % RACE_WINDOW)
    for kind, t, what, reused, got in unexplained[:30]:
        near = min(((t - et, e) for et, e in events if t >= et), default=(None, None))
        print("  FAILED %-11s at %7.1fs: %s (reused=%s, answer bytes=%s, last signal %s)"
              % (kind, t - t0, what, reused, got,
                 "%s %.1fs before" % (near[1], near[0]) if near[0] is not None else "none"))
    ok_all &= not unexplained and tot[0] > 0

    logged = error_log_lines(d)
    died = {k: v for k, v in logged.items() if "was killed by signal" in k or "exited with code" in k}
    print("error log: %d [error]/[warn] lines, %d of a worker that died"
          % (sum(logged.values()), sum(died.values())))
    for k, v in sorted(logged.items(), key=lambda kv: -kv[1])[:10]:
        print("  %6d  %s" % (v, k[:150]))
    ok_all &= not died

    errs = {re.search(r'kind="([^"]+)"', k).group(1): v for k, v in final.items()
            if k.startswith("weir_errors_total{") and v}
    print("weir_errors_total: %s" % (", ".join("%s=%d" % kv for kv in sorted(errs.items())) or "none"))

    w = min(300.0, a.time / 3)
    # the sample at 0 s is of workers that have served nothing yet
    first = [s for s in samples if SAMPLE_EVERY / 2 < s["t"] < w + SAMPLE_EVERY / 2]
    last = [s for s in samples if s["t"] >= a.time - w]
    print("resources, first %.0f s vs last %.0f s (%d and %d samples every %d s):"
          % (w, w, len(first), len(last), SAMPLE_EVERY))

    def row(name, f, unit, tol_pct=None, tol_abs=0, exact=False):
        x, y = mean(f(s) for s in first), mean(f(s) for s in last)
        if tol_pct is None:
            print("  %-22s %12.1f %12.1f %-3s" % (name, x, y, unit))
            return True
        good = y <= x + (0.5 if exact else x * tol_pct / 100 + tol_abs)
        print("  %-22s %12.1f %12.1f %-3s %s" % (name, x, y, unit, "flat" if good else "GROWS"))
        return good

    flat = True
    flat &= row("master RSS", lambda s: s["master_rss"], "kB", 10, 4096)
    flat &= row("master fds", lambda s: s["master_fds"], "", 0, 0, exact=True)
    flat &= row("worker RSS (mean)", lambda s: mean(s["worker_rss"]), "kB", 10, 4096)
    # a worker's fds follow the connections it has open; a leak in the
    # master would be inherited by every worker, and the master's are exact
    flat &= row("worker fds (mean)", lambda s: mean(s["worker_fds"]), "", 25, 4)
    flat &= row("weir processes", lambda s: s["nprocs"], "", 0, 2)
    row("slab in use", lambda s: s["slab_in_use"], "B")
    row("slab free", lambda s: s["slab_free"], "B")
    row("TLS memory held", lambda s: s["tls_held"], "B")
    row("client conns active", lambda s: s["conns"], "")
    row("load average (1 min)", lambda s: s["load"], "")
    print("  (the last five rows are for the record: the gauges follow the load and the workers' age")
    print("   (a reload every %.0f s starts new ones), the load average says how busy the machine was)" % a.reload)
    ok_all &= flat and bool(first) and bool(last)

    # An upgrade every 5 minutes gives both windows a master of the same
    # age, so a master that grows with each reload would look the same in
    # both: each master is also held flat over its own life, from 120 s of
    # age (the quarantine full) to its last sample
    print("each master's RSS from 120 s of age to its last sample (reloads meanwhile):")
    by_master = {}
    for s in samples:
        if s["master"] and s["master_rss"]:
            by_master.setdefault(s["master"], []).append(s)
    for pid, ss in by_master.items():
        born = ss[0]["t"]
        settled = [s for s in ss if s["t"] - born >= 120]
        if len(settled) < 3:
            print("  master %d: lived %.0f s, too short to judge" % (pid, ss[-1]["t"] - born))
            continue
        x, y = settled[0]["master_rss"], settled[-1]["master_rss"]
        n = sum(1 for t, e in events if e == "HUP" and settled[0]["t"] <= t - t0 <= settled[-1]["t"])
        good = y <= x * 1.05 + 2048
        print("  master %-8d %8d -> %8d kB over %3.0f s (%d reloads)  %s"
              % (pid, x, y, settled[-1]["t"] - settled[0]["t"], n, "flat" if good else "GROWS"))
        ok_all &= good
    with open(os.path.join(d, "samples.json"), "w") as f:
        json.dump({"samples": samples, "events": [(t - t0, e) for t, e in events]}, f)
    print("soak: %s" % ("PASS" if ok_all else "FAIL"))
    sys.exit(0 if ok_all else 1)


if __name__ == "__main__":
    main()
