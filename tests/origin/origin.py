#!/usr/bin/env python3
"""origin.py: a small, strict HTTP/1.1 origin server for weir's demo and tests.

Principle: it is a real server on raw sockets with its own parser, strict
enough that a request weir should never have forwarded is noticed, and it
writes down every request it received (--log, one JSON line each) so tests
can assert on exactly what reached the origin. It also misbehaves on purpose
on a few paths (/garbage, /bad/..., /stall, ...) so tests can check weir's
answer to a broken upstream.

    origin.py --listen 127.0.0.1:PORT [--name NAME] [--log FILE]

Prints "ready" on stdout once listening ("ready 127.0.0.1:PORT" when PORT was
0 and the kernel chose it). One thread per connection; every wait is bounded.

Endpoints (GET unless said; HEAD works on all and sends no body):
  /                      200 "hello from origin\\n" (also any unknown path)
  /echo[/...]            200 JSON {method, target, version, headers, body_len,
                         body_sha256, origin, conn, seq}
  /echo/slow/MS          the same, after sleeping MS (at most 10 s)
  /status/N              status N; 1xx: an interim N then a final 200;
                         204 and 304 have no body
  /retry-after/N/V       status N with Retry-After: V; V "dateS" is the
                         HTTP-date S seconds from now (S may be negative)
  /bytes/N               N bytes 'x' with Content-Length
  /chunked/N             N bytes 'x' in chunks of 1000
  /close/N               N bytes 'x', no Content-Length, closed after
  /big/N                 N bytes 'x' with Content-Length in 1 MiB writes
  /slow/MS               sleeps MS then 200 "slow\\n"
  /drip/N/MS             chunked, N chunks "tick I\\n" MS apart
  /stall                 never answers; keeps the socket (bounded)
  /stall-body/N          Content-Length N, sends N/2 bytes, then stalls
  /text/N[?...]          N bytes of words (text_body(N)), Content-Type
                         text/html; query: type=, ce= (Content-Encoding),
                         cc= (Cache-Control), etag=, vary=, status=,
                         range=1 (a 206 with Content-Range), rand=1
                         (random_body(N) instead), mode=chunked
                         (4 KiB chunks; ms=M between them) or mode=close
  /cut/N                 Content-Length N, sends N/2 bytes, then closes
  /close-early           reads the request, closes without a byte
  /garbage               "this is not http\\r\\n\\r\\n" and closes
  /bad/two-digit         "HTTP/1.1 20 OK"
  /bad/cl-te             both Content-Length and Transfer-Encoding
  /bad/cl-dup            two different Content-Length headers
  /bad/chunk             invalid chunk size
  /bad/trailing          a valid response followed by the bytes of a second
                         unrequested response; the connection stays open
  /bad/trailing-late/N/MS  N bytes of 'x' (Content-Length), then after MS ms
                         the bytes of an unrequested response; stays open
  /bad/huge-head         a 32 KiB response header
  /upload                reads the whole body: JSON {body_len, body_sha256}
  /head-test             Content-Length 5 "hello" (GET and HEAD)
  /respheaders           hop-by-hop headers, end-to-end headers, 2 Set-Cookie
  /lookalikes            Transfer_Encoding and Content_Length beside a real Content-Length
  /chunked-ext           chunked with chunk extensions and a trailer
  /trailers[?...]        chunked "trailers\n" (body=B instead), its trailer
                         section the request's trailer lines as received
                         and one line per t=NAME:VALUE (big=N: "X-Big: "
                         and N 'v'); type= Content-Type;
                         only=1: 200 trailers-only (Grpc-Status: 0 in the
                         head, Content-Length: 0)
  /http10                an HTTP/1.0 response (not persistent) on a
                         connection this server keeps reading
  /conn-close            answers with Connection: close and closes
  /304cl                 304 with a Content-Length: 100 and (rightly) no body
  /keepalive-then-close  answers keep-alive, closes the socket 50 ms later
  /close-on-next         answers keep-alive; the next request on the same
                         connection is read, logged and answered by a close
  /on/NAMES/REST         REST (e.g. /status/503, /stall) on the origins named
                         (NAMES comma-separated), /echo on every other
  /sleep/MS/REST         REST after MS (at most 10 s)
  /healthz               200 "ok\n", or what /health-set/... last asked for
  /health-set/N          from now on /healthz answers status N (100..599);
                         /health-set/stall: it never answers (bounded)
"""

