"""harness.py: helpers for weir's integration suite (conftest.py has the fixtures).

Principle: every test starts the real binary with a config written inline
into its own temporary directory, on free 127.0.0.1 ports, in front of one or
more real origins (tests/origin/origin.py), drives it with raw sockets where
bytes matter, and checks the Prometheus counters and the logs as well as the
responses. Everything it starts it stops; every wait is bounded.

Environment:
  WEIR_BIN    the binary under test (default: build/weir in the repo)
  WEIR_ASAN=1 sanitizer build: more slack on waits, and each test fails if
              weir's stderr or error log holds a sanitizer report
  WEIR_QUICK=1 skips the tests marked "large" (1 GiB transfers)
"""

import json
import os
import re
import select
import signal
import socket
import subprocess
import time


HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
ORIGIN_PY = os.path.join(REPO, "tests", "origin", "origin.py")
PYTHON = "/usr/bin/python3"

WEIR_BIN = os.path.abspath(os.environ.get("WEIR_BIN") or os.path.join(REPO, "build", "weir"))
ASAN = os.environ.get("WEIR_ASAN") == "1"
QUICK = os.environ.get("WEIR_QUICK") == "1"
# Multiplier for every wait in the suite: sanitizer builds are slower.
SLACK = 4.0 if ASAN else 1.0

SANITIZER_LINE = re.compile(r"ERROR: AddressSanitizer|runtime error:|ERROR: LeakSanitizer")


def slack(seconds):
    return seconds * SLACK


# ---------------------------------------------------------------------------
# ports and small helpers
# ---------------------------------------------------------------------------

# Under pytest-xdist (`make integration` runs the suite with -n 3, beside
# the sanitizer build's) sessions pick ports at the same time, and a port
# one of them picked is free until its weir binds it: the kernel's bind(0)
# could hand it to another worker meanwhile. So each worker of each build
# takes its ports in turn from a range of its own, below the ephemeral
# range (32768 up) that bind(0) and client sockets draw from: no two
# workers of one run can pick the same port, and no client socket can take
# one. The turn starts at a random place, so that two runs on one machine
# rarely walk the same ports at once; a port in use is skipped.
_XDIST_WORKER = re.match(r"gw(\d+)$", os.environ.get("PYTEST_XDIST_WORKER", ""))
PORT_RANGES_BASE, PORT_RANGE_SIZE = 20000, 1500  # 8 ranges: 20000 .. 31999, 4 workers per build
_next_port = [None]


def _port_free(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    if _XDIST_WORKER:
        first = PORT_RANGES_BASE + PORT_RANGE_SIZE * (int(_XDIST_WORKER.group(1)) % 4 + (4 if ASAN else 0))
        if _next_port[0] is None:
            _next_port[0] = int.from_bytes(os.urandom(2), "little") % PORT_RANGE_SIZE
        for _ in range(PORT_RANGE_SIZE):
            port = first + _next_port[0]
            _next_port[0] = (_next_port[0] + 1) % PORT_RANGE_SIZE
            if _port_free(port):
                return port
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def closed_port():
    """A port on which a connect() is refused (bound without listen keeps it
    from being handed out again while the test runs)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    _HELD.append(s)
    return s.getsockname()[1]


_HELD = []


def wait_until(pred, timeout, interval=0.02, what="condition"):
    """Polls <pred> until it returns a true value or <timeout> seconds pass;
    returns the value or raises AssertionError."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %.1fs waiting for %s" % (timeout, what))
        time.sleep(interval)


def can_connect(port, timeout=0.5):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    except OSError:
        return False
    s.close()
    return True


def proc_stat(pid):
    """The fields of /proc/PID/stat after the command name (state, ppid,
    pgrp, ...), or None when the process is gone."""
    try:
        with open("/proc/%s/stat" % pid) as f:
            st = f.read()
    except OSError:
        return None
    return st[st.rfind(")") + 2:].split()