import argparse
import email.utils
import fcntl
import hashlib
import json
import re
import socket
import struct
import sys
import termios
import threading
import time
import urllib.parse

MAX_HEAD = 64 * 1024
MAX_LINE = 8 * 1024
IDLE_TIMEOUT = 120.0  # an idle client connection is closed after this
STALL_MAX = 300.0  # /stall never keeps a socket longer than this
IO = 1 << 20

TOKEN = rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
REQUEST_LINE = re.compile(rb"^(" + TOKEN + rb") ([!-~]+) HTTP/(1\.[01])$")
HEADER_LINE = re.compile(rb"^(" + TOKEN + rb"):(.*)$", re.S)
BAD_VALUE = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")
CHUNK_LINE = re.compile(
    rb"^([0-9A-Fa-f]{1,15})((?:[ \t]*;[ \t]*" + TOKEN
    + rb"(?:=(?:" + TOKEN + rb"|\"[^\"]*\"))?)*)[ \t]*$")

REASONS = {
    100: "Continue", 103: "Early Hints", 200: "OK", 201: "Created",
    204: "No Content", 301: "Moved Permanently", 302: "Found",
    304: "Not Modified", 400: "Bad Request", 401: "Unauthorized",
    403: "Forbidden", 404: "Not Found", 418: "I'm a teapot",
    429: "Too Many Requests", 500: "Internal Server Error",
    502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout",
}

XBUF = b"x" * IO
stopping = threading.Event()


class BadRequest(Exception):
    pass


class Closed(Exception):
    pass


class Log:
    """Appends one JSON line per request; thread-safe; None = no log."""

    def __init__(self, path):
        self.lock = threading.Lock()
        self.f = open(path, "a", encoding="utf-8") if path else None

    def write(self, entry):
        if not self.f:
            return
        line = json.dumps(entry, separators=(",", ":")) + "\n"
        with self.lock:
            self.f.write(line)
            self.f.flush()


class Request:
    def __init__(self):
        self.method = ""
        self.target = ""
        self.version = ""
        self.headers = []  # [(name, value)] as str (latin-1), received order
        self.chunked = False
        self.length = 0
        self.body_len = 0
        self.body_sha256 = hashlib.sha256().hexdigest()
        self.trailers = []
        self.trailer_raw = b""  # the trailer lines as received

    def get_all(self, name):
        name = name.lower()
        return [v for n, v in self.headers if n.lower() == name]

    def get(self, name):
        vals = self.get_all(name)
        return vals[0] if vals else None

    def wants_close(self):
        tokens = []
        for v in self.get_all("connection"):
            tokens += [t.strip().lower() for t in v.split(",")]
        if self.version == "1.0":
            return "keep-alive" not in tokens
        return "close" in tokens


class Conn:
    """A buffered reader and writer over one accepted socket."""

    def __init__(self, sock, cid):
        self.sock = sock
        self.cid = cid
        self.buf = bytearray()
        self.seq = 0

    def fill(self):
        data = self.sock.recv(IO)
        if not data:
            raise Closed()
        self.buf += data

    def read_head(self):
        """Returns the head bytes (through the empty line), or None when the
        peer closed cleanly between requests."""
        while True:
            a = self.buf.find(b"\n\r\n")
            b = self.buf.find(b"\n\n")
            ends = [(a, 3), (b, 2)]
            ends = [i + n for i, n in ends if i >= 0]
            if ends:
                end = min(ends)
                head = bytes(self.buf[:end])
                del self.buf[:end]
                return head
            if len(self.buf) > MAX_HEAD:
                raise BadRequest("head too large")
            try:
                self.fill()
            except Closed:
                if self.buf:
                    raise BadRequest("closed inside the head")
                return None

    def readline(self):
        while True:
            i = self.buf.find(b"\n")
            if i >= 0:
                line = bytes(self.buf[:i + 1])
                del self.buf[:i + 1]
                if not line.endswith(b"\r\n"):
                    raise BadRequest("bare LF in chunked framing")
                return line[:-2]
            if len(self.buf) > MAX_LINE:
                raise BadRequest("line too long")
            try:
                self.fill()
            except Closed:
                raise BadRequest("closed inside the body")

    def read_exact_into(self, n, sha):
        """Reads <n> body bytes into the hash without keeping them."""
        while n > 0:
            if self.buf:
                take = min(n, len(self.buf))
                sha.update(self.buf[:take])
                del self.buf[:take]
                n -= take
                continue
            data = self.sock.recv(min(n, IO))
            if not data:
                raise BadRequest("closed inside the body")
            sha.update(data)
            n -= len(data)

    def send(self, data):
        self.sock.sendall(data)