def _live_with(index, value):
    """Live (not zombie) pids whose stat field <index> is <value>."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        fields = proc_stat(d)
        if fields and int(fields[index]) == value and fields[0] != "Z":
            out.append(int(d))
    return out


def children_of(pid):
    """Pids whose parent is <pid> (from /proc)."""
    return sorted(_live_with(1, pid))


def pids_in_group(pgid):
    return _live_with(2, pgid)


def proc_status(pid, key):
    """A field of /proc/PID/status in kB (e.g. VmHWM), or None."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def kill_and_reap(proc):
    """SIGKILL a helper process (an origin) still running, and reap it."""
    if proc and proc.poll() is None:
        proc.kill()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            pass


def pid_alive(pid):
    fields = proc_stat(pid)
    return fields is not None and fields[0] != "Z"


# ---------------------------------------------------------------------------
# raw HTTP client
# ---------------------------------------------------------------------------

class Response:
    def __init__(self):
        self.version = ""
        self.status = 0
        self.reason = ""
        self.headers = []  # [(name, value)] in received order
        self.body = b""
        self.raw_head = b""
        self.chunked = False
        self.trailers = []  # a chunked body's trailer fields [(name, value)]
        self.trailer_raw = b""  # and their lines as received
        self.interim = []  # 1xx responses read before this one

    def get_all(self, name):
        name = name.lower()
        return [v for n, v in self.headers if n.lower() == name]

    def get(self, name):
        vals = self.get_all(name)
        return vals[0] if vals else None

    def has(self, name):
        return bool(self.get_all(name))

    def json(self):
        return json.loads(self.body)

    def connection_tokens(self):
        out = []
        for v in self.get_all("connection"):
            out += [t.strip().lower() for t in v.split(",")]
        return out

    def __repr__(self):
        return "<Response %d %r headers=%r body=%r>" % (
            self.status, self.reason, self.headers, self.body[:200])


class ProtocolError(AssertionError):
    pass


class Client:
    """A raw socket to weir (or any server) with a strict response reader.

    Every read is bounded by <timeout>; a read that does not complete raises
    socket.timeout (an AssertionError in the test's eyes)."""

    def __init__(self, port, timeout=5.0, host="127.0.0.1", rcvbuf=None):
        self.timeout = slack(timeout)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            # before connect, so the advertised window stays small
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(self.timeout)
        try:
            self.sock.connect((host, port))
        except OSError:
            self.sock.close()
            raise
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()
        self.eof = False

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()

    def send(self, data):
        if isinstance(data, str):
            data = data.encode("latin-1")
        self.sock.sendall(data)

    def _fill(self, deadline=None):
        if self.eof:
            raise ProtocolError("connection closed by peer; have %r" % bytes(self.buf[:300]))
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise socket.timeout("deadline passed")
            self.sock.settimeout(left)
        try:
            data = self.sock.recv(1 << 20)
        except ConnectionResetError:
            data = b""
        finally:
            self.sock.settimeout(self.timeout)
        if not data:
            self.eof = True
            raise ProtocolError("connection closed by peer; have %r" % bytes(self.buf[:300]))
        self.buf += data

    def _line(self, deadline):
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line = bytes(self.buf[:i])
                del self.buf[:i + 2]
                if b"\n" in line:
                    raise ProtocolError("bare LF in %r" % line)
                return line
            if len(self.buf) > 1 << 20:
                raise ProtocolError("line too long")
            self._fill(deadline)

    def _exact(self, n, deadline, sink=None):
        """Reads <n> bytes; returns them, or feeds <sink> and returns b""."""
        out = bytearray()
        while n > 0:
            if not self.buf:
                self._fill(deadline)
            take = min(n, len(self.buf))
            if sink is not None:
                sink(self.buf[:take])
            else:
                out += self.buf[:take]
            del self.buf[:take]
            n -= take
        return bytes(out)

    def read_head(self, deadline=None):
        r = Response()
        raw = []
        line = self._line(deadline)
        raw.append(line)
        m = re.match(rb"^HTTP/(1\.[01]) ([0-9]{3}) ?(.*)$", line)
        if not m:
            raise ProtocolError("bad status line %r" % line)
        r.version = m.group(1).decode()
        r.status = int(m.group(2))
        r.reason = m.group(3).decode("latin-1")
        while True:
            line = self._line(deadline)
            raw.append(line)
            if line == b"":
                break
            hm = re.match(rb"^([!#$%&'*+\-.^_`|~0-9A-Za-z]+):[ \t]*(.*?)[ \t]*$", line)
            if not hm:
                raise ProtocolError("bad header line %r" % line)
            r.headers.append((hm.group(1).decode("latin-1"), hm.group(2).decode("latin-1")))
        r.raw_head = b"\r\n".join(raw) + b"\r\n"
        return r

    def read_response(self, method="GET", timeout=None, sink=None, keep_interim=True):
        """Reads one whole response (after any 1xx). <sink>, when given,
        receives the body bytes instead of Response.body."""
        deadline = time.monotonic() + slack(timeout) if timeout else None
        interim = []
        while True:
            r = self.read_head(deadline)
            if 100 <= r.status < 200 and r.status != 101:
                interim.append(r)
                continue
            break
        r.interim = interim
        te = [v.lower() for v in r.get_all("transfer-encoding")]
        cl = r.get_all("content-length")
        if method == "HEAD" or r.status in (204, 304):
            return r
        if te:
            if te != ["chunked"]:
                raise ProtocolError("unexpected Transfer-Encoding %r" % te)
            if cl:
                raise ProtocolError("both Content-Length and Transfer-Encoding")
            r.chunked = True
            body = bytearray()
            while True:
                line = self._line(deadline)
                m = re.match(rb"^([0-9a-fA-F]+)(;.*)?$", line)
                if not m:
                    raise ProtocolError("bad chunk size line %r" % line)
                n = int(m.group(1), 16)
                if n == 0:
                    break
                data = self._exact(n, deadline, sink)
                body += data
                if self._exact(2, deadline) != b"\r\n":
                    raise ProtocolError("no CRLF after chunk data")
            while True:  # the trailer section, kept as it came
                line = self._line(deadline)
                if line == b"":
                    break
                r.trailer_raw += line + b"\r\n"
                name, _, value = line.partition(b":")
                r.trailers.append((name.decode("latin-1"), value.strip(b" \t").decode("latin-1")))
            r.body = bytes(body)
            return r
        if cl:
            if len(set(cl)) != 1 or not cl[0].isdigit():
                raise ProtocolError("bad Content-Length %r" % cl)
            r.body = self._exact(int(cl[0]), deadline, sink)
            return r
        # read to close
        body = bytearray()
        while True:
            try:
                self._fill(deadline)
            except ProtocolError:
                break
            if sink is not None:
                sink(self.buf)
            else:
                body += self.buf
            self.buf.clear()
        if sink is None:
            body += self.buf
        self.buf.clear()
        r.body = bytes(body)
        return r

    def request(self, method="GET", target="/", host="localhost", headers=(),
                body=None, version="1.1", timeout=None):
        self.send(build_request(method, target, host, headers, body, version))
        return self.read_response(method, timeout=timeout)

    def read_all(self, timeout=2.0):
        """Everything until the peer closes (bounded)."""
        deadline = time.monotonic() + slack(timeout)
        while not self.eof:
            try:
                self._fill(deadline)
            except ProtocolError:
                break
        out = bytes(self.buf)
        self.buf.clear()
        return out

    def closed_by_peer(self, timeout=2.0):
        """True when the peer closes (EOF or reset) within <timeout> seconds
        without sending anything more; raises if it sends bytes; False on
        timeout."""
        if self.eof:
            return True
        if self.buf:
            raise ProtocolError("unexpected extra bytes %r" % bytes(self.buf[:300]))
        deadline = time.monotonic() + slack(timeout)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                return False
            except (ConnectionResetError, BrokenPipeError):
                self.eof = True
                return True
            finally:
                self.sock.settimeout(self.timeout)
            if not data:
                self.eof = True
                return True
            raise ProtocolError("unexpected bytes instead of close: %r" % data[:300])

    def is_open(self, wait=0.2):
        """True when nothing arrives and the peer does not close within <wait>."""
        return not self.closed_by_peer(wait)


def build_request(method="GET", target="/", host="localhost", headers=(), body=None,
                  version="1.1"):
    lines = ["%s %s HTTP/%s" % (method, target, version)]
    if host is not None:
        lines.append("Host: %s" % host)
    names = [n.lower() for n, _ in headers]
    for n, v in headers:
        lines.append("%s: %s" % (n, v))
    if body is not None and "content-length" not in names and "transfer-encoding" not in names:
        lines.append("Content-Length: %d" % len(body))
    data = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    if body is not None:
        data += body if isinstance(body, bytes) else body.encode("latin-1")
    return data