def parse_head(head):
    if b"\x00" in head:
        raise BadRequest("NUL in head")
    for i, c in enumerate(head):
        if c == 0x0A and (i == 0 or head[i - 1] != 0x0D):
            raise BadRequest("bare LF")
    lines = head[:-4].split(b"\r\n") if head.endswith(b"\r\n\r\n") else None
    if lines is None:
        raise BadRequest("bad end of head")
    m = REQUEST_LINE.match(lines[0])
    if not m:
        raise BadRequest("bad request line")
    r = Request()
    r.method = m.group(1).decode("latin-1")
    r.target = m.group(2).decode("latin-1")
    r.version = m.group(3).decode("latin-1")
    for line in lines[1:]:
        if line[:1] in (b" ", b"\t"):
            raise BadRequest("obs-fold")
        hm = HEADER_LINE.match(line)
        if not hm:
            raise BadRequest("bad header line")
        value = hm.group(2).strip(b" \t")
        if BAD_VALUE.search(value):
            raise BadRequest("control byte in header value")
        r.headers.append((hm.group(1).decode("latin-1"),
                          value.decode("latin-1")))
    cls = r.get_all("content-length")
    tes = r.get_all("transfer-encoding")
    if r.version == "1.1" and len(r.get_all("host")) != 1:
        raise BadRequest("Host missing or repeated")
    if cls and tes:
        raise BadRequest("both Content-Length and Transfer-Encoding")
    if tes:
        if r.version == "1.0":
            raise BadRequest("Transfer-Encoding in HTTP/1.0")
        if len(tes) != 1 or tes[0].lower() != "chunked":
            raise BadRequest("Transfer-Encoding other than chunked")
        r.chunked = True
    if cls:
        if len(cls) != 1 or not re.fullmatch(r"[0-9]{1,18}", cls[0]):
            raise BadRequest("bad Content-Length")
        r.length = int(cls[0])
    return r


def read_body(c, r):
    sha = hashlib.sha256()
    total = 0
    if r.chunked:
        while True:
            line = c.readline()
            m = CHUNK_LINE.match(line)
            if not m:
                raise BadRequest("bad chunk size line %r" % line[:40])
            size = int(m.group(1), 16)
            if size == 0:
                break
            c.read_exact_into(size, sha)
            total += size
            if c.readline() != b"":
                raise BadRequest("bytes other than CRLF after chunk data")
        while True:  # trailers
            line = c.readline()
            if line == b"":
                break
            hm = HEADER_LINE.match(line)
            if not hm or BAD_VALUE.search(hm.group(2).strip(b" \t")):
                raise BadRequest("bad trailer")
            r.trailer_raw += line + b"\r\n"
            r.trailers.append((hm.group(1).decode("latin-1"),
                               hm.group(2).strip(b" \t").decode("latin-1")))
    elif r.length:
        c.read_exact_into(r.length, sha)
        total = r.length
    r.body_len = total
    r.body_sha256 = sha.hexdigest()


_TEXT = {}


def text_body(n):
    """/text/N's body: words drawn by a generator seeded with N, so a
    compressor has work to do and a test can make the same bytes."""
    if n not in _TEXT:
        words = [b"alpha", b"beta", b"gamma", b"delta", b"<p>", b"</p>", b"weir", b"proxy",
                 b"gateway", b"\n", b"compression", b"streaming", b"0123", b"{\"k\": 1}"]
        x, out = n * 2654435761 % 4294967296 or 1, bytearray()
        while len(out) < n:
            x = (x * 1103515245 + 12345) % 2147483648
            out += words[(x >> 16) % len(words)] + b" "
        if len(_TEXT) > 16:
            _TEXT.clear()
        _TEXT[n] = bytes(out[:n])
    return _TEXT[n]


def random_body(n):
    """/text/N?rand=1's body: bytes no encoder can shrink (a seeded
    generator), so what it makes of a span overflows its buffer."""
    import random
    return random.Random(n).randbytes(n)