def chunked(data, size=1000, ext=""):
    """<data> as a chunked body with chunks of <size> bytes."""
    out = bytearray()
    for i in range(0, len(data), size):
        piece = data[i:i + size]
        out += b"%x%s\r\n" % (len(piece), ext.encode())
        out += piece + b"\r\n"
    out += b"0\r\n\r\n"
    return bytes(out)


def get(port, target="/", host="localhost", headers=(), timeout=5.0, method="GET", body=None):
    """One request on a fresh connection, closed after."""
    with Client(port, timeout=timeout) as c:
        return c.request(method, target, host, headers, body)


# ---------------------------------------------------------------------------
# metrics
# ---------------------------------------------------------------------------

METRIC_LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+\S+)?$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*,?\s*')


class Metrics:
    """Parsed Prometheus text: samples keyed by (name, frozenset(labels))."""

    def __init__(self, text):
        self.text = text
        self.samples = {}
        for line in text.splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            m = METRIC_LINE.match(line)
            if not m:
                raise AssertionError("bad metrics line %r" % line)
            labels = {}
            if m.group(3):
                pos = 0
                s = m.group(3)
                while pos < len(s):
                    lm = LABEL.match(s, pos)
                    if not lm:
                        raise AssertionError("bad labels in %r" % line)
                    labels[lm.group(1)] = lm.group(2)
                    pos = lm.end()
            self.samples[(m.group(1), frozenset(labels.items()))] = float(m.group(4))

    def names(self):
        return {n for n, _ in self.samples}

    def has(self, name, **labels):
        return (name, frozenset(labels.items())) in self.samples

    def get(self, name, **labels):
        """The sample's value; 0 when absent (counters may be omitted until
        they first count)."""
        return self.samples.get((name, frozenset(labels.items())), 0.0)

    def __call__(self, name, **labels):
        return self.get(name, **labels)

    def total(self, name, **labels):
        """The sum of <name>'s samples that have <labels> (and any others)."""
        want = set(labels.items())
        return sum(v for (n, ls), v in self.samples.items() if n == name and want <= ls)

    def error(self, kind):
        return self.get("weir_errors_total", kind=kind)


def fetch_metrics(port, timeout=2.0):
    with Client(port, timeout=timeout) as c:
        r = c.request("GET", "/metrics", host="127.0.0.1:%d" % port,
                      headers=[("Connection", "close")])
    if r.status != 200:
        raise AssertionError("stats endpoint answered %d" % r.status)
    return Metrics(r.body.decode())


# ---------------------------------------------------------------------------
# origin
# ---------------------------------------------------------------------------

class Origin:
    def __init__(self, tmpdir, name="A", port=0):
        self.name = name
        self.log_path = os.path.join(str(tmpdir), "origin-%s.log" % name)
        self.out_path = os.path.join(str(tmpdir), "origin-%s.out" % name)
        self.port = port
        self.proc = None

    @property
    def addr(self):
        return "127.0.0.1:%d" % self.port

    def start(self):
        self.out = open(self.out_path, "wb")
        self.proc = subprocess.Popen(
            [PYTHON, ORIGIN_PY, "--listen", "127.0.0.1:%d" % self.port, "--name", self.name,
             "--log", self.log_path],
            stdout=subprocess.PIPE, stderr=self.out, start_new_session=True)
        deadline = time.monotonic() + 10
        line = b""
        while time.monotonic() < deadline:
            r, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if r:
                line = self.proc.stdout.readline()
                break
            if self.proc.poll() is not None:
                break
        if not line.startswith(b"ready"):
            raise AssertionError("origin %s did not start: %r %s" % (
                self.name, line, open(self.out_path, "rb").read()[-2000:]))
        parts = line.split()
        if len(parts) > 1:
            self.port = int(parts[1].rsplit(b":", 1)[1])
        return self

    def stop(self):
        kill_and_reap(self.proc)
        if self.proc and self.proc.stdout:
            self.proc.stdout.close()
        self.proc = None

    def entries(self):
        """Every logged request (and every malformed one, with "error")."""
        try:
            with open(self.log_path) as f:
                return [json.loads(line) for line in f if line.strip()]
        except FileNotFoundError:
            return []

    def requests(self, path=None):
        """Logged complete requests, optionally those whose target starts
        with <path>."""
        out = [e for e in self.entries() if "error" not in e]
        if path is not None:
            out = [e for e in out if e["target"].startswith(path)]
        return out

    def clear_log(self):
        open(self.log_path, "w").close()


def header_values(entry, name):
    name = name.lower()
    return [v for n, v in entry["headers"] if n.lower() == name]


# ---------------------------------------------------------------------------
# weir
# ---------------------------------------------------------------------------

# every harness config sets it: admin POSTs over TCP need a token
STATS_TOKEN = "harness-admin-token-0123456789"

DEFAULT_TIMEOUTS = {
    "client_header": "2s",
    "client_body": "2s",
    "upstream_connect": "1s",
    "upstream_read": "2s",
    "drain": "5s",
}


def render_config(d, port, stats_port, upstreams, routes, workers=2, timeouts=None,
                  limits=None, level="info", extra="", log_extra=""):
    """A libconfig text for weir. <upstreams> is a list of dicts
    {name, servers: [(addr, weight or None)], keepalive, max_fails, fail_timeout,
    raw (more keys as written), health (the text inside health = { ... })
    (optional)};
    <routes> a list of dicts {host (optional), path, upstream, upgrade (a
    list of tokens, optional)}."""
    t = dict(DEFAULT_TIMEOUTS)
    t.update(timeouts or {})
    out = []
    out.append("workers = %s;" % (workers if isinstance(workers, int) else '"%s"' % workers))
    # <log_extra>: more keys of the log group (format)
    out.append('log = { error = "%s/error.log"; access = "%s/access.log"; level = "%s"; %s};'
               % (d, d, level, log_extra))
    out.append('stats = { listen = "127.0.0.1:%d"; admin_token = "%s"; };' % (stats_port, STATS_TOKEN))
    out.append('listeners = ( { address = "127.0.0.1:%d"; } );' % port)
    ups = []
    for u in upstreams:
        servers = []
        for s in u["servers"]:
            addr, weight = s if isinstance(s, tuple) else (s, None)
            if weight is None:
                servers.append('{ address = "%s"; }' % addr)
            else:
                servers.append('{ address = "%s"; weight = %d; }' % (addr, weight))
        ka = "keepalive = %d; " % u["keepalive"] if "keepalive" in u else ""
        if "max_fails" in u:
            ka += "max_fails = %d; " % u["max_fails"]
        if "fail_timeout" in u:
            ka += 'fail_timeout = "%s"; ' % u["fail_timeout"]
        if "raw" in u:  # more keys of the group, as written: 'outlier = { ... };'
            ka += u["raw"] + " "
        if "health" in u:  # the text inside health = { ... }
            ka += "health = { %s }; " % u["health"]
        ups.append('  { name = "%s"; %sservers = ( %s ); }' % (u["name"], ka, ", ".join(servers)))
    out.append("upstreams = (\n%s\n);" % ",\n".join(ups))
    rs = []
    for r in routes:
        host = 'host = "%s"; ' % r["host"] if r.get("host") is not None else ""
        if r.get("upgrade") is not None:
            host += "upgrade = [ %s ]; " % ", ".join('"%s"' % u for u in r["upgrade"])
        # "extra": more keys of the entry (return, log); no "upstream": none
        up = 'upstream = "%s"; ' % r["upstream"] if r.get("upstream") else ""
        # "path": None leaves it out (a route with path_exact)
        path = 'path = "%s"; ' % r.get("path", "/") if r.get("path", "/") is not None else ""
        rs.append('  { %s%s%s%s}' % (host, path, up, r.get("extra", "")))
    out.append("routes = (\n%s\n);" % ",\n".join(rs))
    out.append("timeouts = { %s };" % " ".join('%s = "%s";' % kv for kv in t.items()))
    if limits:
        out.append("limits = { %s };" % " ".join(
            ('%s = "%s";' if isinstance(v, str) else "%s = %d;") % (k, v) for k, v in limits.items()))
    if extra:
        out.append(extra)
    return "\n".join(out) + "\n"