def early_body(n):
    """The body /answer-early/N sends: a pattern a cut or a shift shows."""
    pat = bytes(range(251))
    return (pat * (n // 251 + 1))[:n]


class Server:
    def __init__(self, name, log):
        self.name = name
        self.log = log
        self.next_cid = 0
        self.lock = threading.Lock()

    # ---- responses -------------------------------------------------------
    def head_bytes(self, status, headers, reason=None):
        reason = reason if reason is not None else REASONS.get(status, "Status")
        out = ["HTTP/1.1 %d %s\r\n" % (status, reason)]
        for n, v in headers:
            out.append("%s: %s\r\n" % (n, v))
        out.append("X-Origin: %s\r\n\r\n" % self.name)
        return "".join(out).encode("latin-1")

    def respond(self, c, r, status, body=b"", headers=(), close=False):
        hs = list(headers)
        if status not in (204, 304) and not (100 <= status < 200):
            hs.append(("Content-Length", str(len(body))))
        if close:
            hs.append(("Connection", "close"))
        elif r.version == "1.0":
            hs.append(("Connection", "keep-alive"))
        data = self.head_bytes(status, hs)
        if r.method != "HEAD" and status not in (204, 304):
            data += body
        c.send(data)
        return not close

    def send_x(self, c, n):
        while n > 0:
            k = min(n, IO)
            c.send(XBUF if k == IO else XBUF[:k])
            n -= k

    def text(self, c, r, n, head_only, close):
        """/text/N: see the module's doc."""
        q = dict(urllib.parse.parse_qsl(r.target.split("?", 1)[1] if "?" in r.target else ""))
        rep = q.get("rep") and q.get("mode") == "chunked"

        def make_body():
            # text_body(4 MiB) takes most of a second, longer on a busy
            # machine: a chunked answer sends its head before making it
            return b"" if rep else random_body(n) if q.get("rand") else text_body(n)
        status = int(q.get("status", "200"))
        hs = [("Content-Type", q.get("type", "text/html"))]
        for key, name in (("ce", "Content-Encoding"), ("cc", "Cache-Control"), ("etag", "ETag"),
                          ("vary", "Vary")):
            if key in q:
                hs.append((name, q[key]))
        hs.append(("Accept-Ranges", "bytes"))
        if q.get("range"):
            status = 206
            hs.append(("Content-Range", "bytes 0-%d/%d" % (n - 1, n)))
        mode = q.get("mode", "len")
        if rep:
            # text_body(65536) over and over: a large body made at once
            piece = text_body(65536)
            c.send(self.head_bytes(status, hs + [("Transfer-Encoding", "chunked")]))
            while n > 0 and not head_only:
                k = min(n, len(piece))
                c.send(b"%x\r\n%s\r\n" % (k, piece[:k]))
                n -= k
            c.send(b"" if head_only else b"0\r\n\r\n")
            return not close
        if mode == "chunked":
            c.send(self.head_bytes(status, hs + [("Transfer-Encoding", "chunked")]))
            if head_only:
                return not close
            body = make_body()
            for i in range(0, n, 4096):
                if i and q.get("ms"):
                    time.sleep(min(int(q["ms"]), 1000) / 1000.0)
                piece = body[i:i + 4096]
                c.send(b"%x\r\n%s\r\n" % (len(piece), piece))
            c.send(b"0\r\n\r\n")
            return not close
        body = make_body()
        if mode == "close":
            c.send(self.head_bytes(status, hs + [("Connection", "close")]))
            if not head_only:
                c.send(body)
            return False
        return self.respond(c, r, status, body, hs, close)

    # ---- one request -----------------------------------------------------
    def handle(self, c, r):
        """Answers <r>; returns True to keep the connection open."""
        close = r.wants_close()
        path = r.target.split("?", 1)[0]
        parts = path.split("/")
        head_only = r.method == "HEAD"

        def num(i, default=0):
            try:
                return int(parts[i])
            except (IndexError, ValueError):
                return default

        if parts[1:2] == ["on"]:
            # /on/NAMES/REST: REST on the origins named (comma-separated),
            # /echo on the others: one path fails some servers of a group
            rest = "/" + "/".join(parts[3:])
            names = parts[2].split(",") if len(parts) > 2 else []
            r.target = rest if self.name in names else "/echo"
            return self.handle(c, r)
        if parts[1:2] == ["sleep"]:
            # /sleep/MS/REST: REST after MS (at most 10 s)
            time.sleep(min(num(2), 10000) / 1000.0)
            r.target = "/" + "/".join(parts[3:])
            return self.handle(c, r)
        if path == "/echo" or path.startswith("/echo/"):
            if parts[2:3] == ["slow"]:
                time.sleep(min(num(3), 10000) / 1000.0)  # a request in flight, for drains
            body = json.dumps({
                "method": r.method, "target": r.target, "version": r.version,
                "headers": [[n, v] for n, v in r.headers],
                "trailers": [[n, v] for n, v in r.trailers],
                "body_len": r.body_len, "body_sha256": r.body_sha256,
                "origin": self.name, "conn": c.cid, "seq": c.seq,
            }).encode() + b"\n"
            return self.respond(c, r, 200, body,
                                [("Content-Type", "application/json")], close)
        if path == "/auth":
            # a forward auth service (routes.auth type "forward"): decides
            # on the Authorization header it was sent
            a = r.get("authorization") or ""
            if a == "Bearer good":
                return self.respond(c, r, 200, b"ok", [("X-Auth-User", "alice"), ("X-Auth-Role", "admin"),
                                                       ("X-Unasked", "not copied")], close)
            if a == "Bearer forbidden":
                return self.respond(c, r, 403, b"not yours\n", [("Content-Type", "text/plain")], close)
            if a == "Bearer teapot":
                return self.respond(c, r, 418, b"", [], close)
            if a == "Bearer chunked":
                body = b"who are you, in chunks?\n"
                c.send(self.head_bytes(401, [("WWW-Authenticate", 'Bearer realm="svc"'),
                                             ("Transfer-Encoding", "chunked")])
                       + b"5\r\n" + body[:5] + b"\r\n%x\r\n" % (len(body) - 5) + body[5:] + b"\r\n0\r\n\r\n")
                return not close
            return self.respond(c, r, 401, b"who are you?\n", [("WWW-Authenticate", 'Bearer realm="svc"'),
                                                               ("Content-Type", "text/plain"),
                                                               ("X-Internal", "not passed")], close)
        if path == "/upload":
            body = json.dumps({"body_len": r.body_len,
                               "body_sha256": r.body_sha256}).encode() + b"\n"
            return self.respond(c, r, 200, body,
                                [("Content-Type", "application/json")], close)
        if parts[1:2] == ["retry-after"]:
            n = min(max(num(2, 503), 200), 599)
            v = urllib.parse.unquote(parts[3]) if len(parts) > 3 else "1"
            if v.startswith("date"):
                v = email.utils.formatdate(time.time() + int(v[4:] or 0), usegmt=True)
            return self.respond(c, r, n, b"status %d\n" % n, [("Retry-After", v)], close)
        if parts[1:2] == ["status"]:
            n = num(2, 200)
            if n < 100 or n > 599:
                n = 500
            if 100 <= n < 200 and n != 101:
                extra = "Link: </style.css>; rel=preload\r\n" if n == 103 else ""
                c.send(("HTTP/1.1 %d %s\r\n%s\r\n"
                        % (n, REASONS.get(n, "Interim"), extra)).encode())
                return self.respond(c, r, 200, b"final\n", (), close)
            return self.respond(c, r, n, b"status %d\n" % n, (), close)
        if parts[1:2] == ["bytes"] or parts[1:2] == ["big"]:
            n = num(2)
            hs = [("Content-Length", str(n))]
            if close:
                hs.append(("Connection", "close"))
            c.send(self.head_bytes(200, hs))
            if not head_only:
                self.send_x(c, n)
            return not close
        if parts[1:2] == ["chunked"]:
            n = num(2)
            hs = [("Transfer-Encoding", "chunked")]
            if close:
                hs.append(("Connection", "close"))
            c.send(self.head_bytes(200, hs))
            if head_only:
                return not close
            while n > 0:
                k = min(n, 1000)
                c.send(b"%x\r\n%s\r\n" % (k, XBUF[:k]))
                n -= k
            c.send(b"0\r\n\r\n")
            return not close
        if parts[1:2] == ["tiny-chunks"]:
            # a body of N one-byte chunks, all sent at once
            n = num(2)
            c.send(self.head_bytes(200, [("Transfer-Encoding", "chunked")]))
            if not head_only:
                c.send(b"1\r\nx\r\n" * n + b"0\r\n\r\n")
            return not close
        if parts[1:2] == ["close"]:
            n = num(2)
            c.send(self.head_bytes(200, [("Connection", "close")]))
            if not head_only:
                self.send_x(c, n)
            return False
        if parts[1:2] == ["conc"]:
            # /conc/BASE/PER: answers after BASE + PER ms for each request
            # in flight here, so latency rises with concurrency
            # (tests/integration/test_adaptive_conc.py)
            with self.lock:
                self.conc = getattr(self, "conc", 0) + 1
                n = self.conc
            try:
                time.sleep(min(num(2) + num(3) * n, 10000) / 1000.0)
            finally:
                with self.lock:
                    self.conc -= 1
            return self.respond(c, r, 200, b"conc %d\n" % n, (), close)
        if parts[1:2] == ["slow"]:
            time.sleep(min(num(2), 60000) / 1000.0)
            return self.respond(c, r, 200, b"slow\n", (), close)
        if parts[1:2] == ["drip"]:
            n, ms = num(2, 3), num(3, 500)
            c.send(self.head_bytes(200, [("Transfer-Encoding", "chunked")]))
            for i in range(n):
                if i:
                    time.sleep(min(ms, 60000) / 1000.0)
                piece = b"tick %d\n" % i
                c.send(b"%x\r\n%s\r\n" % (len(piece), piece))
            if parts[4:5] == ["end-late"]:  # the last chunk in a read of its own
                time.sleep(min(ms, 60000) / 1000.0)
            c.send(b"0\r\n\r\n")
            return not close
        if parts[1:2] == ["text"]:
            return self.text(c, r, num(2), head_only, close)
        if path == "/stall":
            stopping.wait(STALL_MAX)
            return False
        if parts[1:2] == ["mode-set"]:
            # /mode-set/ok, /mode-set/sleep/MS, /mode-set/fail/STATUS,
            # /mode-set/failevery/N: what
            # /mode answers from now on (tests/integration/test_adaptive.py)
            self.mode = (parts[2] if len(parts) > 2 else "ok", num(3, 0))
            return self.respond(c, r, 200, b"mode %s\n" % str(self.mode).encode(), (), close)
        if path == "/mode":
            kind, arg = getattr(self, "mode", ("ok", 0))
            if kind == "sleep":
                time.sleep(min(arg, 10000) / 1000.0)
            if kind == "fail":
                return self.respond(c, r, min(max(arg, 500), 599), b"failing\n", (), close)
            if kind == "failevery":  # every Nth answer a 500: a steady error ratio
                self.mode_n = getattr(self, "mode_n", 0) + 1
                if self.mode_n % max(arg, 1) == 0:
                    return self.respond(c, r, 500, b"failing\n", (), close)
            return self.respond(c, r, 200, b"ok\n", (), close)
        if parts[1:2] == ["health-set"]:
            self.health = "stall" if parts[2:3] == ["stall"] else min(max(num(2, 200), 100), 599)
            return self.respond(c, r, 200, b"health %s\n" % str(self.health).encode(), (), close)
        if path == "/healthz":
            h = getattr(self, "health", 200)
            if h == "stall":
                stopping.wait(STALL_MAX)
                return False
            return self.respond(c, r, h, b"ok\n" if h == 200 else b"health %d\n" % h, (), close)
        if parts[1:2] == ["stall-body"]:
            n = num(2, 1000)
            c.send(self.head_bytes(200, [("Content-Length", str(n))]))
            self.send_x(c, n // 2)
            stopping.wait(STALL_MAX)
            return False
        if parts[1:2] == ["cut"]:
            n = num(2, 1000)
            c.send(self.head_bytes(200, [("Content-Length", str(n))]))
            self.send_x(c, n // 2)
            return False
        if path == "/close-early":
            return False
        if path == "/garbage":
            c.send(b"this is not http\r\n\r\n")
            return False
        if path == "/bad/two-digit":
            c.send(b"HTTP/1.1 20 OK\r\nContent-Length: 3\r\n\r\nok\n")
            return False
        if path == "/bad/cl-te":
            c.send(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n"
                   b"Transfer-Encoding: chunked\r\n\r\n"
                   b"5\r\nhello\r\n0\r\n\r\n")
            return False
        if path == "/bad/cl-dup":
            c.send(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n"
                   b"Content-Length: 5\r\n\r\nhello")
            return False
        if path == "/bad/chunk":
            c.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                   b"zz\r\nhello\r\n0\r\n\r\n")
            return False
        if path == "/bad/trailing":
            c.send(self.head_bytes(200, [("Content-Length", "3")]) + b"ok\n"
                   + b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n"
                   b"X-Injected: yes\r\n\r\ninjected\n")
            return not close
        if parts[1:3] == ["bad", "trailing-late"]:
            n = num(3, 1000)
            c.send(self.head_bytes(200, [("Content-Length", str(n))]))
            self.send_x(c, n)
            stopping.wait(num(4, 100) / 1000.0)
            c.send(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n"
                   b"X-Injected: yes\r\n\r\ninjected\n")
            return not close
        if path == "/bad/huge-head":
            return self.respond(c, r, 200, b"ok\n",
                                [("X-Huge", "h" * 32768)], close)
        if path == "/head-test":
            return self.respond(c, r, 200, b"hello", (), close)
        if path == "/respheaders":
            hs = [("Connection", "X-Hop-A, X-Hop-B"), ("X-Hop-A", "1"),
                  ("X-Hop-B", "2"), ("Keep-Alive", "timeout=5, max=100"),
                  ("Proxy-Connection", "keep-alive"),
                  ("X-End-To-End", "kept"),
                  ("Set-Cookie", "a=1; Path=/"), ("Set-Cookie", "b=2; Path=/"),
                  ("Cache-Control", "no-store")]
            body = b"headers\n"
            c.send(self.head_bytes(200, hs + [("Content-Length", str(len(body)))])
                   + (b"" if head_only else body))
            return not close
        if path.startswith("/headsize/"):
            # /headsize/<bytes>/<headers>: a 200 whose head, status line to
            # the blank line, is exactly <bytes> long, in <headers> header
            # lines written "name:value" (no space: the most a proxy adds
            # back), Content-Length among them; the body is "ok"
            total, n = num(2), max(num(3), 2)
            lines = ["HTTP/1.1 200 OK", "Content-Length:2"] + ["X-F%04d:" % i for i in range(n - 1)]
            short = total - sum(len(x) + 2 for x in lines) - 2
            if short < 0:
                return self.respond(c, r, 400, b"too small\n", (), True)
            lines[-1] += "v" * short
            head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
            assert len(head) == total, (len(head), total)
            c.send(head + (b"" if head_only else b"ok"))
            return not close
        if path == "/lookalikes":
            # underscore spellings of framing headers: framing to no HTTP
            # parser, only to a CGI-style reader
            body = b"lookalikes\n"
            c.send(self.head_bytes(200, [("Transfer_Encoding", "chunked"), ("Content_Length", "999"),
                                         ("Content-Length", str(len(body)))]) + (b"" if head_only else body))
            return not close
        if path == "/trailers":
            # chunked, "trailers\n" then the request's trailer lines as
            # they came and one per t=NAME:VALUE of the query; only=1: a
            # gRPC trailers-only answer (the status in the head, no body)
            q = urllib.parse.parse_qs(r.target.partition("?")[2])
            if q.get("only"):
                c.send(self.head_bytes(200, [("Content-Type", "application/grpc"), ("Grpc-Status", "0"),
                                             ("Grpc-Message", "ok"), ("Content-Length", "0")]))
                return not close
            extra = b"".join(t.encode("latin-1") + b"\r\n" for t in q.get("t", []))
            extra += b"".join(b"X-Big: " + b"v" * min(int(n), 1 << 20) + b"\r\n" for n in q.get("big", []))
            c.send(self.head_bytes(200, [("Transfer-Encoding", "chunked"),
                                         ("Content-Type", q.get("type", ["application/grpc"])[0])]))
            if not head_only:
                body = q.get("body", ["trailers\n"])[0].encode()
                c.send(b"%x\r\n%s\r\n0\r\n" % (len(body), body) + r.trailer_raw + extra + b"\r\n")
            return not close
        if path == "/chunked-ext":
            c.send(self.head_bytes(200, [("Transfer-Encoding", "chunked"),
                                         ("Trailer", "X-Sum")]))
            if not head_only:
                c.send(b"5;a=1\r\nhello\r\n1;b=\"q\"\r\n \r\n"
                       b"5\r\nworld\r\n0\r\nX-Sum: 11\r\n\r\n")
            return not close
        if path == "/http10":
            # an HTTP/1.0 response without keep-alive: not persistent, even
            # though this server would go on reading the connection
            c.send(b"HTTP/1.0 200 OK\r\nContent-Length: 6\r\nX-Origin: %s\r\n\r\nold10\n"
                   % self.name.encode())
            return True
        if path == "/conn-close":
            self.respond(c, r, 200, b"closing\n", (), close=True)
            return False
        if path == "/304cl":
            c.send(self.head_bytes(304, [("Content-Length", "100"), ("ETag", '"v1"')]))
            return not close
        if path == "/keepalive-then-close":
            self.respond(c, r, 200, b"ok\n", (), close)
            time.sleep(0.05)
            return False
        if path == "/close-on-next":
            c.drop_next = True
            return self.respond(c, r, 200, b"ok\n", (), close)
        return self.respond(c, r, 200, b"hello from origin\n", (), close)

    # ---- one connection --------------------------------------------------
    def unread_body(self, c, r, cid):
        """Endpoints that never read the request body; True when the
        connection is done with. /answer-early/N answers N bytes at once
        and closes (as an upload handler refusing a file does);
        /hold-body/MS waits MS ms without reading, then closes."""
        parts = r.target.split("?", 1)[0].split("/")
        if parts[1:2] not in (["answer-early"], ["hold-body"]):
            return False
        self.log.write({"method": r.method, "target": r.target, "unread": True,
                        "conn": cid, "seq": c.seq, "t": round(time.time(), 4)})
        try:
            n = int(parts[2])
        except (IndexError, ValueError):
            n = 1000
        if parts[1] == "hold-body":
            stopping.wait(min(n, 60000) / 1000.0)
            return True
        c.send(self.head_bytes(200, [("Content-Length", str(n)), ("Connection", "close")])
               + early_body(n))
        # the answer must reach weir whole before the close, which resets
        # the connection (the body is unread): FIN, then wait for the ack
        c.sock.shutdown(socket.SHUT_WR)
        end = time.monotonic() + 20
        while time.monotonic() < end and not stopping.is_set():
            if struct.unpack("i", fcntl.ioctl(c.sock, termios.TIOCOUTQ, b"\0" * 4))[0] == 0:
                break
            time.sleep(0.01)
        self.log.write({"target": r.target, "closed": True, "conn": cid, "t": round(time.time(), 4)})
        return True

    def serve(self, sock, peer):
        with self.lock:
            self.next_cid += 1
            cid = self.next_cid
        c = Conn(sock, cid)
        c.drop_next = False
        sock.settimeout(IDLE_TIMEOUT)
        try:
            while not stopping.is_set():
                head = c.read_head()
                if head is None:
                    return
                c.seq += 1
                try:
                    r = parse_head(head)
                    if self.unread_body(c, r, cid):
                        return
                    read_body(c, r)
                except BadRequest as e:
                    self.log.write({"error": str(e), "conn": cid, "seq": c.seq,
                                    "raw": head[:512].decode("latin-1")})
                    c.send(self.head_bytes(400, [("Content-Length", "12"),
                                                 ("Connection", "close")])
                           + b"bad request\n")
                    return
                entry = {"method": r.method, "target": r.target,
                         "version": r.version,
                         "headers": [[n, v] for n, v in r.headers],
                         "body_len": r.body_len, "body_sha256": r.body_sha256,
                         "conn": cid, "seq": c.seq, "peer_port": peer[1],
                         "t": round(time.time(), 4)}
                if r.trailers:
                    entry["trailers"] = [[n, v] for n, v in r.trailers]
                    entry["trailer_raw"] = r.trailer_raw.decode("latin-1")
                if c.drop_next:
                    entry["dropped"] = True
                    self.log.write(entry)
                    return
                self.log.write(entry)
                if not self.handle(c, r):
                    return
        except BadRequest as e:
            self.log.write({"error": str(e), "conn": cid, "seq": c.seq})
        except (Closed, OSError):
            pass
        finally:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()


def main():
    ap = argparse.ArgumentParser(description="weir's test origin")
    ap.add_argument("--listen", required=True, help="127.0.0.1:PORT")
    ap.add_argument("--name", default="origin")
    ap.add_argument("--log", default=None)
    a = ap.parse_args()
    host, _, port = a.listen.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    ls = socket.socket(fam, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((host, int(port)))
    ls.listen(1024)
    srv = Server(a.name, Log(a.log))
    if int(port) == 0:
        print("ready %s:%d" % (host, ls.getsockname()[1]), flush=True)
    else:
        print("ready", flush=True)
    try:
        while True:
            s, peer = ls.accept()
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            t = threading.Thread(target=srv.serve, args=(s, peer), daemon=True)
            t.start()
    except KeyboardInterrupt:
        pass
    finally:
        stopping.set()
        ls.close()


if __name__ == "__main__":
    sys.exit(main())