def weir_check(d, text, needle):
    """Writes config <text> into directory <d> and runs weir -t on it:
    (exit code, stderr, "FILE:LINE: " of the first line holding
    <needle>), for tests of config errors with their lines."""
    p = os.path.join(str(d), "weir.conf")
    with open(p, "w") as f:
        f.write(text)
    r = subprocess.run([WEIR_BIN, "-t", "-c", p], capture_output=True, timeout=slack(10))
    line = next(i for i, l in enumerate(text.splitlines(), 1) if needle in l)
    return r.returncode, r.stderr.decode(), "%s:%d: " % (p, line)


class Weir:
    def __init__(self, tmpdir):
        self.dir = str(tmpdir)
        self.port = free_port()
        self.stats_port = free_port()
        while self.stats_port == self.port:
            self.stats_port = free_port()
        self.conf = os.path.join(self.dir, "weir.conf")
        self.stdout_path = os.path.join(self.dir, "weir.stdout")
        self.stderr_path = os.path.join(self.dir, "weir.stderr")
        self.error_log = os.path.join(self.dir, "error.log")
        self.access_log = os.path.join(self.dir, "access.log")
        self.proc = None
        self.pgid = None
        self.workers = 2
        self.nofile = None  # an open files limit (soft and hard) to start under
        self.stderr = None  # a file object for stderr instead of weir.stderr

    # -- lifecycle --
    def write_config(self, **kw):
        self.workers = kw.get("workers", 2)
        text = render_config(self.dir, self.port, self.stats_port, **kw)
        with open(self.conf, "w") as f:
            f.write(text)
        return text

    def write_raw_config(self, text):
        with open(self.conf, "w") as f:
            f.write(text)

    def start(self, wait=True):
        if not os.path.exists(WEIR_BIN):
            raise AssertionError("%s does not exist: run make (or set WEIR_BIN)" % WEIR_BIN)
        env = dict(os.environ)
        if ASAN:
            env.setdefault("ASAN_OPTIONS", "abort_on_error=0:detect_leaks=1:halt_on_error=1")
            env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
        self.proc = subprocess.Popen(
            [WEIR_BIN, "-c", self.conf], cwd=self.dir, env=env,
            stdin=subprocess.DEVNULL,
            stdout=open(self.stdout_path, "ab"),
            stderr=self.stderr if self.stderr is not None else open(self.stderr_path, "ab"),
            start_new_session=True, preexec_fn=self._limits if self.nofile else None)
        self.pgid = self.proc.pid
        self.probes = 0
        if wait:
            self.wait_ready()
        return self

    def _limits(self):
        import resource
        resource.setrlimit(resource.RLIMIT_NOFILE, (self.nofile, self.nofile))

    @property
    def pid(self):
        return self.proc.pid

    def wait_ready(self, timeout=10.0):
        deadline = time.monotonic() + slack(timeout)
        last = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError("weir exited with %s during start-up" % self.proc.returncode)
            if can_connect(self.port, 0.2):
                self.probes += 1
                try:
                    fetch_metrics(self.stats_port, timeout=1.0)
                except (OSError, AssertionError) as e:
                    last = e
                    continue
                # let the probe connections be counted before a test takes
                # its first scrape, so counter deltas are exact
                end = time.monotonic() + slack(1)
                while time.monotonic() < end:
                    m = fetch_metrics(self.stats_port, timeout=1.0)
                    if (m("weir_client_connections_total") >= self.probes
                            and m("weir_client_connections_active") == 0):
                        break
                    time.sleep(0.02)
                return
            time.sleep(0.02)
        raise AssertionError("weir not ready in %.0fs (%r)" % (slack(timeout), last))

    def signal(self, sig):
        os.kill(self.proc.pid, sig)

    def wait_exit(self, timeout):
        try:
            return self.proc.wait(slack(timeout))
        except subprocess.TimeoutExpired:
            return None

    def stop(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(slack(5))
            except subprocess.TimeoutExpired:
                pass
        # whatever is left of the process group we started (workers)
        try:
            os.killpg(self.pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            pass

    # -- observation --
    def worker_pids(self):
        return children_of(self.proc.pid)

    def wait_workers(self, n=None, timeout=5.0):
        n = self.workers if n is None else n
        return wait_until(lambda: (lambda p: p if len(p) == n else None)(self.worker_pids()),
                          slack(timeout), what="%d workers" % n)

    def metrics(self):
        return fetch_metrics(self.stats_port)

    def read(self, path):
        try:
            with open(path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def error_lines(self):
        return [l for l in self.read(self.error_log).splitlines() if l.strip()]

    def logged(self, match, timeout=3.0):
        """The first error-log line for which <match>(line) is true, waited
        for: a worker writes its lines to a file after its pass's answers
        (one write per loop pass), so a line may land after the answer."""
        def found():
            return next((l for l in self.error_lines() if match(l)), None)
        return wait_until(found, slack(timeout), what="an error-log line like that")

    def access_lines(self):
        return [l for l in self.read(self.access_log).splitlines() if l.strip()]

    def all_logs(self):
        out = []
        for p in (self.conf, self.stderr_path, self.stdout_path, self.error_log, self.access_log):
            text = self.read(p)
            if len(text) > 6000:
                text = "...\n" + text[-6000:]
            out.append("---- %s ----\n%s" % (os.path.basename(p), text))
        return "\n".join(out)

    def sanitizer_reports(self):
        found = []
        for p in (self.stderr_path, self.error_log, self.stdout_path):
            for line in self.read(p).splitlines():
                if SANITIZER_LINE.search(line):
                    found.append("%s: %s" % (os.path.basename(p), line))
        return found

    # -- convenience --
    def client(self, timeout=5.0):
        return Client(self.port, timeout=timeout)

    def get(self, target="/", **kw):
        return get(self.port, target, **kw)



def simple(weir_factory, origin, **kw):
    """weir in front of <origin> with extra config keywords (timeouts, limits,
    workers, ...)."""
    ups = kw.pop("upstreams", None) or [
        dict({"name": "a", "servers": [origin.addr]}, **kw.pop("upstream_opts", {}))]
    routes = kw.pop("routes", None) or [{"path": "/", "upstream": "a"}]
    return weir_factory(upstreams=ups, routes=routes, **kw)


REASON_ALIASES = {
    413: ("Payload Too Large", "Content Too Large"),  # RFC 7231 / RFC 9110 names
    422: ("Unprocessable Entity", "Unprocessable Content"),
}


def error_response_ok(r, code, reason, close):
    """Asserts the exact shape of an error weir makes itself: the status
    line, Content-Type: text/plain, Content-Length and the body
    "<code> <reason>\n"; with <close>, also Connection: close."""
    assert r.version == "1.1", r
    assert r.status == code, r
    assert r.reason in REASON_ALIASES.get(code, (reason,)), r
    assert r.get("Content-Type") == "text/plain", r
    body = ("%d %s\n" % (code, r.reason)).encode()
    assert r.body == body, r
    assert r.get_all("Content-Length") == [str(len(body))], r
    if close:
        assert "close" in r.connection_tokens(), r
    else:
        assert "close" not in r.connection_tokens(), r


def settle(seconds=0.2):
    """A short pause for logs and counters written after a response."""
    time.sleep(slack(seconds))


def established_to(port):
    """Number of ESTABLISHED TCP connections on this machine whose remote end
    is 127.0.0.1:<port> (from /proc/net/tcp): weir's upstream connections."""
    n = 0
    want = "0100007F:%04X" % port
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            parts = line.split()
            if parts[2] == want and parts[3] == "01":
                n += 1
    return n


def unread_by_server(port, client_sock):
    """Bytes the server end of <client_sock>'s connection to
    127.0.0.1:<port> holds unread (its receive queue, from /proc/net/tcp),
    or None when that end is not there. 0 means the process that accepted
    the connection has read what the client sent: a connection still in
    the accept queue keeps its bytes queued."""
    want_local = "0100007F:%04X" % port
    want_remote = "0100007F:%04X" % client_sock.getsockname()[1]
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            parts = line.split()
            if parts[1] == want_local and parts[2] == want_remote:
                return int(parts[4].split(":")[1], 16)
    return None


def release_port(port):
    """Frees a port taken by closed_port() so a server can listen on it."""
    for s in list(_HELD):
        if s.getsockname()[1] == port:
            s.close()
            _HELD.remove(s)
